"""bench/mine_recall.py on a small real history: where each reference fix landed (by merge subject, squash
subject, gold patch; one not locatable) and the verdicts of score against a mined file and its state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "mine_recall.py"
REPO = "o/kit"


def _git(cwd: Path, *args: str, date: str = "") -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    ident = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    return subprocess.run(
        ["git", *ident, *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _write(work: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)


def _pr(
    work: Path, branch: str, files: dict[str, str], subject: str, date: str, *, squash: bool = False
) -> str:
    """A change on ``branch`` merged into main (--no-ff with ``subject``, or as one squashed commit)."""
    if squash:
        _write(work, files)
        _git(work, "add", "-A")
        _git(work, "commit", "-qm", subject, date=date)
        return _git(work, "rev-parse", "HEAD")
    _git(work, "checkout", "-qb", branch)
    _write(work, files)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", f"work on {branch}", date=date)
    _git(work, "checkout", "-q", "main")
    _git(work, "merge", "-q", "--no-ff", "-m", subject, branch, date=date)
    return _git(work, "rev-parse", "HEAD")


def _history(tmp_path: Path) -> tuple[Path, dict[int, str], str]:
    work = tmp_path / "kit"
    work.mkdir()
    _git(work, "init", "-q")
    _write(
        work,
        {"kit/core.py": "A = 1\n", "kit/util.py": "B = 1\n", "tests/test_core.py": "def test_a(): pass\n"},
    )
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "initial", date="2020-01-01T10:00:00Z")
    merges = {
        1: _pr(
            work,
            "fix-a",
            {"kit/core.py": "A = 2\n", "tests/test_core.py": "def test_a(): pass\ndef test_fix(): pass\n"},
            "Merge pull request #1 from someone/fix-a",
            "2020-01-05T10:00:00Z",
        ),
        2: _pr(
            work,
            "",
            {"kit/util.py": "B = 2\n", "tests/test_util.py": "def test_util(): pass\n"},
            "Fix util (#2)",
            "2020-01-06T10:00:00Z",
            squash=True,
        ),
        3: _pr(
            work,
            "fix-c",
            {"kit/core.py": "A = 3\n", "tests/test_core.py": "def test_a(): pass\ndef test_c(): pass\n"},
            "Merge branch 'fix-c'",
            "2020-01-07T10:00:00Z",
        ),
        5: _pr(
            work,
            "fix-e",
            {"kit/core.py": "A = 5\n"},
            "Merge pull request #5 from x/fix-e",
            "2020-01-08T10:00:00Z",
        ),
        6: _pr(
            work,
            "fix-f",
            {"kit/core.py": "A = 6\n", "tests/test_core.py": "def test_f(): pass\n"},
            "Merge pull request #6 from x/fix-f",
            "2020-03-01T10:00:00Z",
        ),
    }
    gold3 = _git(work, "diff", f"{merges[3]}^1", merges[3], "--", "kit/core.py")
    bare = tmp_path / "repos" / "o" / "kit.git"
    bare.parent.mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return bare, merges, gold3


def _patch(path: str, old: str, new: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


def _reference(tmp_path: Path, gold3: str) -> Path:
    rows = [
        (
            1,
            _patch("kit/core.py", "A = 1", "A = 2"),
            ["tests/test_core.py::test_fix"],
            "2020-01-04T00:00:00Z",
        ),
        (
            2,
            _patch("kit/util.py", "B = 1", "B = 2"),
            ["tests/test_util.py::test_util"],
            "2020-01-05T00:00:00Z",
        ),
        (3, gold3, ["test_c (tests.test_core.CoreTests)"], "2020-01-06T00:00:00Z"),
        (4, _patch("kit/gone.py", "C = 1", "C = 2"), ["test_gone"], "2020-01-06T00:00:00Z"),
        (5, _patch("kit/core.py", "A = 3", "A = 5"), ["test_e"], "2020-01-07T00:00:00Z"),
        (6, _patch("kit/core.py", "A = 5", "A = 6"), ["test_f"], "2020-02-20T00:00:00Z"),
    ]
    frame = pd.DataFrame(
        [
            {
                "repo": REPO,
                "instance_id": f"o__kit-{n}",
                "patch": patch,
                "FAIL_TO_PASS": json.dumps(f2p),
                "created_at": created,
            }
            for n, patch, f2p, created in rows
        ]
    )
    frame.loc[len(frame)] = {**frame.iloc[0].to_dict(), "repo": "o/other", "instance_id": "o__other-1"}
    out = tmp_path / "ref.parquet"
    frame.to_parquet(out)
    return out


def _mined(tmp_path: Path, merges: dict[int, str]) -> Path:
    """A task file as the miner writes it: another fix of #1's file sharing its test (first in the file), #1
    kept with the reference's test (as pytest names it, with a parameter), #2 kept with another test; a
    state file with #3 dropped at validate."""
    rows = [
        {
            "instance_id": "m-0",
            "FAIL_TO_PASS": ["tests/test_core.py::test_fix"],
            "mine": {"commit": "f" * 40, "source_files": ["kit/core.py"]},
        },
        {
            "instance_id": "m-1",
            "FAIL_TO_PASS": ["tests/test_core.py::test_fix"],
            "mine": {"commit": merges[1], "source_files": ["kit/core.py"]},
        },
        {
            "instance_id": "m-2",
            "FAIL_TO_PASS": ["tests/test_util.py::test_other[x]"],
            "mine": {"commit": merges[2], "source_files": ["kit/util.py"]},
        },
    ]
    tasks = tmp_path / "mined.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    decided = {
        merges[1]: {"kept": True, "stage": "kept", "record": rows[1]},
        merges[2]: {"kept": True, "stage": "kept", "record": rows[2]},
        merges[3]: {"kept": False, "stage": "validate", "reason": "no FAIL_TO_PASS", "detail": ""},
    }
    (tmp_path / "mined.mine-state.json").write_text(json.dumps({"fingerprint": "x", "decided": decided}))
    return tasks


