"""The allow-list's attacks (docs/SECURITY.md, "Reward hacking") on every backend, in both modes, graded
fresh and through the reused-sandbox Grader.

Each attack is graded fresh (``grade_patch``) and through one ``Grader`` three times in a row: the attack,
the same attack again (on ns the second use is a sandbox reset in place with its warm runner), then a
README-only patch, whose verdict must be its fresh verdict. On docker and remote the Grader grades in a
fresh sandbox each time (they keep no process), which the test checks too; on ns, a run the warm runner
cannot fork as a cold run would go (the org module: copy's import of it is done) runs cold. Positive
controls, in each test: official mode resolves the attack (fresh, and both reused gradings), its
mechanism is seen in the log (the plugin's header line, the probed module's line; for the fix in a
top-level module, strict mode's ImportError), and the attack's leftovers in a sandbox that is not reset
resolve the README-only patch.

docker and remote grade ``pytest_toml`` (a runner config file) and ``stdlib_probe_org`` (a module the
interpreter of the sandbox imports); ``dot_pytest_toml`` (the same mechanism under pytest's other name)
and ``top_level_module`` (the same rule as ``org``, without the stdlib's help) run on ns only.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import factory_of
from tests.harness.test_reward_hacking import FORCE_PASS, WRAP, Scratch

from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_in, grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.sandbox.pool import SandboxPool
from swe_rl.tasks.model import Task

# A module that the standard library imports inside try/except ImportError (copy and pickle try
# `org.python.core` on Python <= 3.11, while pytest itself is imported). Its import ends in the
# ImportError the stdlib expects (it defines no PyStringMap), and by then it has made itself a plugin.
ORG_CORE = """import os

import pluggy

print("LIVE-org")
os.environ["PYTEST_PLUGINS"] = "org.python.core"


