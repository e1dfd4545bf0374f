"""The seal before Python 3.8, which has no audit hooks: the launcher and its modules run there (they are
written for Python 3.6+), but the evidence lives in closures any code of the process can walk, so the grader
counts nothing it says (``unverifiable``). Real interpreters from pyenv; the same run on this Python is the
control (confirmed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.envs.build.interpreters import find_python
from swe_rl.errors import ConfigError
from swe_rl.harness.seal import LAUNCHER, STAGED, UNAUDITED, Seal

CASES = """import unittest


class Cases(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(1 + 1, 2)
"""


def _python(*versions: str) -> Path | None:
    """A Python of one of ``versions`` wherever the env builds would find one (pyenv under $PYENV_ROOT or ~, uv,
    PATH); not a fixed /root path, which another user cannot even stat (/root is 0700)."""
    for version in versions:
        try:
            return find_python(version)[0]
        except ConfigError:
            continue
    return None


def _old_python() -> Path | None:
    return _python("3.6", "3.7")


def _sealed_run(python: str, root: Path, changed: str = "") -> tuple[Seal, dict[str, str], bytes | None]:
    """``python -m unittest`` of one passing test under the launcher; ``changed``: the code of ``helper.py``,
    a file the patch changed, which the test module imports."""
    seal = Seal.new(".git/swe-rl", runner="unittest")
    scratch = root / seal.scratch
    scratch.mkdir(parents=True)
    for name, text in STAGED.items():
        (scratch / name).write_text(text)
    (root / "test_cases.py").write_text(("import helper  # noqa: F401\n" if changed else "") + CASES)
    (root / "helper.py").write_text(changed)
    conf = {"key": seal.key.decode(), "changed": ["helper.py"] if changed else []}
    (root / f"{seal.prefix}.key").write_text(json.dumps(conf))
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to(python)  # the command's `python`, as an env's venv gives it
    plugged = seal.plugged("python -m unittest -v test_cases").split()
    run = subprocess.run(
        plugged,
        cwd=root,
        env={"SWE_RL_SEAL": str(root / seal.prefix), "PATH": f"{root / 'bin'}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 or "not allowed in the code under test" in run.stderr, run.stdout + run.stderr
    names = {"test_adds (test_cases.Cases)": "PASSED", "test_adds (test_cases.Cases.test_adds)": "PASSED"}
    out = root / f"{seal.prefix}.out"
    return seal, names, out.read_bytes() if out.exists() else None


@pytest.mark.skipif(_old_python() is None, reason="no Python 3.6 or 3.7 here (pyenv install 3.6.15)")
def test_a_seal_without_audit_hooks_confirms_nothing(tmp_path: Path) -> None:
    for python, state in ((sys.executable, "confirmed"), (str(_old_python()), UNAUDITED)):
        root = tmp_path / Path(python).parent.parent.name
        seal, names, data = _sealed_run(python, root)
        assert data is not None, python  # the launcher ran there and wrote its signed results
        printed = [n for n in names if n.endswith(".test_adds)") == (state != UNAUDITED)]  # 3.11 names twice
        check = seal.check(data, {"tests_status": {"PASS_TO_PASS": {"success": printed}}}, "parse_log_django")
        assert check.state == state, (python, check)
        assert json.loads(__import__("zlib").decompress(data.partition(b"\n")[2]))["audit"] is (
            state != UNAUDITED
        )
    assert plugged_launcher(seal) == f"python .git/swe-rl/{LAUNCHER} -m unittest -v"


def plugged_launcher(seal: Seal) -> str:
    return seal.plugged("python -m unittest -v")


# Python 3.8's marshal raises code.__new__ for every code object of a module it loads: a changed file's import
# of a standard-library module not yet loaded (as django__django-14011's gold patch imports wsgiref's server)
IMPORTS_A_MODULE = "from wsgiref import simple_server  # noqa: F401\n"
MAKES_CODE = "made = (lambda: 0).__code__.replace(co_name='made')\n"  # a code object made: stopped


@pytest.mark.skipif(_python("3.8") is None, reason="no Python 3.8 here (pyenv install 3.8.18)")
def test_python_38s_import_system_is_not_the_changed_files_code(tmp_path: Path) -> None:
    python = str(_python("3.8"))
    for name, changed, state in (
        ("imports", IMPORTS_A_MODULE, "confirmed"),
        ("makes", MAKES_CODE, "tripped"),
    ):
        seal, names, data = _sealed_run(python, tmp_path / name, changed)
        printed = [n for n in names if not n.endswith(".test_adds)")]
        check = seal.check(data, {"tests_status": {"PASS_TO_PASS": {"success": printed}}}, "parse_log_django")
        assert check.state == state, (name, check)
        if state == "tripped":  # the control: code made by the changed file is still stopped
            assert any(t.startswith("code.__new__ by the patched code at helper.py") for t in check.trips), (
                check
            )
