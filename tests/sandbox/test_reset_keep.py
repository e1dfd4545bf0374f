"""A reset in place that keeps named processes (sandbox/reset.py, ns.py ``reset(keep=...)``), and the limits
a command can lower for its whole sandbox. Real ns sandboxes."""

from __future__ import annotations

import os

import pytest
from tests.conftest import available_factory

pytestmark = pytest.mark.ns

START = "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $!"


async def _pids(box) -> set[int]:  # type: ignore[no-untyped-def]
    out = (await box.exec("ps -eo pid= ", timeout=10)).output
    return {int(p) for p in out.split()}


async def test_a_kept_process_survives_with_its_priority_put_back(textkit_env):
    async with await available_factory("ns").create(textkit_env) as box:
        kept = int((await box.exec(START, timeout=10)).output.split()[-1])
        other = int((await box.exec(START, timeout=10)).output.split()[-1])
        assert (await box.exec(f"renice -n 19 -p {kept} 1", timeout=10)).returncode == 0
        await box.reset(keep=[kept])
        assert box.restart_reason is None
        pids = await _pids(box)
        assert kept in pids and other not in pids
        nice = await box.exec(f"ps -o ni= -p {kept} -p 1", timeout=10)
        # put back to where the sandbox started: this process's niceness (the suite may run under `nice`)
        start = str(os.nice(0))
        assert nice.output.split() == [start, start], (
            "the kept process's and the shell's priority are put back"
        )
        # the positive control: without keep, it goes like the rest
        await box.reset()
        assert kept not in await _pids(box)


async def test_a_shell_whose_limits_a_command_lowered_is_restarted(textkit_env):
    async with await available_factory("ns").create(textkit_env) as box:
        await box.reset()
        assert box.restart_reason is None, "the positive control: untouched, the reset is in place"
        lowered = await box.exec(
            "prlimit --pid 1 --nofile=64:64 && prlimit --pid 1 --nofile --output HARD", timeout=10
        )
        assert lowered.returncode == 0 and "64" in lowered.output, lowered.output
        # every later command would inherit it, the next episode's included
        assert (await box.exec("ulimit -Hn", timeout=10)).output.strip() == "64"
        await box.reset()
        assert box.restart_reason and "limits" in box.restart_reason
        assert (await box.exec("ulimit -Hn", timeout=10)).output.strip() != "64"


async def test_a_kept_process_whose_limits_were_lowered_is_ended(textkit_env):
    async with await available_factory("ns").create(textkit_env) as box:
        kept = int((await box.exec(START, timeout=10)).output.split()[-1])
        assert (await box.exec(f"prlimit --pid {kept} --nproc=8:8", timeout=10)).returncode == 0
        await box.reset(keep=[kept])
        assert box.restart_reason is None and kept not in await _pids(box)
