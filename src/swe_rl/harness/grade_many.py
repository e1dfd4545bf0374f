"""Grading many patches: pristine sandboxes reused through a reset in place, each with a warm test runner.

:func:`.grade_patch.grade_patch` creates a sandbox for one grading and closes it. A :class:`Grader` keeps the
sandboxes it graded in, per runtime (an env's venv, interpreter and root: :meth:`.EnvSpec.runtime`), and
resets each in place before its next grading (the same pristine state as a fresh one: sandbox/reset.py),
keeping only the sandbox's warm test runner alive (:mod:`.warm`: pytest imported once, forked per run).
A kept sandbox of another env of the same runtime is reset to the env asked for (its testbed becomes the
new overlay's), so the tasks synthesized from one library, each with its own testbed, share sandboxes and
runners. Where the backend cannot reset in place while keeping a process, it grades as
:func:`.grade_patch.grade_patch` does. The agents' sandboxes are reused the same way, on a shelf of their own
(:meth:`Grader.agent_sandbox`): an agent's run pays a reset (~2 ms) instead of a create (~20 ms).

What a grading leaves behind cannot reach the next one: the runner is armed for each grading with an
address of its own and disarmed before the reset (:mod:`.warm`: it then holds nothing the grading gave it
and serves nothing until the next arm), the reset ends every other process and drops every file change
(:class:`.base.KeepsProcesses`); the runner is not dumpable (no ptrace, no ``/proc/<pid>/mem``), checks
its own limits and scheduling before each fork and runs the test cold when a command changed them, and is
not kept when it was killed or stopped (:meth:`.warm.WarmRunner.alive`) or missed an exchange's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Literal

from swe_rl.harness import inventory, warm
from swe_rl.harness.grade_patch import DEFAULT_TEST_TIMEOUT, grade_in, grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.base import EnvSpec, KeepsProcesses, Limits, Sandbox, SandboxFactory
from swe_rl.tasks.model import Task


class Slot:
    """A pristine sandbox of the env ``env_key`` and its warm test runner (None: the tests run cold)."""

    def __init__(self, box: Sandbox, runner: warm.WarmRunner | None, env_key: str) -> None:
        self.box = box
        self.runner = runner
        self.env_key = env_key
        self.cold_runs = 0

    def ran(self, test_runner: str) -> None:
        """Note how a test run went (``Verdict.test_runner``): after a cold one, whatever its reason, the
        runner is not kept (the next use starts a new one)."""
        if test_runner.startswith("cold"):
            self.cold_runs += 1
            self.drop_runner()

    def drop_runner(self) -> None:
        """Not to be used again: its channel closed (it leaves; the next reset ends it in any case)."""
        if self.runner is not None:
            self.runner.close()
            self.runner = None


Key = tuple[str, str]  # an env's runtime and the sandbox's limits
Use = Literal["grading", "agent"]  # the shelves: kept apart, so no agent gets a sandbox with a runner


class _Shelf:
    """Kept sandboxes of one use, per key; beyond ``idle`` the least recently kept are given back to close."""

    def __init__(self, idle: int) -> None:
        self.idle = idle
        self.free: OrderedDict[Key, list[Slot]] = OrderedDict()
        self.count = 0

    def take(self, key: Key, env_key: str) -> Slot | None:
        """A kept slot of ``key``: the newest of env ``env_key``, else the newest of another env."""
        free = self.free.get(key)
        if not free:
            return None
        slot = next((s for s in reversed(free) if s.env_key == env_key), free[-1])
        free.remove(slot)
        if not free:  # no empty list is left for the eviction to take as the oldest
            del self.free[key]
        self.count -= 1
        return slot

    def put(self, key: Key, slot: Slot) -> list[Slot]:
        """Keep ``slot``; return those that are now too many (the oldest)."""
        self.free.setdefault(key, []).append(slot)
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

    def drain(self) -> list[Slot]:
        slots = [s for free in self.free.values() for s in free]
        self.free.clear()
        self.count = 0
        return slots


class Grader:
    """Grades patches with ``factory``'s sandboxes, reusing them (see the module's docstring). A sandbox's
    first grading runs its tests cold; its runner starts when it is used again. It also lends the agents'
    sandboxes (:meth:`agent_sandbox`), reused the same way but kept apart: never one with a runner, never
    one a grading had.

    ``idle``: sandboxes kept between gradings, over all environments (the least recently used go first;
    each costs its runner's memory, ~30 MiB), and as many between agents' runs.
    ``reuse=False``: every grading in a fresh sandbox, cold, as :func:`.grade_patch.grade_patch`, and every
    agent's run in a fresh one.
    """

    def __init__(self, factory: SandboxFactory, *, idle: int = 8, reuse: bool = True) -> None:
        self.factory = factory
        self.idle = idle
        self.reuse = reuse
        self._shelves: dict[Use, _Shelf] = {"grading": _Shelf(idle), "agent": _Shelf(idle)}
        self._no_runner: set[str] = set()  # env keys whose Python could not start a runner
        self._modules: dict[str, set[str]] = {}  # env key -> the module names its Python can import
        self.stats: dict[str, int] = {"created": 0, "reused": 0, "switched": 0, "runners": 0, "cold": 0}
        self.stats |= {"agent_created": 0, "agent_reused": 0}

    async def grade(
        self,
        task: Task,
        patch: str | None,
        env: EnvSpec,
        *,
        timeout: float = DEFAULT_TEST_TIMEOUT,
        limits: Limits | None = None,
        mode: GradingMode = "official",
    ) -> Verdict:
        if not self.reuse or patch is None or not patch.strip():
            return await grade_patch(
                task, patch, self.factory, env, timeout=timeout, limits=limits, mode=mode
            )
        started = time.monotonic()
        async with self.sandbox(env, limits) as slot:
            sandbox_s = time.monotonic() - started
            if env.key not in self._modules and (names := await inventory.installed_modules(slot.box)):
                self._modules[env.key] = names  # none listed: each grading lists them, as grade_patch does
            verdict = await grade_in(
                slot.box,
                task,
                patch,
                timeout=timeout,
                mode=mode,
                image_env=env.rootfs is not None,
                runner=slot.runner,
                installed=self._modules.get(env.key),
            )
            slot.ran(verdict.test_runner)
            released = time.monotonic()
        verdict.timings["sandbox"] = round(sandbox_s + time.monotonic() - released, 4)
        return verdict

    @contextlib.asynccontextmanager
    async def agent_sandbox(self, env: EnvSpec, limits: Limits | None = None) -> AsyncIterator[Sandbox]:
        """A pristine sandbox of ``env`` for an agent's run: a kept one reset in place (never one a grading
        had, so never one with a runner), kept again afterwards; a fresh one closed afterwards where the
        backend cannot reset in place or ``reuse`` is off. Closed when the body raised."""
        if not self.reuse:
            async with await self.factory.create(env, limits) as box:
                yield box
            return
        async with self.sandbox(env, limits, use="agent") as slot:
            yield slot.box

    @contextlib.asynccontextmanager
    async def sandbox(
        self, env: EnvSpec, limits: Limits | None = None, *, use: Use = "grading"
    ) -> AsyncIterator[Slot]:
        """A pristine sandbox of ``env`` and its runner (None: its tests run cold), given back afterwards:
        reset in place and kept, or closed when the body raised or the backend cannot keep processes.
        The body calls :meth:`Slot.ran` with what the runner said (a cold run gets a new runner).
        ``use="agent"``: one of the agents' sandboxes, which have no runner."""
        key = (repr(env.runtime()), limits.model_dump_json() if limits else "")
        slot = await self._acquire(key, env, limits, use)
        try:
            yield slot
        except BaseException:
            await _close(slot)
            raise
        await self._release(key, slot, use)

    async def _acquire(self, key: Key, env: EnvSpec, limits: Limits | None, use: Use) -> Slot:
        prefix = "agent_" if use == "agent" else ""
        slot = await self._kept(self._shelves[use].take(key, env.key), env)
        if slot is not None:
            self.stats[prefix + "reused"] += 1  # its runner was alive at the reset, and no command ran since
            wants_runner = use == "grading" and slot.runner is None and env.key not in self._no_runner
            if wants_runner and isinstance(slot.box, KeepsProcesses):
                # started on a sandbox's second use: an env graded once never pays pytest's import twice
                slot.runner = await warm.start(slot.box, env.workdir)
                self.stats["runners"] += slot.runner is not None
                if slot.runner is None:  # e.g. no pytest in the env: its tests run cold, no second try
                    self._no_runner.add(env.key)
            if slot.runner is not None and not await slot.runner.arm():  # this grading's address, or none
                slot.drop_runner()
        else:
            slot = Slot(await self.factory.create(env, limits), None, env.key)
            self.stats[prefix + "created"] += 1
        return slot

    async def _kept(self, slot: Slot | None, env: EnvSpec) -> Slot | None:
        """``slot`` (a kept sandbox of ``env``'s runtime) ready for ``env``: reset to it when it is another
        env's. None when there is none, or the reset failed (the sandbox is closed)."""
        if slot is None or slot.env_key == env.key:
            return slot
        # kept sandboxes keep processes; the runner was alive and disarmed at the last reset, and no command
        # ran since
        keep = [slot.runner.pid] if slot.runner is not None else []
        if not await _reset_or_close(slot, keep=keep, env=env):
            return None
        assert isinstance(slot.box, KeepsProcesses)
        if slot.box.restart_reason is not None:  # bwrap restarted: nothing was kept
            slot.drop_runner()
        slot.env_key = env.key
        self.stats["switched"] += 1
        return slot

    async def _release(self, key: Key, slot: Slot, use: Use) -> None:
        """Reset ``slot`` in place (keeping its runner, disarmed first) and keep it, or close it."""
        self.stats["cold"] += slot.cold_runs
        slot.cold_runs = 0
        box, runner = slot.box, slot.runner
        if not isinstance(box, KeepsProcesses):
            await _close(slot)
            return
        try:  # a runner that is not alive, or does not let go of this use in time, is not kept
            keep = (
                [runner.pid]
                if runner is not None and await runner.alive(box) and await runner.disarm()
                else []
            )
        except BaseException:  # cancelled (a rollout's deadline): nobody keeps it
            await _close(slot)
            raise
        if not keep:
            slot.drop_runner()
        if not await _reset_or_close(slot, keep=keep):
            return
        if box.restart_reason is not None:  # bwrap restarted: nothing was kept
            slot.drop_runner()
        for evicted in self._shelves[use].put(key, slot):
            await _close(evicted)

    async def close(self) -> None:
        slots = [s for shelf in self._shelves.values() for s in shelf.drain()]
        await asyncio.gather(*(_close(s) for s in slots))


async def _reset_or_close(slot: Slot, *, keep: list[int], env: EnvSpec | None = None) -> bool:
    """Reset ``slot``'s sandbox (one that keeps processes) in place; False when it failed (the slot is
    closed). One cancelled midway (a rollout's deadline) leaves the sandbox in no known state and nobody
    keeping it: closed too, and the cancellation goes on."""
    assert isinstance(slot.box, KeepsProcesses)
    try:
        await slot.box.reset(keep=keep, env=env)
    except Exception:
        await _close(slot)
        return False
    except BaseException:
        await _close(slot)
        raise
    return True


async def _close(slot: Slot) -> None:
    slot.drop_runner()
    with contextlib.suppress(Exception):
        await slot.box.close()
