"""One CLI vocabulary: one option name per idea across commands (another spelling is refused, naming it), and
every option that fills a settings field bounded and defaulted as that field is."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import annotated_types
import pytest
import typer
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from swe_rl.cli.app import app
from swe_rl.cli.lazy import tree
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.llm.base import SamplingParams
from swe_rl.runs.evaluation import EvalSettings
from swe_rl.train.grpo import GRPOSettings
from swe_rl.train.sft import SFTTrainSettings

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]
# options that fill these settings' fields (matched by parameter name), defaulted as the instance given
# (eval's episode: EpisodeSpec.for_eval, whose grading is not the field's, training's, default)
SETTINGS: list[tuple[tuple[str, ...], type[BaseModel], BaseModel | None]] = [
    (("eval",), EvalSettings, None),
    (("eval",), EpisodeSpec, EpisodeSpec.for_eval()),
    (("eval",), SamplingParams, None),
    (("train", "rl"), GRPOSettings, None),
    (("train", "rl"), EpisodeSpec, EpisodeSpec.for_training()),
    (("train", "sft"), SFTTrainSettings, None),
]
# where the command converts the value before it reaches the field
CONVERTED = {
    (("eval",), "run_cost_limit"): "0 means no limit and is passed as None",
    (("train", "sft"), "thinking"): "a word (default, on, off) becomes None, True or False",
}
# other names for today's --tasks, --jobs and --output-dir: no command takes them
NOT_OUR_NAMES = {"--source", "--concurrency", "--max-concurrent", "--out"}
# --out names a file there, not a run directory
FILE_OUT = {("report",), ("tasks", "synth"), ("tasks", "mine"), ("tasks", "split")}


def _commands() -> dict[tuple[str, ...], Any]:
    """Every command (not group) by its words."""
    return {
        path: c for path, c in tree(typer.main.get_command(app)).items() if not hasattr(c, "list_commands")
    }


def test_one_name_per_idea_across_every_command() -> None:
    commands = _commands()
    assert len(commands) > 20  # the whole tree was walked
    seen = {
        (path, name)
        for path, command in commands.items()
        for param in command.params
        for name in getattr(param, "opts", [])
    }
    clashes = sorted(
        (path, name)
        for path, name in seen
        if name in NOT_OUR_NAMES and not (name == "--out" and path in FILE_OUT)
    )
    assert clashes == []
    # and today's names are where the others would be
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


def test_another_spelling_is_refused_naming_the_option() -> None:
    """0.1.0 has no earlier release to keep spellings for: --source is an unknown option, named, not --tasks."""
    new = subprocess.run([*SWE_RL, "tasks", "list", "--tasks", "builtin"], capture_output=True, text=True)
    assert new.returncode == 0 and new.stdout  # the control: today's name runs the command
    for argv, name in (
        (["tasks", "list", "--source", "builtin"], "--source"),
        (["eval", "--max-concurrent", "3"], "--max-concurrent"),
        (["grade", "-p", "p.json", "--out", "logs"], "--out"),
    ):
        old = subprocess.run([*SWE_RL, *argv], capture_output=True, text=True)
        assert old.returncode == 2 and not old.stdout, old
        assert f"No such option: {name}" in old.stderr, old.stderr


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
    ("path", "model", "defaults"),
    SETTINGS,
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else getattr(v, "__name__", None),
)
def test_options_are_bounded_and_defaulted_as_the_settings_they_fill(path, model, defaults) -> None:
    command = _commands()[path]
    checked = []
    for param in command.params:
        if param.name not in model.model_fields or (path, param.name) in CONVERTED:
            continue
        field = model.model_fields[param.name]
        # an open bound (gt, lt) is the model's to enforce: the command line then sets none
        assert (param.min, param.max) == _bounds(model, param.name), f"{' '.join(path)} {param.opts}"
        default = getattr(defaults, param.name) if defaults is not None else field.default
        if default is not PydanticUndefined and param.default is not None:
            assert param.default == default, f"{' '.join(path)} {param.opts}"
        checked.append(param.name)
    assert checked  # the command fills this model's fields
