"""bench/report_compare.py: two build reports compared entry by entry (status, env, gold, empty); a change in one
verdict's counts is a difference and the exit status says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "report_compare.py"


def _report(path: Path, gold_p2p: str, seconds: float) -> Path:
    entry = {
        "instance_id": "acme__widget-1",
        "status": "valid",
        "env": "0123456789abcdef",
        "seconds": seconds,
        "gold": f"resolved (F2P 1/1 P2P {gold_p2p})",
        "empty": "unresolved (F2P 0/1 P2P 3/3)",
    }
    path.write_text(json.dumps({"entries": {"acme__widget-1": entry}}))
    return path


def _run(*args: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_identical_reports_compare_equal_and_a_changed_count_does_not(tmp_path):
    before = _report(tmp_path / "a.json", "3/3", 40.0)
    same = _run(before, _report(tmp_path / "b.json", "3/3", 2.5))
    assert same.returncode == 0 and json.loads(same.stdout)["identical"] == 1
    assert json.loads(same.stdout)["after_seconds"]["median"] == 2.5
    other = _run(before, _report(tmp_path / "c.json", "2/3", 2.5))  # the control: one P2P test less
    result = json.loads(other.stdout)
    assert other.returncode == 1 and result["identical"] == 0
    assert result["differ"]["acme__widget-1"]["gold"][1] == "resolved (F2P 1/1 P2P 2/3)"
