"""The scripted oracle on the local backend, where its commands run on the host: it keeps nothing at a fixed
host path (it wrote /tmp/fix.diff, which two attempts or two users shared), and the demo's exit status says
when an agent verdict came out wrong (it checked validation and predictions only).

Each run is in a private mount namespace (root) with its own /tmp, so a path planted there touches no one
else's run; and what the demo's agent needs from the host is changed there, not in swe-rl."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.ns,
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare"),
]

SWE_RL = f"{sys.executable} -m swe_rl.cli.app"
ROOT = Path(__file__).resolve().parents[2]
# this host's git takes no patch on standard input (every other git command is the real one); /usr/local/sbin
# is first on the sandbox's PATH (sandbox/shell.py)
NO_PATCH_ON_STDIN = """mount -t tmpfs tmpfs /usr/local/sbin
printf '%s\\n' '#!/bin/sh' '[ "$1" = apply ] && [ "$2" = - ] && exit 1' 'exec /usr/bin/git "$@"' \
  >/usr/local/sbin/git
chmod +x /usr/local/sbin/git
"""


def _in_private_tmp(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` under sh in a mount namespace of its own whose /tmp is a new tmpfs (the cache in it). A
    checkout or venv under /tmp (a clone made there) is bound back into it from the old /tmp (on /mnt there)."""
    keep = sorted({str(p) for p in (ROOT, Path(sys.prefix)) if Path("/tmp") in p.parents})
    rebind = "".join(f'mkdir -p {k}\nmount --bind "/mnt/{k[len("/tmp/") :]}" {k}\n' for k in keep)
    setup = (
        "set -e\nmount --bind /tmp /mnt\nmount -t tmpfs tmpfs /tmp\n"
        + rebind
        + "export SWE_RL_CACHE=/tmp/cache\n"
    )
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", setup + script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_the_oracle_uses_no_fixed_host_path(tasks):
    """/tmp/fix.diff is a directory here (another user's, say): the oracle's fix was lost writing it."""
    ids = " ".join(f"-i {t.instance_id}" for t in tasks[:2])
    out = _in_private_tmp(
        f"mkdir /tmp/fix.diff\n{SWE_RL} eval --llm scripted:oracle -b local {ids} -o /tmp/run\n"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("resolved 2/2 "), out.stdout + out.stderr[-3000:]


def test_the_demo_fails_on_an_unexpected_agent_verdict():
    """The oracle's fix does not apply on this host: validation and the sample predictions are as expected,
    the agent eval's oracle tasks are not, and the demo exits 1 naming them."""
    out = _in_private_tmp(NO_PATCH_ON_STDIN + f"{SWE_RL} demo -b local --no-rl -o /tmp/demo\n")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "valid tasks 12/12" in out.stdout and "resolved 3/6 predictions" in out.stdout, out.stdout
    surprises = [line.split()[:2] for line in out.stdout.splitlines() if line.endswith("(UNEXPECTED)")]
    assert len(surprises) == 4 and all(kind == "scripted:oracle" for _, kind in surprises), out.stdout
