"""``./dev test --quick`` selects tests by marker (conftest marks the backend-parametrized ones). These
collect its selection and CI's, as this user, and check what each leaves out."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOME = (
    "tests/sandbox/test_contract.py",
    "tests/sandbox/test_reset_keep.py",
    "tests/harness/test_reward_hacking.py",
)


def _selections() -> tuple[str, str]:
    """The marker expressions of ``./dev test`` (CI) and ``./dev test --quick``, in that order."""
    ci, quick = re.findall(r'markers="([^"]+)"', (ROOT / "dev").read_text())
    return ci, quick


def _collect(markers: str, *paths: str) -> list[str]:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            markers,
            *paths,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_ci_still_selects_everything_but_slow():
    ci, quick = _selections()
    assert ci == "not slow"
    assert quick == "not slow and not ns and not docker and not heavy"


def test_quick_leaves_out_the_ns_docker_and_remote_backends_and_keeps_local():
    ids = _collect(_selections()[1], *SOME)
    contract = [i for i in ids if "test_contract.py" in i]
    assert contract and all(i.endswith("[local]") for i in contract), contract
    assert not [i for i in ids if "test_reset_keep.py" in i]  # ns by its module's mark
    # its module-scoped fixture takes the backend as a parameter
    assert not [i for i in ids if re.search(r"\[(ns|docker|remote)[-\]]", i)], ids


def test_ci_keeps_every_backend():
    ids = _collect(_selections()[0], *SOME)
    for backend in ("ns", "docker", "local", "remote"):
        assert [i for i in ids if i.endswith(f"[{backend}]") and "test_contract.py" in i], backend
    assert [i for i in ids if "test_reset_keep.py" in i]
    assert [i for i in ids if "test_reward_hacking.py" in i and "[remote-" in i]
