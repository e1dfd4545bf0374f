"""The diff is bounded in what it hashes: a sparse 100 GB file (no blocks used) left in the repository makes
``diff()`` fail fast as the agent's outcome (OutputLimitError, as for any over-cap patch, which the episode scores as
``agent_error``), never a diff that reads 100 GB until its timeout. Real ns sandboxes."""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.conftest import available_factory

from swe_rl.agent.loop import left_patch
from swe_rl.agent.trajectory import Trajectory
from swe_rl.errors import BackendLostError, OutputLimitError
from swe_rl.sandbox.shell import FILE_CAP

pytestmark = pytest.mark.ns

SPARSE = "truncate -s 100G sparse.bin && stat -c '%s %b' sparse.bin"
PRE_FIX_DIFF = "git add -A >/dev/null && git -c core.quotepath=false diff --cached --no-color --binary HEAD"


async def test_a_sparse_100g_file_makes_the_diff_fail_fast_as_the_agents_outcome(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env) as box:
        made = await box.exec(SPARSE, timeout=30)
        size, blocks = (int(x) for x in made.output.split())
        assert size == 100 * 1024**3 and blocks < 64, made.output  # control: 100G apparent, no blocks used
        await box.exec("echo 'a real change' >> README.md", timeout=10)
        started = time.monotonic()
        with pytest.raises(OutputLimitError) as refused:  # the over-cap patch, as every backend types it
            await asyncio.wait_for(box.diff(), 60)
        assert time.monotonic() - started < 30
        assert not isinstance(refused.value, BackendLostError)
        assert "sparse.bin" in str(refused.value) and str(FILE_CAP) in str(refused.value)
        traj = Trajectory(instance_id="x", model="scripted")
        assert await left_patch(traj, box) is None and traj.exit_status == "agent_error"
        # the sandbox is still fine, and without the big file the same diff works
        await box.exec("rm sparse.bin", timeout=10)
        assert "a real change" in await box.diff()


async def test_control_the_pre_fix_diff_reads_the_sparse_file_past_a_short_timeout(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env) as box:
        await box.exec(SPARSE, timeout=30)
        result = await box.exec(PRE_FIX_DIFF, timeout=5)
        assert result.timed_out


async def test_files_under_the_bound_and_deletions_still_make_the_patch(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env) as box:
        listed = await box.exec("git ls-files | head -1", timeout=10)
        tracked = listed.output.strip()
        await box.exec(f"truncate -s 1M 'with space.bin' && rm -- '{tracked}'", timeout=10)
        patch = await box.diff()
        assert "with space.bin" in patch and "deleted file mode" in patch and tracked in patch
