"""``./dev``, the README's entry point, as a user types it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_mistyped_command_names_itself_and_prints_the_usage_alone() -> None:
    out = subprocess.run([str(ROOT / "dev"), "tset"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert "unknown command 'tset'" in out.stderr
    assert "./dev test --quick" in out.stderr and "./dev demo" in out.stderr
    # the usage block and nothing of the script after it (it printed its `set -euo pipefail` line)
    assert all(line.startswith(("#", "\x1b")) for line in out.stderr.splitlines()), out.stderr
