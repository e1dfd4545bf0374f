"""Grading many patches: pristine sandboxes of a :class:`.SandboxPool`, each grading with a warm test runner.

:func:`.grade_patch.grade_patch` creates a sandbox for one grading and closes it. A :class:`Grader` leases
its sandboxes from a pool (sandbox/pool.py: kept per runtime and limits, reset in place when given back, the
same pristine state as a fresh one, keeping no process; reset to another env of the same runtime where
asked), on the pool's ``"grading"`` shelf, apart from the agents' sandboxes. Each grading has a warm test
runner of its own (:mod:`.warm`: a new interpreter that imports pytest beside the grading and forks the test
run), held by the sandbox's :class:`Slot` (its tenant in the pool): it is launched right after the reset
that ended the sandbox's previous grading (or with the sandbox), so it imports while the sandbox waits on the
shelf and while the next grading applies its patch, and it serves that one grading only. Where the backend
cannot reset in place, it grades as :func:`.grade_patch.grade_patch` does.

What a grading leaves behind cannot reach the next one: its runner ends with it (let go before the reset,
which ends every process of the sandbox and drops every file change: :class:`.base.KeepsProcesses`), and the
next grading's runner is a new interpreter, with a string-hash secret of its own as a cold run's, started
when nothing of a grading runs; the runner is not dumpable (no ptrace, no ``/proc/<pid>/mem``), checks its
own limits and scheduling before its fork and runs the test cold when a command changed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from swe_rl.harness import inventory, warm
from swe_rl.harness.evalscript import GradingSpec
from swe_rl.harness.grade_patch import DEFAULT_TEST_TIMEOUT, grade_in, grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.base import EnvSpec, KeepsProcesses, Limits, Sandbox, SandboxFactory
from swe_rl.sandbox.pool import Pooled, SandboxPool
from swe_rl.tasks.model import Task

USE = "grading"  # the pool's shelf of grading sandboxes: no agent gets one (nor its runner)


class Slot:
    """A pooled grading sandbox and the warm test runner of its coming grading (None: the tests run cold),
    or the launch of that runner under way (:meth:`settle`). The sandbox's tenant in the pool: its runner is
    let go before every reset and close (:meth:`vacate`), the next one launched after a reset in place
    (:meth:`prepare`) where its last grading's test command was one a runner serves."""

    def __init__(self, pooled: Pooled, launcher: Callable[[Slot], Awaitable[warm.WarmRunner | None]]) -> None:
        self.pooled = pooled
        self.launcher = launcher
        self.runner: warm.WarmRunner | None = None
        self.launch: asyncio.Future[warm.WarmRunner | None] | None = None
        self.wants_runner = False  # whether its last use's test command was one a runner serves
        self.cold_runs = 0

    @property
    def box(self) -> Sandbox:
        return self.pooled.box

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

    async def vacate(self) -> None:
        """Before a reset or close: a launch under way stopped (one that finished gave a runner to let go),
        the runner let go."""
        launch, self.launch = self.launch, None
        try:
            if launch is not None:
                launch.cancel()
                await asyncio.wait([launch])
                if not launch.cancelled() and launch.exception() is None:
                    self.runner = launch.result()
        finally:
            self.drop_runner()

    def prepare(self) -> None:
        """After a reset in place: the next grading's runner launched, the sandbox pristine."""
        if self.wants_runner:  # for the next grading, likely of the same kind
            self.launch = asyncio.ensure_future(self.launcher(self))


class Grader:
    """Grades patches in ``pool``'s sandboxes, reusing them (see the module's docstring). Every grading gets
    a runner of its own, launched with the sandbox or right after the reset that ended the previous one.
    ``pool.reuse`` off: every grading in a fresh sandbox, cold, as :func:`.grade_patch.grade_patch`.

    The pool may be shared with the agents' runs (episode/run.py leases theirs from ``grader.pool``): their
    shelves are kept apart. :meth:`close` closes the pool. Each kept grading sandbox costs its next runner's
    memory (~30 MiB).
    """

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self._no_runner: set[str] = set()  # env keys whose Python could not start a runner
        self._modules: dict[str, set[str]] = {}  # env key -> the module names its Python can import
        self._counts: dict[str, int] = {"runners": 0, "cold": 0}

    @property
    def factory(self) -> SandboxFactory:
        return self.pool.factory

    @property
    def reuse(self) -> bool:
        return self.pool.reuse

    @property
    def stats(self) -> dict[str, int]:
        """The grading sandboxes ``created``, ``reused`` and ``switched`` (:meth:`.SandboxPool.counts`),
        the gradings with a runner of their own (``runners``) and the test runs that went ``cold``."""
        return self.pool.counts(USE) | self._counts

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
    async def sandbox(
        self, env: EnvSpec, limits: Limits | None = None, *, runner: bool = True
    ) -> AsyncIterator[Slot]:
        """A pristine grading sandbox of ``env`` and its runner for this one use (None: its tests run cold),
        given back to the pool afterwards (reset in place and kept, or closed). The body calls
        :meth:`Slot.ran` with what the runner said. ``runner=False``: the use's test command is not one a
        runner serves (no runner is launched for it, nor after it)."""
        async with self.pool.lease(env, limits, use=USE) as pooled:
            slot = pooled.tenant
            if not isinstance(slot, Slot):  # a new sandbox: its first grading
                slot = Slot(pooled, self._launch)
                pooled.tenant = slot
            slot.launcher = self._launch
            await slot.settle()  # its runner was launched at the reset; it may still be importing
            slot.wants_runner = runner
            if not runner:
                slot.drop_runner()  # a test command no runner serves
            elif slot.runner is None:  # a new sandbox, or another env's
                slot.runner = await self._launch(slot)
            self._counts["runners"] += slot.runner is not None  # gradings with a runner of their own
            yield slot
            self._counts["cold"] += slot.cold_runs
            slot.cold_runs = 0

    async def _launch(self, slot: Slot) -> warm.WarmRunner | None:
        """A runner for ``slot``'s coming grading, launched now (nothing of a grading runs there); None where
        its env cannot have one (no pytest: its tests run cold, no second try) or the backend keeps no
        processes."""
        env_key = slot.pooled.env_key
        if not isinstance(slot.box, KeepsProcesses) or env_key in self._no_runner:
            return None
        runner = await warm.start(slot.box, slot.pooled.workdir)
        if runner is None:
            self._no_runner.add(env_key)
        return runner

    async def close(self) -> None:
        """Close the pool: every sandbox it keeps, of every use, with its runner."""
        await self.pool.close()
