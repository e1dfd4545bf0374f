"""One CLI vocabulary: one option name per idea across commands, earlier spellings still accepted (with a
note), and every option that fills a settings field bounded and defaulted as that field is."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import annotated_types
import pytest
import typer
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from swe_rl.cli.app import RENAMED, RENAMED_IN, app, modern_argv
from swe_rl.llm.base import SamplingParams
from swe_rl.runs.evaluation import EvalSettings
from swe_rl.train.grpo import GRPOSettings
from swe_rl.train.sft import SFTTrainSettings

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]
# options that fill these settings' fields (matched by parameter name)
SETTINGS: list[tuple[tuple[str, ...], type[BaseModel]]] = [
    (("eval",), EvalSettings),
    (("eval",), SamplingParams),
    (("train", "rl"), GRPOSettings),
    (("train", "sft"), SFTTrainSettings),
]
# where the command converts the value before it reaches the field
CONVERTED = {
    (("eval",), "run_cost_limit"): "0 means no limit and is passed as None",
    (("train", "sft"), "thinking"): "a word (default, on, off) becomes None, True or False",
}
# --out names a file there, not a run directory
FILE_OUT = {("report",), ("tasks", "synth"), ("tasks", "mine"), ("tasks", "split")}


def _commands() -> dict[tuple[str, ...], Any]:
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
        else:
            found[path] = command

    walk(typer.main.get_command(app), ())
    return found


def test_earlier_spellings_become_todays_names_with_a_note() -> None:
    argv, notes = modern_argv(["eval", "--source", "builtin", "--max-concurrent=3", "-o", "run"])
    assert argv == ["eval", "--tasks", "builtin", "--jobs=3", "-o", "run"] and len(notes) == 2
    assert modern_argv(["grade", "-p", "p.json", "--out", "logs"])[0][-2:] == ["--output-dir", "logs"]
    assert modern_argv(["data", "sft", "runs/a", "--out", "d"])[0][-2:] == ["--output-dir", "d"]
    # a file's --out stays, and nothing after -- is touched
    assert modern_argv(["report", "run", "--out", "page.html"]) == (
        ["report", "run", "--out", "page.html"],
        [],
    )
    assert modern_argv(["eval", "--", "--source"]) == (["eval", "--", "--source"], [])


def test_one_name_per_idea_across_every_command() -> None:
    commands = _commands()
    assert len(commands) > 20  # the whole tree was walked
    seen = {
        (path, name)
        for path, command in commands.items()
        for param in command.params
        for name in getattr(param, "opts", [])
    }
    old = set(RENAMED) | {name for renamed in RENAMED_IN.values() for name in renamed}
    clashes = sorted(
        (path, name) for path, name in seen if name in old and not (name == "--out" and path in FILE_OUT)
    )
    assert clashes == []
    # and today's names are where the old ones were
    assert (
        (("eval",), "--jobs") in seen
        and (("env", "build"), "--tasks") in seen
        and (("grade",), "--output-dir") in seen
    )


def test_one_short_name_per_option_across_every_command() -> None:
    """``-s`` is --tasks wherever --tasks is (``tasks split`` said ``-t``)."""
    shorts = {
        (path, tuple(sorted(name for name in param.opts if not name.startswith("--"))))
        for path, command in _commands().items()
        for param in command.params
        if "--tasks" in getattr(param, "opts", [])
    }
    assert len(shorts) > 5 and {short for _, short in shorts} == {("-s",)}, sorted(shorts)


def test_an_earlier_spelling_still_runs_the_command_and_says_so() -> None:
    new = subprocess.run([*SWE_RL, "tasks", "list", "--tasks", "builtin"], capture_output=True, text=True)
    old = subprocess.run([*SWE_RL, "tasks", "list", "--source", "builtin"], capture_output=True, text=True)
    assert new.returncode == old.returncode == 0 and new.stdout == old.stdout and new.stdout
    assert "--source is now --tasks" in old.stderr and "is now" not in new.stderr
    unknown = subprocess.run([*SWE_RL, "tasks", "list", "--sauce", "builtin"], capture_output=True, text=True)
    assert unknown.returncode == 2  # the control: an unknown name is still refused


def _bounds(model: type[BaseModel], field: str) -> tuple[Any, Any]:
    """(lowest accepted if closed else None, highest accepted if closed else None) of a field."""
    low = high = None
    for rule in model.model_fields[field].metadata:
        if isinstance(rule, annotated_types.Ge):
            low = rule.ge
        elif isinstance(rule, annotated_types.Le):
            high = rule.le
    return low, high


@pytest.mark.parametrize(
    ("path", "model"), SETTINGS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else None
)
def test_options_are_bounded_and_defaulted_as_the_settings_they_fill(path, model) -> None:
    command = _commands()[path]
    checked = []
    for param in command.params:
        if param.name not in model.model_fields or (path, param.name) in CONVERTED:
            continue
        field = model.model_fields[param.name]
        # an open bound (gt, lt) is the model's to enforce: the command line then sets none
        assert (param.min, param.max) == _bounds(model, param.name), f"{' '.join(path)} {param.opts}"
        if field.default is not PydanticUndefined and param.default is not None:
            assert param.default == field.default, f"{' '.join(path)} {param.opts}"
        checked.append(param.name)
    assert checked  # the command fills this model's fields
