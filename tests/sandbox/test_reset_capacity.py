"""A reset in place hands the next use the pristine capacity of the sandbox's writable space (issue 58, item
7): the bytes and inodes the previous use took are free when ``reset()`` returns, not once the old testbed
layer has been removed in the background.

Use N fills the sandbox's tmpfs (a small ``Limits.disk_mb``, so the fill is quick) through the testbed, in
bytes and in files, and is shown to be full (the positive control: the same write fails there); after the
reset, use N+1's very first command sees the capacity a fresh sandbox has (``df`` and ``df -i``) and makes
the same write again."""

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
# reports its statfs)
DF = "df -B1 --output=used,avail /testbed | tail -1; df --output=iused,iavail /testbed | tail -1"
FILL = (
    f"mkdir -p /testbed/fill && cd /testbed/fill && seq {FILES} | xargs touch && "
    f"head -c {MIB}M /dev/zero > /testbed/fill/big && echo filled"
)


def _figures(output: str) -> tuple[int, int, int, int]:
    used, avail, iused, iavail = (int(word) for word in output.split())
    return used, avail, iused, iavail


async def test_the_next_use_gets_the_pristine_capacity_at_once(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env, LIMITS) as created:
        box = created
        assert isinstance(box, NsSandbox)
        bwrap = box.bwrap_pid
        pristine = _figures((await box.exec(DF, timeout=10)).output)
        assert pristine[1] > MIB << 20 and pristine[3] > FILES, pristine

        filled = await box.exec(FILL, timeout=60)
        assert filled.output.endswith("filled\n"), filled.output
        full = _figures((await box.exec(DF, timeout=10)).output)
        # control: the fill is real, and a second fill of the same size does not fit beside it
        assert full[0] - pristine[0] >= MIB << 20 and full[2] - pristine[2] >= FILES, (pristine, full)
        again = await box.exec(FILL.replace("/testbed/fill", "/testbed/fill2"), timeout=60)
        assert "No space left on device" in again.output, again.output
        await box.exec("rm -rf /testbed/fill2", timeout=30)

        await box.reset()
        assert (box.restart_reason, box.bwrap_pid) == (None, bwrap), "reset in place"

        # the first command of the next use: the capacity a fresh sandbox has, bytes and inodes
        first = _figures((await box.exec(DF, timeout=10)).output)
        assert first[1] >= pristine[1] - (1 << 20) and first[3] >= pristine[3] - 16, (pristine, full, first)
        refill = await box.exec(FILL, timeout=60)
        assert refill.output.endswith("filled\n"), refill.output
