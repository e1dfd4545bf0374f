"""bench/strict_gold.py on a small real repository: what strict grading keeps and reverts of a gold patch,
with the packages read from a bare mirror, and 'undecided' without one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "strict_gold.py"
SETUP_CFG = "[metadata]\nname = kit\n\n[options]\ninstall_requires =\n    six\n\n[isort]\nline_length = 88\n"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "work"
    (work / "kit").mkdir(parents=True)
    (work / "kit" / "__init__.py").write_text("")
    (work / "kit" / "core.py").write_text("X = 1\n")
    (work / "script").mkdir()
    (work / "script" / "run.py").write_text("")
    (work / "setup.cfg").write_text(SETUP_CFG)
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    cache = tmp_path / "repos"
    (cache / "o").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(cache / "o" / "kit.git"))
    return cache, _git(work, "rev-parse", "HEAD")


def _new(path: str) -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+Y = 2\n"


EDIT_CORE = "diff --git a/kit/core.py b/kit/core.py\n--- a/kit/core.py\n+++ b/kit/core.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
# a test of the new script/helper.py, as pytest's rootdir insertion finds it (pylint-dev__astroid-1030's way)
TESTS = (
    "diff --git a/script/test_helper.py b/script/test_helper.py\nnew file mode 100644\n--- /dev/null\n"
    "+++ b/script/test_helper.py\n@@ -0,0 +1,2 @@\n+from helper import Y\n+def test_y(): assert Y == 2\n"
)
EDIT_CFG = (
    "diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n@@ -7,2 +7,5 @@\n"
    " [isort]\n line_length = 88\n+\n+[mypy-six]\n+ignore_missing_imports = True\n"
)


def _run(tmp_path: Path, *, mirror: bool = True) -> dict:
    cache, base = _mirror(tmp_path)
    rows = {
        "kit-1": EDIT_CORE + _new("kit/helpers.py"),
        "kit-2": EDIT_CORE + EDIT_CFG,
        "kit-3": EDIT_CORE + _new("script/helper.py"),
    }
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": i,
                    "repo": "o/kit",
                    "base_commit": base,
                    "patch": p,
                    "test_patch": TESTS,
                    "problem_statement": "Y is wrong",
                    "FAIL_TO_PASS": ["script/test_helper.py::test_y"],
                }
            )
            + "\n"
            for i, p in rows.items()
        )
    )
    out = tmp_path / "out.json"
    args = [sys.executable, str(SCRIPT), str(tasks), "--json", str(out)]
    subprocess.run(
        [*args, *(["--repo-cache", str(cache)] if mirror else [])], check=True, capture_output=True
    )
    return {row["instance_id"]: row for row in json.loads(out.read_text())["rows"]}


def test_kept_and_reverted_gold_paths(tmp_path):
    rows = _run(tmp_path)
    assert rows["kit-1"]["status"] == "kept"
    assert {p["path"]: p["status"] for p in rows["kit-1"]["paths"]}["kit/helpers.py"] == "kept"
    cfg = rows["kit-2"]
    assert cfg["status"] == "reverted"
    assert [(p["path"], p["rule"]) for p in cfg["paths"] if p["rule"]] == [("setup.cfg", "runner_config")]
    assert "[isort], [mypy-six]" in cfg["matters"][0] and "none is read at test time" in cfg["matters"][0]
    assert [(p["path"], p["rule"]) for p in rows["kit-3"]["paths"] if p["rule"]] == [
        ("script/helper.py", "outside_package")
    ]
    assert rows["kit-3"]["matters"] == ["script/helper.py: the test patch imports helper: the tests need it"]


def test_without_a_mirror_new_files_and_config_are_undecided(tmp_path):
    rows = _run(tmp_path, mirror=False)
    assert rows["kit-1"]["status"] == "undecided"
    assert rows["kit-2"]["status"] == "reverted"  # setup.cfg is runner_config by its name alone
    assert {p["path"]: p["status"] for p in rows["kit-3"]["paths"]}["kit/core.py"] == "kept"
