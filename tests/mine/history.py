"""A small real git history for mining tests, built with ``git`` itself.

First-parent line of ``main`` (oldest first):

1. ``initial``: package ``tiny`` (``add`` subtracts, ``sub`` adds: two bugs) and a test of ``mul``;
2. ``fix add``: the source fix and its test (fails before, passes after);
3. ``docs``: README only;
4. ``test only``: one more test of ``mul``;
5. ``refactor mul``: a source change whose new test already passes before (no FAIL_TO_PASS);
6. a ``--no-ff`` merge of branch ``fix-sub``: one commit fixing ``sub``, one adding its test and deleting
   an obsolete test file (which the harness must not be asked to run).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CALC = """def add(a, b):
    return a - b


def sub(a, b):
    return a + b


def mul(a, b):
    return a * b
"""
TEST_MUL = """from tiny.calc import mul


def test_mul():
    assert mul(2, 3) == 6
"""
TEST_ADD = """

def test_add():
    from tiny.calc import add

    assert add(2, 3) == 5
"""
TEST_SUB = """from tiny.calc import sub


def test_sub():
    assert sub(3, 1) == 2


def test_sub_zero():
    assert sub(0, 0) == 0
"""
FIX_ADD_MESSAGE = """Fix add: it subtracted

The add function in tiny/calc.py gave the difference of its arguments.
    return a + b

Signed-off-by: Dev <dev@example.invalid>
"""


class Builder:
    """Writes files and commits them at fixed dates, so commit ids are the same on every run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, when: str = "2024-01-01T00:00:00Z") -> str:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_AUTHOR_NAME": "Dev",
            "GIT_AUTHOR_EMAIL": "dev@example.invalid",
            "GIT_COMMITTER_NAME": "Dev",
            "GIT_COMMITTER_EMAIL": "dev@example.invalid",
            "GIT_AUTHOR_DATE": when,
            "GIT_COMMITTER_DATE": when,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        proc = subprocess.run(
            ["git", *args], cwd=self.root, env=env, capture_output=True, text=True, check=True
        )
        return proc.stdout.strip()

    def write(self, files: dict[str, str], *, append: bool = False) -> None:
        for path, text in files.items():
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a" if append else "w") as fh:
                fh.write(text)

    def commit(self, message: str, when: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message, when=when)
        return self.git("rev-parse", "HEAD")


def build_history(root: Path) -> dict[str, str]:
    """The history above at ``root``; returns the commit ids by name."""
    b = Builder(root)
    ids = {}
    b.write({"tiny/__init__.py": "", "tiny/calc.py": CALC, "tests/test_calc.py": TEST_MUL})
    b.write({"tests/test_old.py": "def test_old():\n    assert True\n"})
    ids["initial"] = b.commit("initial", "2024-01-01T10:00:00Z")
    b.write({"tiny/calc.py": CALC.replace("a - b", "a + b", 1)})
    b.write({"tests/test_calc.py": TEST_ADD}, append=True)
    ids["fix_add"] = b.commit(FIX_ADD_MESSAGE, "2024-01-02T10:00:00Z")
    b.write({"README.md": "# tiny\n"})
    ids["docs"] = b.commit("docs", "2024-01-03T10:00:00Z")
    b.write({"tests/test_calc.py": "\n\ndef test_mul_zero():\n    assert mul(0, 5) == 0\n"}, append=True)
    ids["test_only"] = b.commit("test only", "2024-01-04T10:00:00Z")
    calc = (root / "tiny/calc.py").read_text()
    b.write({"tiny/calc.py": calc.replace("return a * b", "return b * a")})
    b.write(
        {"tests/test_calc.py": "\n\ndef test_mul_commutes():\n    assert mul(2, 7) == mul(7, 2)\n"},
        append=True,
    )
    ids["refactor"] = b.commit("Refactor mul", "2024-01-05T10:00:00Z")
    b.git("checkout", "-q", "-b", "fix-sub")
    calc = (root / "tiny/calc.py").read_text()
    b.write({"tiny/calc.py": calc.replace("return a + b\n\n\ndef mul", "return a - b\n\n\ndef mul")})
    ids["branch_fix"] = b.commit("Make sub in tiny/calc.py subtract", "2024-01-06T10:00:00Z")
    b.write({"tests/test_sub.py": TEST_SUB})
    (root / "tests/test_old.py").unlink()
    ids["branch_test"] = b.commit("Test sub", "2024-01-06T11:00:00Z")
    b.git("checkout", "-q", "main")
    b.git("merge", "-q", "--no-ff", "-m", "Merge branch 'fix-sub'", "fix-sub", when="2024-01-07T10:00:00Z")
    ids["merge"] = b.git("rev-parse", "HEAD")
    return ids
