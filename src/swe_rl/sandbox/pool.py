"""Pristine sandboxes lent again and again: each given back is reset in place and kept for the next lease.

A :class:`SandboxPool` keeps the sandboxes given back to it on one shelf per use (``"agent"``,
``"grading"``, any name a caller gives): a use's sandboxes are never lent to another, so no agent gets a
sandbox a grading had. Within a use, sandboxes are kept per runtime (an env's venv, interpreter and root:
:meth:`.EnvSpec.runtime`) and limits; a kept sandbox of another env of the same runtime is reset to the env
asked for (its testbed becomes the new overlay's), so the tasks synthesized from one library, each with its
own testbed, share sandboxes. A lease pays a reset (~2 ms) instead of a create (~20 ms).

What a lease leaves behind cannot reach the next one: the sandbox is reset in place on its way back (every
process ended, every file change dropped: :class:`.base.KeepsProcesses`), and closed instead when the lease
raised, the reset failed or was cancelled, or the backend cannot reset in place. A lease may leave a
:class:`Tenant` in its sandbox (the grading's warm test runner, harness/grade_many.py): the pool has it let go
before every reset and every close of that sandbox, and tells it after a reset in place, so it can start
what its use's next lease needs while the sandbox waits on the shelf.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Protocol

from swe_rl.sandbox.base import EnvSpec, KeepsProcesses, Limits, Sandbox, SandboxFactory

Key = tuple[str, str]  # an env's runtime and the sandbox's limits


class Tenant(Protocol):
    """What a use keeps in a pooled sandbox between its leases (the grading's warm test runner)."""

    async def vacate(self) -> None:
        """The sandbox is about to be reset or closed: stop what runs there and let go of it. Never raises;
        called again after it has vacated, it does nothing."""

    def prepare(self) -> None:
        """The sandbox was reset in place and is kept for its use's next lease: start, without waiting, what
        that lease will need (it runs while the sandbox is pristine and nothing of a lease runs there)."""


class Pooled:
    """A sandbox of the env ``env_key`` (testbed ``workdir``) lent by the pool, and the tenant its use left in
    it (None: none)."""

    def __init__(self, box: Sandbox, env_key: str, workdir: str = "") -> None:
        self.box = box
        self.env_key = env_key
        self.workdir = workdir
        self.tenant: Tenant | None = None


class _Shelf:
    """Kept sandboxes of one use, per key; beyond ``idle`` the least recently kept are given back to close."""

    def __init__(self, idle: int) -> None:
        self.idle = idle
        self.free: OrderedDict[Key, list[Pooled]] = OrderedDict()
        self.count = 0

    def take(self, key: Key, env_key: str) -> Pooled | None:
        """A kept sandbox of ``key``: the newest of env ``env_key``, else the newest of another env."""
        free = self.free.get(key)
        if not free:
            return None
        pooled = next((p for p in reversed(free) if p.env_key == env_key), free[-1])
        free.remove(pooled)
        if not free:  # no empty list is left for the eviction to take as the oldest
            del self.free[key]
        self.count -= 1
        return pooled

    def put(self, key: Key, pooled: Pooled) -> list[Pooled]:
        """Keep ``pooled``; return those that are now too many (the oldest)."""
        self.free.setdefault(key, []).append(pooled)
        self.free.move_to_end(key)
        self.count += 1
        evicted = []
        while self.count > self.idle:
            oldest = next(iter(self.free))
            evicted.append(self.free[oldest].pop(0))
            if not self.free[oldest]:
                del self.free[oldest]
            self.count -= 1
        return evicted

    def drain(self) -> list[Pooled]:
        kept = [p for free in self.free.values() for p in free]
        self.free.clear()
        self.count = 0
        return kept


class SandboxPool:
    """Lends ``factory``'s sandboxes, reusing them (see the module's docstring).

    ``idle``: sandboxes kept between leases, per use, over all environments (the least recently given back
    go first). ``reuse=False``: every lease gets a fresh sandbox, closed afterwards. The sandboxes it keeps
    belong to the event loop that made them; :meth:`close` closes them.
    """

    def __init__(self, factory: SandboxFactory, *, idle: int = 8, reuse: bool = True) -> None:
        self.factory = factory
        self.idle = idle
        self.reuse = reuse
        self._shelves: dict[str, _Shelf] = {}
        self._counts: dict[str, dict[str, int]] = {}

    def counts(self, use: str) -> dict[str, int]:
        """How ``use``'s leases went: sandboxes ``created``, ``reused`` (reset in place) and, of those,
        ``switched`` (reset to another env). Leases without reuse count in none."""
        return {"created": 0, "reused": 0, "switched": 0} | self._counts.get(use, {})

    @contextlib.asynccontextmanager
    async def sandbox(
        self, env: EnvSpec, limits: Limits | None = None, *, use: str = "agent"
    ) -> AsyncIterator[Sandbox]:
        """A pristine sandbox of ``env`` for one use (an agent's run): :meth:`lease`'s sandbox."""
        async with self.lease(env, limits, use=use) as pooled:
            yield pooled.box

    @contextlib.asynccontextmanager
    async def lease(self, env: EnvSpec, limits: Limits | None = None, *, use: str) -> AsyncIterator[Pooled]:
        """A pristine sandbox of ``env`` and its tenant (left by ``use``'s last lease of it, or None), given
        back afterwards: reset in place and kept on ``use``'s shelf, or closed when the body raised, the
        backend cannot reset in place or ``reuse`` is off."""
        if not self.reuse:
            pooled = Pooled(await self.factory.create(env, limits), env.key, env.workdir)
            try:
                yield pooled
            finally:
                await _close(pooled)
            return
        key = (repr(env.runtime()), limits.model_dump_json() if limits else "")
        pooled = await self._acquire(key, env, limits, use)
        try:
            yield pooled
        except BaseException:
            await _close(pooled)
            raise
        await self._release(key, pooled, use)

    def _count(self, use: str, what: str) -> None:
        counts = self._counts.setdefault(use, {})
        counts[what] = counts.get(what, 0) + 1

    def _shelf(self, use: str) -> _Shelf:
        return self._shelves.setdefault(use, _Shelf(self.idle))

    async def _acquire(self, key: Key, env: EnvSpec, limits: Limits | None, use: str) -> Pooled:
        pooled = await self._kept(self._shelf(use).take(key, env.key), env, use)
        if pooled is not None:
            self._count(use, "reused")  # nothing of its last lease is left, and no command ran since
            return pooled
        self._count(use, "created")
        return Pooled(await self.factory.create(env, limits), env.key, env.workdir)

    async def _kept(self, pooled: Pooled | None, env: EnvSpec, use: str) -> Pooled | None:
        """``pooled`` (a kept sandbox of ``env``'s runtime) ready for ``env``: reset to it when it is another
        env's, its tenant let go first (what it started was for the old env). None when there is none, or
        the reset failed (the sandbox is closed)."""
        if pooled is None or pooled.env_key == env.key:
            return pooled
        if not await _reset_or_close(pooled, env=env):
            return None
        pooled.env_key, pooled.workdir = env.key, env.workdir
        self._count(use, "switched")
        return pooled

    async def _release(self, key: Key, pooled: Pooled, use: str) -> None:
        """Reset ``pooled`` in place, its tenant let go first, keep it and tell its tenant; or close it."""
        if not isinstance(pooled.box, KeepsProcesses):
            await _close(pooled)
            return
        if not await _reset_or_close(pooled):
            return
        if pooled.tenant is not None:  # the sandbox is pristine; the next lease of this use is likely alike
            pooled.tenant.prepare()
        for evicted in self._shelf(use).put(key, pooled):
            await _close(evicted)

    async def close(self) -> None:
        kept = [p for shelf in self._shelves.values() for p in shelf.drain()]
        await asyncio.gather(*(_close(p) for p in kept))


async def _reset_or_close(pooled: Pooled, *, env: EnvSpec | None = None) -> bool:
    """Reset ``pooled``'s sandbox (one that keeps processes) in place, keeping none, its tenant let go
    first; False when it failed (the sandbox is closed). One cancelled midway (a rollout's deadline) leaves
    the sandbox in no known state and nobody keeping it: closed too, and the cancellation goes on."""
    assert isinstance(pooled.box, KeepsProcesses)
    try:
        if pooled.tenant is not None:
            await pooled.tenant.vacate()
        await pooled.box.reset(env=env)
    except Exception:
        await _close(pooled)
        return False
    except BaseException:
        await _close(pooled)
        raise
    return True


async def _close(pooled: Pooled) -> None:
    try:
        if pooled.tenant is not None:
            await pooled.tenant.vacate()
    finally:
        with contextlib.suppress(Exception):
            await pooled.box.close()
