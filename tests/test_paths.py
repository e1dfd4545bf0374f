"""swe-rl's settings: one pydantic-settings model, read at call time, listed in docs/ARCHITECTURE.md, and an
unusable value a one-line error from the real command, naming the variable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import typer

from swe_rl.cli.app import app
from swe_rl.cli.lazy import tree
from swe_rl.paths import Settings, cache_dir

ROOT = Path(__file__).parent.parent
SECTION = (ROOT / "docs" / "ARCHITECTURE.md").read_text().split("## Settings come from the edges", 1)[1]
SECTION = SECTION.split("\n## ", 1)[0]


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table under ``header`` (its first row), ``\\|`` read as ``|``."""
    lines = text.split(header + "\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [
        [cell.strip().replace("\0", "|") for cell in line.replace("\\|", "\0").split("|")[1:-1]]
        for line in lines
    ]


def test_the_cache_root_is_read_when_asked_for(monkeypatch, tmp_path):
    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.setenv("SWE_RL_CACHE", "")  # empty is unset
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "swe-rl"


def test_the_docs_list_every_variable_with_the_models_default_and_meaning():
    def shown(default: object) -> str:
        if default is None:
            return "unset"
        return f"`{int(default)}`" if isinstance(default, bool) else f"`{default}`"

    expected = [
        [f"`{variable}`", shown(Settings.model_fields[name].default), Settings.model_fields[name].description]
        for name, variable in Settings.variables().items()
    ]
    assert table_rows("| a | b |\n|---|---|\n| `x \\| y` | z |\n\nafter", "| a | b |") == [["`x | y`", "z"]]
    assert table_rows(SECTION, "| variable | default | meaning |") == expected


def test_the_docs_list_every_variable_an_option_falls_back_on():
    declared = {
        (param.envvar, " ".join(words), max(param.opts, key=len))
        for words, command in tree(typer.main.get_command(app)).items()
        for param in command.params
        if getattr(param, "envvar", None)
    }
    listed = set()
    for variable, option in table_rows(SECTION, "| variable | option |"):
        group, commands, flag = re.match(r"`(\w+) ([\w/-]+) (--[\w-]+)`", option).groups()
        listed |= {(variable.strip("`"), f"{group} {command}", flag) for command in commands.split("/")}
    assert declared and listed == declared


def test_a_bad_value_is_a_one_line_error_from_the_real_command_naming_the_variable(tmp_path):
    swe_rl = Path(sys.executable).parent / "swe-rl"
    env = {**os.environ, "SWE_RL_CACHE": str(tmp_path)}

    def ls(**variables: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(swe_rl), "env", "ls", "--json"],
            env={**env, **variables},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    good = ls(SWE_RL_MAX_CONTEXT="4096")
    assert good.returncode == 0, good.stderr
    bad = ls(SWE_RL_MAX_CONTEXT="lots")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "error: bad swe-rl setting: SWE_RL_MAX_CONTEXT='lots': "
        "Input should be a valid integer, unable to parse string as an integer"
    ]
