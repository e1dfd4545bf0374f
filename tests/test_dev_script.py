"""``./dev`` and the README's quick start, as a user types them."""

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


def test_the_quick_start_says_how_a_fresh_shell_finds_swe_rl() -> None:
    """README's commands say `swe-rl`, which a new shell did not find: the quick start now says to activate
    .venv, and that line, run in a shell with a bare PATH, gives `swe-rl`."""
    quick_start = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = quick_start.split("```bash\n", 1)[1].split("```", 1)[0]
    activate = [line.split("#")[0].strip() for line in block.splitlines() if "activate" in line]
    assert activate == ["source .venv/bin/activate"], block
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        return  # no .venv here to run it in
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    line = f"{activate[0]} && command -v swe-rl && swe-rl --help"
    out = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith(str(ROOT / ".venv" / "bin" / "swe-rl")), out.stderr
    assert "Usage: swe-rl" in out.stdout