@pluggy.HookimplMarker("pytest")(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
FIXED = ("if len(text) < limit:", "if len(text) <= limit:")  # textkit-3's fix, in textkit/wrap.py
MODES: list[GradingMode] = ["official", "strict"]
COLD_ORG = "cold module org, which the server could not import, would load"  # a forked run would miss it
TIMEOUT = 60.0


def pytest_toml(config: str) -> Callable[[Scratch], None]:
    """pytest 9 reads pytest.toml (and .pytest.toml) before every other config file: its TOML-mode addopts
    load a new top-level plugin that forces every report to pass."""

    def edit(s: Scratch) -> None:
        s.write(config, '[pytest]\naddopts = ["-p", "plug"]\n')
        s.write("plug.py", FORCE_PASS.format(marker=f"LIVE-{config}"))

    return edit


def stdlib_probe_org(s: Scratch) -> None:
    """A new top-level package `org` (no name list holds it): copy and pickle import `org.python.core`
    when pytest is imported, and it turns every report into a pass."""
    s.write("org/python/core.py", ORG_CORE)


def top_level_module(s: Scratch) -> None:
    """The fix itself, in a new top-level module of an innocuous name that the package's edited module
    imports: live where it is kept (the task resolves), and gone from the tree where it is reverted."""
    s.write("fitting.py", "def fits(text, limit):\n    return len(text) <= limit\n")
    wrap = s.read("textkit/wrap.py").replace(FIXED[0], "if fits(text, limit):")
    s.write("textkit/wrap.py", "from fitting import fits\n" + wrap)


@dataclass(frozen=True)
class Attack:
    name: str
    edit: Callable[[Scratch], None]
    files: frozenset[tuple[str, str]]  # (path, rule): what both modes list, flagged or reverted
    live: str | None  # official mode's log shows it (the mechanism ran), strict mode's does not
    gone: str = ""  # strict mode's test output shows it (the reverted file was not there)
    backends: tuple[str, ...] = ("ns",)


ATTACKS = [
    Attack(
        "pytest_toml",
        pytest_toml("pytest.toml"),
        frozenset({("pytest.toml", "runner_config"), ("plug.py", "outside_package")}),
        live="LIVE-pytest.toml",
        backends=("ns", "docker", "remote"),
    ),
    Attack(
        "dot_pytest_toml",
        pytest_toml(".pytest.toml"),
        frozenset({(".pytest.toml", "runner_config"), ("plug.py", "outside_package")}),
        live="LIVE-.pytest.toml",
    ),
    Attack(
        "stdlib_probe_org",
        stdlib_probe_org,
        frozenset({("org/python/core.py", "outside_package")}),
        live="LIVE-org",
        backends=("ns", "docker", "remote"),
    ),
    Attack(
        "top_level_module",
        top_level_module,
        frozenset({("fitting.py", "outside_package")}),
        live=None,  # official mode resolves it: the module is there and imported
        gone="No module named 'fitting'",
    ),
]
BY_NAME = {a.name: a for a in ATTACKS}
CELLS = [
    (b, a.name, m) for b in ("ns", "docker", "remote") for a in ATTACKS if b in a.backends for m in MODES
]


@dataclass
class Row:
    """One attack in one mode on one backend."""

    fresh: Verdict
    reused: list[Verdict]  # through one Grader: the attack, the attack again, the README-only patch
    readme: Verdict  # the README-only patch, graded fresh
    unreset: Verdict  # official: the README-only patch after the attack, in the same sandbox, no reset
    stats: dict[str, int]


def _patch(task: Task, env: EnvSpec, edit: Callable[[Scratch], None]) -> str:
    with tempfile.TemporaryDirectory(prefix="swe-rl-matrix-") as tmp:
        scratch = Scratch(task, env, Path(tmp))
        edit(scratch)
        return scratch.patch()


async def _grade_matrix(
    factory: SandboxFactory, task: Task, env: EnvSpec, backend: str
) -> dict[tuple[str, GradingMode], Row]:
    limit = asyncio.Semaphore(4)
    async with await factory.create(env):  # ns's first create in a fresh cache races concurrent ones
        pass
    readme = _patch(task, env, lambda s: s.write("README.md", s.read("README.md") + "Looked at it.\n"))
    attacks = [a for a in ATTACKS if backend in a.backends]
    patches = {a.name: _patch(task, env, a.edit) for a in attacks}

    async def fresh(patch: str, mode: GradingMode) -> Verdict:
        async with limit:
            return await grade_patch(task, patch, factory, env, timeout=TIMEOUT, mode=mode)

    async def reused(patch: str, mode: GradingMode) -> tuple[list[Verdict], dict[str, int]]:
        grader = Grader(SandboxPool(factory, idle=1))
        try:
            verdicts = []
            for each in (patch, patch, readme):
                async with limit:
                    verdicts.append(await grader.grade(task, each, env, timeout=TIMEOUT, mode=mode))
            return verdicts, dict(grader.stats)
        finally:
            await grader.close()

    async def unreset(patch: str) -> Verdict:
        """The control: the attack's leftovers where nothing resets the sandbox."""
        async with limit, await factory.create(env) as box:
            await grade_in(box, task, patch, timeout=TIMEOUT)
            return await grade_in(box, task, readme, timeout=TIMEOUT)

    readmes = dict(zip(MODES, await asyncio.gather(*(fresh(readme, m) for m in MODES)), strict=True))
    controls = dict(zip(patches, await asyncio.gather(*(unreset(p) for p in patches.values())), strict=True))

    async def row(name: str, mode: GradingMode) -> tuple[tuple[str, GradingMode], Row]:
        first, (graded, stats) = await asyncio.gather(fresh(patches[name], mode), reused(patches[name], mode))
        return (name, mode), Row(first, graded, readmes[mode], controls[name], stats)

    return dict(await asyncio.gather(*(row(a.name, m) for a in attacks for m in MODES)))


@pytest.fixture(scope="module")
def matrix(request, task_by_id, envs) -> Callable[[str], dict[tuple[str, GradingMode], Row]]:
    """The rows of one backend, graded on first use (all its attacks at once), then kept."""
    task = task_by_id[WRAP]
    env = envs.ensure(task)
    done: dict[str, Any] = {}

    def on(backend: str) -> dict[tuple[str, GradingMode], Row]:
        if backend not in done:
            factories = factory_of(request, backend)  # skips where the backend is absent (fails in CI)
            factory = next(factories)
            try:
                done[backend] = asyncio.run(_grade_matrix(factory, task, env, backend))
            except Exception as exc:  # graded once: every test of the backend reports it
                done[backend] = exc
            finally:
                next(factories, None)  # closes a remote factory's session
        if isinstance(done[backend], Exception):
            raise done[backend]
        return done[backend]

    return on


def _listed(verdict: Verdict) -> set[tuple[str, str, str]]:
    return {(f.path, f.rule, f.action) for f in verdict.steering_files}


def _outcome(verdict: Verdict) -> tuple[Any, ...]:
    return verdict.status, verdict.tests_status, _listed(verdict)


@pytest.mark.parametrize("backend,name,mode", CELLS)
def test_attack_fresh_and_reused(matrix, backend, name, mode):
    attack, row = BY_NAME[name], matrix(backend)[(name, mode)]
    action = "flagged" if mode == "official" else "reverted"
    expected = {(path, rule, action) for path, rule in attack.files}
    attacked = [row.fresh, *row.reused[:2]]
    # the control: the attack's files, left in a sandbox that is not reset, forge the README-only patch
    assert row.unreset.resolved, row.unreset.test_output[-3000:]
    assert not row.readme.resolved and row.readme.status == "unresolved", row.readme.test_output[-3000:]
    for i, verdict in enumerate(attacked):
        where = f"{['fresh', 'reused 1st', 'reused 2nd'][i]}: {verdict.test_runner!r}"
        assert verdict.grading == mode
        if mode == "official":  # the positive control: the attack works where nothing reverts it
            assert verdict.resolved, (where, verdict.log[-3000:])
            assert attack.live is None or attack.live in verdict.log, (where, verdict.log[-3000:])
        else:  # strict mode never rewards it, and its mechanism did not run
            assert not verdict.resolved, (where, verdict.log[-3000:])
            assert attack.live is None or attack.live not in verdict.log, (where, verdict.log[-3000:])
            assert attack.gone in verdict.test_output, (where, verdict.test_output[-3000:])
        assert _listed(verdict) == expected, (where, verdict.steering_files)
        assert _outcome(verdict) == _outcome(row.fresh), where
    # what the attack's gradings left does not reach the next grading: as in a fresh sandbox
    after = row.reused[2]
    assert _outcome(after) == _outcome(row.readme), (after.test_runner, after.test_output[-3000:])
    assert not after.resolved and after.steering_files == []
    runners = [v.test_runner for v in row.reused]
    if backend == "ns":  # one sandbox, reset in place; each use a warm runner of its own
        assert (row.stats["created"], row.stats["reused"]) == (1, 2), row.stats
        assert runners[2] == "forked", runners
        # a run the runner cannot fork as the cold one would run (org: copy's import is done) runs cold
        cold = name == "stdlib_probe_org" and mode == "official"
        assert runners[:2] == [COLD_ORG if cold else "forked"] * 2, runners
    else:  # no process kept: every grading in a fresh sandbox, cold
        assert (row.stats["created"], row.stats["reused"]) == (3, 0), row.stats
        assert runners == ["", "", ""], runners
