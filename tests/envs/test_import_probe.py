"""The import probe (envs/build/invenv/import_probe.py, fed by envs/build/import_check.py to the venv's interpreter): a real venv
with a distribution that requires numpy and fails at import in another distribution's file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from swe_rl.envs.build.import_check import ImportFailure, failed_imports


def _dist(site: Path, name: str, version: str, module: str, code: str, requires: str = "") -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}")
    (info / "RECORD").write_text(f"{module}.py,,\n")
    (site / f"{module}.py").write_text(code)


def test_a_failing_import_is_found_with_its_culprit(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    where = [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    site = Path(subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip())
    _dist(site, "fakepkg", "1.0", "fakemod", "import othermod\n", requires="Requires-Dist: numpy>=1.0\n")
    _dist(site, "other", "2.0", "othermod", 'raise ImportError("numpy.core.multiarray failed to import")\n')
    _dist(site, "plain", "3.0", "plainmod", "raise ImportError('not checked: it does not require numpy')\n")
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    notes: list[str] = []
    failures = failed_imports(venv / "bin" / "python", testbed, {}, notes.append)
    assert failures == [
        ImportFailure(
            "fakepkg", "1.0", "fakemod", "ImportError: numpy.core.multiarray failed to import", "other", "2.0"
        )
    ]
    assert failures[0].about_numpy and len(notes) == 1
    assert list(testbed.iterdir()) == []  # nothing written where the tests run
