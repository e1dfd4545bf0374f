"""swe_rl.cli.lazy: a command is imported when it runs, not when ``swe-rl`` starts (typer reads every
registered command's signature first, so one command's imports were every command's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from typer.testing import CliRunner
from swe_rl.cli.app import app
out = CliRunner().invoke(app, sys.argv[1:])
assert out.exit_code == 0, out.output
print(json.dumps(sorted(m for m in sys.modules if m.startswith("swe_rl."))))
"""


def imported(*words: str) -> set[str]:
    """The swe_rl modules a fresh interpreter holds after ``swe-rl <words>``."""
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, *words], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(ran.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("words", "module"),
    [
        (("eval", "--help"), "swe_rl.cli.train_rl"),
        (("train", "rl", "--help"), "swe_rl.cli.eval"),
        (("tasks", "list", "--help"), "swe_rl.cli.train_rl"),
        (("grade", "--help"), "swe_rl.cli.eval"),
    ],
)
def test_a_command_imports_only_its_own_module(words: tuple[str, ...], module: str) -> None:
    assert module not in imported(*words)
    # the positive control: that command's own run imports it, so the probe sees a lazy module once used
    assert module in imported(
        *{"swe_rl.cli.train_rl": ("train", "rl"), "swe_rl.cli.eval": ("eval",)}[module], "--help"
    )


def test_the_roots_help_lists_every_command_with_its_summary() -> None:
    from typer.testing import CliRunner

    from swe_rl.cli.app import COMMANDS, app

    shown = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    listed = [line.split()[0] for line in shown.split("Commands:", 1)[1].splitlines() if line.strip()]
    assert listed == list(COMMANDS)
    train = CliRunner().invoke(app, ["train", "--help"], terminal_width=200).output
    assert "rl   Train a small model with GRPO" in train and "sft  Fine-tune" in train
