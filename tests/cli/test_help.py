"""What a newcomer reads first: every command's --help, rendered by the real CLI, says what the code declares.

Bracketed text in a help string (``[default: ...]``, ``swe-rl[ray]``) must survive rendering, and no flag may
look as if it took a value.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from swe_rl.cli.app import app


def _tree() -> dict[tuple[str, ...], Any]:
    """Every command and group of the app by its words, the root included."""
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        found[path] = command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


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
