"""A reset in place hands the next use the pristine capacity of the sandbox's writable space (issue 58, item
7): the bytes and inodes the previous use took are free when ``reset()`` returns. The old testbed layer
used to be removed in the background after the reset, from the tmpfs the new one was on, and the next use's
first ``df`` showed the previous use's usage; each use's upper layer is now a tmpfs of its own, dropped
whole (sandbox/reset.py).

Use N fills the testbed (a small ``Limits.disk_mb``, so the fill is quick) in bytes and in files, and is
shown to be full (the positive control: the same fill fails there); after the reset, use N+1's very first
command sees the capacity a fresh sandbox has (``df`` and ``df -i``, of the testbed and of ``/tmp``) and
makes the same fill again."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.base import Limits
from swe_rl.sandbox.ns import NsSandbox

pytestmark = pytest.mark.ns

LIMITS = Limits(disk_mb=32)  # 2,048 inodes
FILES = LIMITS.inodes - 300  # most of the inodes, as empty files
MIB = 24  # most of the bytes
# bytes used and free, inodes used and free, of the testbed's filesystem (the upper layer's: overlayfs
# reports its statfs), then of /tmp's
DF = " ".join(
    f"df -B1 --output=used,avail {top} | tail -1; df --output=iused,iavail {top} | tail -1;"
    for top in ("/testbed", "/tmp")
)


def _fill(top: str) -> str:
    return (
        f"mkdir -p {top}/fill && cd {top}/fill && seq {FILES} | xargs touch && "
        f"head -c {MIB}M /dev/zero > {top}/fill/big && echo filled"
    )


FILL = _fill("/testbed")


def _figures(output: str) -> list[tuple[int, int, int, int]]:
    """(bytes used, free, inodes used, free) of the testbed, then of /tmp."""
    words = [int(word) for word in output.split()]
    return [(words[0], words[1], words[2], words[3]), (words[4], words[5], words[6], words[7])]


async def test_the_next_use_gets_the_pristine_capacity_at_once(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env, LIMITS) as created:
        box = created
        assert isinstance(box, NsSandbox)
        bwrap = box.bwrap_pid
        pristine = _figures((await box.exec(DF, timeout=10)).output)
        assert all(free > MIB << 20 and ifree > FILES for _, free, _, ifree in pristine), pristine

        filled = await box.exec(FILL, timeout=60)
        assert filled.output == "filled\n", filled.output
        full = _figures((await box.exec(DF, timeout=10)).output)
        # control: the fill is real, and a second fill of the same size does not fit beside it
        assert full[0][0] - pristine[0][0] >= MIB << 20 and full[0][2] - pristine[0][2] >= FILES, full
        again = await box.exec(_fill("/testbed").replace("/fill", "/fill2"), timeout=60)
        assert "No space left on device" in again.output, again.output
        await box.exec("rm -rf /testbed/fill2", timeout=30)

        await box.reset()
        assert (box.restart_reason, box.bwrap_pid) == (None, bwrap), "reset in place"

        # the first command of the next use: the capacity a fresh sandbox has, bytes and inodes
        first = _figures((await box.exec(DF, timeout=10)).output)
        for before, now in zip(pristine, first, strict=True):
            assert now[1] >= before[1] - (1 << 20) and now[3] >= before[3] - 16, (pristine, full, first)
        refill = await box.exec(FILL, timeout=60)
        assert refill.output == "filled\n", refill.output
