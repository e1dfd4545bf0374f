"""Grading many patches: pristine sandboxes reused through a reset in place, each grading with a warm test runner.

:func:`.grade_patch.grade_patch` creates a sandbox for one grading and closes it. A :class:`Grader` keeps the
sandboxes it graded in, per runtime (an env's venv, interpreter and root: :meth:`.EnvSpec.runtime`), and
resets each in place before its next grading (the same pristine state as a fresh one: sandbox/reset.py),
keeping no process. Each grading has a warm test runner of its own (:mod:`.warm`: a new interpreter that
imports pytest beside the grading and forks the test run): it is launched right after the reset that ended
the sandbox's previous grading (or with the sandbox), so it imports while the sandbox waits on the shelf and
while the next grading applies its patch, and it serves that one grading only. A kept sandbox of another env
of the same runtime is reset to the env asked for (its testbed becomes the new overlay's), so the tasks
synthesized from one library, each with its own testbed, share sandboxes. Where the backend cannot reset in
place, it grades as :func:`.grade_patch.grade_patch` does. The agents' sandboxes are reused the same way, on
a shelf of their own (:meth:`Grader.agent_sandbox`): an agent's run pays a reset (~2 ms) instead of a create
(~20 ms).

What a grading leaves behind cannot reach the next one: its runner ends with it (closed before the reset,
which ends every process of the sandbox and drops every file change: :class:`.base.KeepsProcesses`), and the
next grading's runner is a new interpreter, with a string-hash secret of its own as a cold run's, started
when nothing of a grading runs; the runner is not dumpable (no ptrace, no ``/proc/<pid>/mem``), checks its
own limits and scheduling before its fork and runs the test cold when a command changed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Literal

from swe_rl.harness import inventory, warm
from swe_rl.harness.evalscript import GradingSpec
from swe_rl.harness.grade_patch import DEFAULT_TEST_TIMEOUT, grade_in, grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.base import EnvSpec, KeepsProcesses, Limits, Sandbox, SandboxFactory
from swe_rl.tasks.model import Task


class Slot:
    """A pristine sandbox of the env ``env_key`` and the warm test runner of its coming grading (None: the
    tests run cold), or the launch of that runner under way (:meth:`settle`)."""

    def __init__(self, box: Sandbox, runner: warm.WarmRunner | None, env_key: str, workdir: str = "") -> None:
        self.box = box
        self.runner = runner
        self.env_key = env_key
        self.workdir = workdir
        self.launch: asyncio.Future[warm.WarmRunner | None] | None = None
        self.wants_runner = False  # whether its last use's test command was one a runner serves
        self.cold_runs = 0

    def ran(self, test_runner: str) -> None:
        """Note how a test run went (``Verdict.test_runner``)."""
        if test_runner.startswith("cold"):
            self.cold_runs += 1

    async def settle(self) -> None:
        """Wait for the runner's launch, where one is under way: its runner, or none when it failed."""
        launch, self.launch = self.launch, None
        if launch is None:
            return
        try:
            self.runner = await launch
        except Exception:  # the sandbox broke: the grading finds out, and runs cold or fails as it would
            self.runner = None

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
    """Grades patches with ``factory``'s sandboxes, reusing them (see the module's docstring). Every grading
    gets a runner of its own, launched with the sandbox or right after the reset that ended the previous
    one. It also lends the agents' sandboxes (:meth:`agent_sandbox`), reused the same way but kept apart:
    never one with a runner, never one a grading had.

    ``idle``: sandboxes kept between gradings, over all environments (the least recently used go first;
    each costs its next runner's memory, ~30 MiB), and as many between agents' runs.
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
        spec = GradingSpec.of(task, image_env=env.rootfs is not None)  # once for this grading
        hooked = spec.test_cmd is not None and warm.PYTEST_COMMAND.match(spec.test_cmd) is not None
        async with self.sandbox(env, limits, runner=hooked) as slot:
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
                spec=spec,
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
        self, env: EnvSpec, limits: Limits | None = None, *, use: Use = "grading", runner: bool = True
    ) -> AsyncIterator[Slot]:
        """A pristine sandbox of ``env`` and its runner for this one use (None: its tests run cold), given
        back afterwards: reset in place and kept, or closed when the body raised or the backend cannot keep
        processes. The body calls :meth:`Slot.ran` with what the runner said. ``runner=False``: the use's test
        command is not one a runner serves (no runner is launched for it, nor after it). ``use="agent"``: one
        of the agents' sandboxes, which have no runner."""
        key = (repr(env.runtime()), limits.model_dump_json() if limits else "")
        slot = await self._acquire(key, env, limits, use, runner and use == "grading")
        try:
            yield slot
        except BaseException:
            await _close(slot)
            raise
        await self._release(key, slot, use)

    async def _acquire(self, key: Key, env: EnvSpec, limits: Limits | None, use: Use, runner: bool) -> Slot:
        prefix = "agent_" if use == "agent" else ""
        slot = await self._kept(self._shelves[use].take(key, env.key), env)
        if slot is not None:
            self.stats[prefix + "reused"] += 1  # nothing of its last use is left, and no command ran since
        else:
            slot = Slot(await self.factory.create(env, limits), None, env.key, env.workdir)
            self.stats[prefix + "created"] += 1
        try:
            await slot.settle()  # its runner was launched at the reset; it may still be importing
            slot.wants_runner = runner
            if not runner:
                slot.drop_runner()  # a test command no runner serves
            elif slot.runner is None:  # a new sandbox, or another env's
                slot.runner = await self._launch(slot)
            self.stats["runners"] += slot.runner is not None  # gradings with a runner of their own
        except BaseException:  # cancelled (a rollout's deadline): nobody keeps it
            await _close(slot)
            raise
        return slot

    async def _launch(self, slot: Slot) -> warm.WarmRunner | None:
        """A runner for ``slot``'s coming grading, launched now (nothing of a grading runs there); None where
        its env cannot have one (no pytest: its tests run cold, no second try) or the backend keeps no
        processes."""
        if not isinstance(slot.box, KeepsProcesses) or slot.env_key in self._no_runner:
            return None
        runner = await warm.start(slot.box, slot.workdir)
        if runner is None:
            self._no_runner.add(slot.env_key)
        return runner

    async def _kept(self, slot: Slot | None, env: EnvSpec) -> Slot | None:
        """``slot`` (a kept sandbox of ``env``'s runtime) ready for ``env``: reset to it when it is another
        env's (the runner launched for the old env let go: the next is launched in the new one). None when
        there is none, or the reset failed (the sandbox is closed)."""
        if slot is None or slot.env_key == env.key:
            return slot
        await slot.settle()
        slot.drop_runner()
        if not await _reset_or_close(slot, env=env):
            return None
        slot.env_key, slot.workdir = env.key, env.workdir
        self.stats["switched"] += 1
        return slot

    async def _release(self, key: Key, slot: Slot, use: Use) -> None:
        """Reset ``slot`` in place, its runner let go first (it served its one grading), and keep it, with the
        next grading's runner launching; or close it."""
        self.stats["cold"] += slot.cold_runs
        slot.cold_runs = 0
        slot.drop_runner()
        if not isinstance(slot.box, KeepsProcesses):
            await _close(slot)
            return
        if not await _reset_or_close(slot):
            return
        if slot.wants_runner:  # for the next grading, likely of the same kind; the sandbox is pristine
            slot.launch = asyncio.ensure_future(self._launch(slot))
        for evicted in self._shelves[use].put(key, slot):
            await _close(evicted)

    async def close(self) -> None:
        slots = [s for shelf in self._shelves.values() for s in shelf.drain()]
        await asyncio.gather(*(_close(s) for s in slots))


async def _reset_or_close(slot: Slot, *, env: EnvSpec | None = None) -> bool:
    """Reset ``slot``'s sandbox (one that keeps processes) in place, keeping none; False when it failed (the
    slot is closed). One cancelled midway (a rollout's deadline) leaves the sandbox in no known state and
    nobody keeping it: closed too, and the cancellation goes on."""
    assert isinstance(slot.box, KeepsProcesses)
    try:
        await slot.box.reset(env=env)
    except Exception:
        await _close(slot)
        return False
    except BaseException:
        await _close(slot)
        raise
    return True


async def _close(slot: Slot) -> None:
    launch, slot.launch = slot.launch, None
    try:
        if launch is not None:  # a launch under way is stopped; one that finished gave a runner to let go
            launch.cancel()
            await asyncio.wait([launch])
            if not launch.cancelled() and launch.exception() is None:
                slot.runner = launch.result()
    finally:
        slot.drop_runner()
        with contextlib.suppress(Exception):
            await slot.box.close()