def _run(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_pick_locates_each_rule_and_the_densest_window(tmp_path: Path) -> None:
    _, merges, gold3 = _history(tmp_path)
    ref = _reference(tmp_path, gold3)
    out = tmp_path / "pick.json"
    args = ["pick", "--ref", str(ref), "--repos-dir", str(tmp_path / "repos"), "--repo", REPO]
    table = _run(*args, "--days", "31", "--days", "1", "--out", str(out))
    assert table
    (res,) = json.loads(out.read_text())["repos"]
    rules = {loc["instance_id"]: (loc["commit"], loc["rule"]) for loc in res["located"]}
    assert rules["o__kit-1"] == (merges[1], "merge subject")
    assert rules["o__kit-2"] == (merges[2], "squash subject")
    assert rules["o__kit-3"] == (merges[3], "gold patch")  # subject names no PR
    assert [u["instance_id"] for u in res["unlocated"]] == ["o__kit-4"]
    assert res["instances"] == 6  # o/other's row is not this repository's
    month, day = res["windows"]
    assert month["instances"] == ["o__kit-1", "o__kit-2", "o__kit-3", "o__kit-5"]
    assert month["commits"] == 4  # the four merges from Jan 5; #6 lands in March
    assert month["since"] == "2020-01-05 00:00:00 +0000" and month["until"] == "2020-02-04 23:59:59 +0000"
    assert day["count"] == 1 and day["instances"] == ["o__kit-1"]  # one a day: the earliest
    assert "o__kit-4" in table


def test_score_verdicts(tmp_path: Path) -> None:
    bare, merges, gold3 = _history(tmp_path)
    ref, tasks, out = _reference(tmp_path, gold3), _mined(tmp_path, merges), tmp_path / "score.json"
    period = ["--since", "2020-01-01 00:00:00 +0000", "--until", "2020-01-31 23:59:59 +0000"]
    text = _run(
        "score",
        "--ref",
        str(ref),
        "--repo",
        f"{REPO}={bare}",
        *period,
        "--tasks",
        str(tasks),
        "--out",
        str(out),
    )
    report = json.loads(out.read_text())
    got = {i["instance_id"]: i for i in report["instances"]}
    assert sorted(got) == ["o__kit-1", "o__kit-2", "o__kit-3", "o__kit-4", "o__kit-5"]  # #6 landed in March
    assert got["o__kit-1"]["produced"] and got["o__kit-1"]["common"] == ["test_fix"]  # positive control
    assert got["o__kit-1"]["row"] == "m-1", "its own row, not another fix's that shares the file and test"
    # negative control: kept, by the same files, but another test
    assert not got["o__kit-2"]["produced"]
    assert got["o__kit-2"]["reason"] == (
        "kept but no FAIL_TO_PASS in common (ours: test_other[x]; theirs: test_util)"
    )
    assert got["o__kit-3"]["reason"] == "dropped at validate: no FAIL_TO_PASS"
    assert got["o__kit-4"]["reason"].startswith("not a candidate: no commit subject names the PR")
    assert got["o__kit-5"]["reason"] == "dropped at history: no test change"
    assert (report["produced"], report["in_period"], report["recall"]) == (1, 5, 0.2)
    assert "recall o/kit: 1/5 = 20.0 %" in text


def test_normalized_test_names() -> None:
    import importlib.util

    sys.path.insert(0, str(SCRIPT.parent))  # the script's own helper module, as running it finds it
    spec = importlib.util.spec_from_file_location("mine_recall", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["mine_recall"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    norm = module.normalize_test
    assert norm("tests/test_a.py::TestX::test_y[a::b-1]") == "test_y[a::b-1]"
    assert norm("test_y (tests.test_a.TestX)") == "test_y"
    assert norm("test_y") == "test_y"
    assert norm("test_y[1]") != norm("test_y[2]")
