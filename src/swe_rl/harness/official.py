"""The bridge to the ``swebench`` package: its log parsers and grading functions, imported lazily.

Nothing here re-implements SWE-bench's semantics; we only choose the parser for a task and hand
swebench its own ``TestSpec`` and log file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from swe_rl.errors import ConfigError, MissingExtraError
from swe_rl.tasks.model import Task
from swe_rl.tasks.rowspec import row_log_parser

# Markers written by the eval script, identical to swebench.harness.constants.
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
DEFAULT_PARSER = "parse_log_pytest"


def _swebench() -> tuple[Any, Any]:
    try:
        from swebench.harness import grading
        from swebench.harness.log_parsers import PARSER_REGISTRY
    except ImportError as exc:
        raise MissingExtraError("swebench", "grading", f"grading with SWE-bench's parsers ({exc})") from None
    return grading, PARSER_REGISTRY


def preload() -> float:
    """Import swebench's grading now, so that a long-lived server's first verdict does not wait for it (2-2.5 s
    on the project's 2-core machines); the seconds the import took."""
    started = time.perf_counter()
    _swebench()
    return time.perf_counter() - started


def parser_name(task: Task) -> str:
    """The task's log parser: named by the record (or its install_config), else swebench's for its repo, else pytest's."""
    _, registry = _swebench()
    named = task.log_parser or row_log_parser(task)
    if named:
        if named not in registry:
            raise ConfigError(
                f"{task.instance_id}: unknown log_parser {named!r} (not in swebench's PARSER_REGISTRY)"
            )
        return named
    from swebench.harness.log_parsers import python as py_parsers

    by_repo = getattr(py_parsers, "MAP_REPO_TO_PARSER_PY", {})
    func = by_repo.get(task.repo)
    if func is not None:
        for name, candidate in registry.items():
            if candidate is func:
                return str(name)
    return DEFAULT_PARSER


def test_spec(task: Task, parser: str | None = None) -> Any:
    """swebench's own ``TestSpec`` for grading this task's log (``parser``: its log parser, where known)."""
    from swebench.types import TestSpec

    return TestSpec(
        instance_id=task.instance_id,
        image=task.image_name or "",
        eval_script_list=[],
        repo=task.repo,
        version=task.version,
        FAIL_TO_PASS=list(task.FAIL_TO_PASS),
        PASS_TO_PASS=list(task.PASS_TO_PASS),
        log_parser=parser or parser_name(task),
        eval_type=task.eval_type or "pass_and_fail",
    )


def official_report(
    task: Task, model_patch: str | None, log_path: str, parser: str | None = None
) -> dict[str, Any]:
    """``swebench.harness.grading.get_eval_report`` for this task and log: the official verdict."""
    grading, _ = _swebench()
    prediction = {"instance_id": task.instance_id, "model_patch": model_patch, "model_name_or_path": "swe-rl"}
    report: dict[str, Any] = grading.get_eval_report(test_spec(task, parser), prediction, log_path, True)
    return dict(report[task.instance_id])


def parse_test_log(log: str, parser: str = DEFAULT_PARSER) -> dict[str, str]:
    """Test name -> status (PASSED, FAILED, ...) as swebench's parser ``parser`` reads a raw test log."""
    return log_reader(parser)(log)


def log_reader(parser: str = DEFAULT_PARSER) -> Callable[[str], dict[str, str]]:
    """swebench's parser ``parser`` as a function of a log (for many logs: looked up and set up once)."""
    _, registry = _swebench()
    if parser not in registry:
        raise ConfigError(f"unknown log parser {parser!r} (not in swebench's PARSER_REGISTRY)")
    from swebench.types import TestSpec

    spec = TestSpec(
        instance_id="swe-rl-log",
        image="",
        eval_script_list=[],
        repo="",
        version="",
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        log_parser=parser,
    )
    read = registry[parser]
    return lambda log: dict(read(log, spec))
