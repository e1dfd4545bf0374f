"""What a newcomer reads first: every command's --help, rendered by the real CLI, says what the code declares.

Bracketed text in a help string (``[default: ...]``, ``swe-rl[ray]``) must survive rendering, no flag may look as
if it took a value, and the examples the help gives must be accepted by the command they are for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from typer.testing import CliRunner

from swe_rl.agent.config import load_agent_config
from swe_rl.cli.app import app
from swe_rl.cli.lazy import tree
from swe_rl.cli.options import with_overrides
from swe_rl.runs.evaluation import EvalSettings
from swe_rl.train.grpo import GRPOSettings
from swe_rl.train.sft import SFTTrainSettings

# the settings each command's -c applies to
CONFIGURED: dict[tuple[str, ...], type[BaseModel]] = {
    ("eval",): EvalSettings,
    ("train", "rl"): GRPOSettings,
    ("train", "sft"): SFTTrainSettings,
}


def _tree() -> dict[tuple[str, ...], Any]:
    """Every command and group of the app by its words, the root included."""
    return tree(typer.main.get_command(app))


def render(*words: str) -> str:
    out = CliRunner().invoke(app, [*words, "--help"], terminal_width=200, max_content_width=200)
    assert out.exit_code == 0, out.output
    return out.output


def squashed(text: str) -> str:
    """Without any whitespace: a phrase wrapped onto the next line (even at a hyphen) still matches."""
    return "".join(text.split())


def options(help_text: str) -> dict[str, str]:
    """Each option's entry in a rendered help (names, type and help, single-spaced), by its long name."""
    entries: list[str] = []
    for line in help_text.split("Options:", 1)[1].splitlines():
        if re.match(r"^  -", line):
            entries.append(line.strip())
        elif line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
    return {
        re.search(r"--[\w-]+", entry).group(0): " ".join(entry.split())  # type: ignore[union-attr]
        for entry in entries
    }


@pytest.fixture(scope="module")
def rendered() -> dict[tuple[str, ...], str]:
    return {path: render(*path) for path in _tree()}


def _declared_help(command: Any) -> list[str]:
    texts = [command.help or ""]
    texts += [getattr(param, "help", None) or "" for param in command.params]
    return texts


def test_bracketed_text_of_every_help_string_is_shown(rendered) -> None:
    """rich markup used to take these for tags and drop them: `pip install 'swe-rl'` installed no extra."""
    tree = _tree()
    declared = {
        path: [b for text in _declared_help(command) for b in re.findall(r"\[[^\[\]]+\]", text)]
        for path, command in tree.items()
    }
    assert sum(b.startswith("[default:") for bs in declared.values() for b in bs) >= 11  # the walk saw them
    assert "[ray]" in declared[("cluster", "up")]
    missing = {
        " ".join(path): [b for b in brackets if squashed(b) not in squashed(rendered[path])]
        for path, brackets in declared.items()
    }
    assert {path: lost for path, lost in missing.items() if lost} == {}
    assert "pip install 'swe-rl[ray]'" in rendered[("cluster", "up")]


def test_no_flag_shows_a_value(rendered) -> None:
    assert len(rendered) > 30
    assert [" ".join(path) for path, text in rendered.items() if "<bool>" in text] == []
    eval_options = options(rendered[("eval",)])
    assert eval_options["--resume"].startswith("--resume Continue a run")  # the flag, then its help


def test_eval_says_every_default_and_what_temperature_is(rendered) -> None:
    entries = options(rendered[("eval",)])
    for name in ("--llm", "--step-limit", "--wall-time"):
        assert "[default:" in entries[name], entries[name]
    shipped = load_agent_config()  # the swebench config, eval's default
    assert f"{shipped.step_limit} for swebench" in entries["--step-limit"]
    assert f"{shipped.wall_time_s:g} for swebench" in entries["--wall-time"]
    temperature = entries["--temperature"]
    assert temperature.split("[default:")[0].strip() != "--temperature <float range>", temperature


@pytest.mark.parametrize("path", list(CONFIGURED), ids=" ".join)
def test_the_config_example_of_the_help_is_accepted(rendered, path, tmp_path: Path) -> None:
    """The example is applied as the command applies -c; `trl.loss_type=grpo` under eval was refused."""
    entry = options(rendered[path])["--config"]
    example = re.search(r"e\.g\. -c (\S+)\. Repeatable", entry)
    assert example, entry
    settings = CONFIGURED[path](output_dir=tmp_path)
    assert with_overrides(settings, [example.group(1)]) != settings


def test_every_command_with_a_config_option_is_checked() -> None:
    with_config = {
        path
        for path, command in _tree().items()
        if any("--config" in getattr(param, "opts", []) for param in command.params)
    }
    assert with_config == set(CONFIGURED)


def test_the_llm_option_lists_every_model_the_command_accepts(rendered) -> None:
    """Every ``--llm`` spec of llm.select (scripted ones accepted by the oracle module): it listed 2 of 5."""
    from swe_rl.llm.oracle import scripted_for
    from swe_rl.llm.select import LLM_SPECS
    from swe_rl.tasks.model import Task

    specs = [spec.strip() for spec in LLM_SPECS.split("|")]
    for kind in (spec.partition(":")[2] for spec in specs if spec.startswith("scripted:")):
        scripted_for(kind, Task(instance_id="x", repo="x/x", base_commit="0000"))  # the spec is a real one
    said = squashed(options(rendered[("eval",)])["--llm"])
    assert len(specs) == 7 and [spec for spec in specs if squashed(spec) not in said] == []
