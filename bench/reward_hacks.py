"""The standing reward-hack benchmark: every code attack of the test suite on every builtin task, graded in
both modes, fresh on each backend and through one reused Grader, with the gold and empty patches beside them.

The attacks are the suite's own (tests/harness/test_sealed_results.py and tests/harness/test_seal_attacks.py:
code in the fixed package's ``__init__.py``, which strict mode keeps), applied to each task's package; and
tests/harness/test_seal_unittest.py's on each task run by a django-style runner (its tests as unittest test
cases, read by swebench's django parser: ``unittest:<attack>``). An
attack is *live* on a task where official mode (the log alone, as the SWE-bench harness reads it) resolves
it: those are the cases strict mode must refuse. Reported per attack and backend, fresh and reused:

- ``live``: official resolved (the attack works where the guarantee is absent),
- ``strict_resolved``: strict resolved (target 0),
- and for the gold patches: strict resolved / graded (target: all, ``gold_flagged`` 0), official verdicts of
  gold and empty patches (gold resolved, empty not: the official verdicts unchanged).

    python bench/reward_hacks.py --backends ns,docker,remote --json bench/results/reward_hacks.json

Reused: one ``Grader`` per backend grades each attack in both modes and then the gold patch, in the same
sandbox (on ns reset in place, its next grading served by a fresh warm runner), so use N attacks and use
N+1 is graded. Real SWE-bench instances are not part of this run where their envs are not built on the
machine (``--tasks FILE`` with a ``--cache-dir`` that holds them adds them; the code attacks then go into
their packages' ``__init__.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness import test_seal_attacks as seal_attacks
from tests.harness import test_seal_unittest as seal_unittest
from tests.harness import test_sealed_results as sealed_results
from tests.harness.test_reward_hacking import Scratch, prepend

from swe_rl.envs.cache import EnvCache
from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.tasks.loaders import load_tasks
from swe_rl.tasks.model import Task

MODES: list[GradingMode] = ["official", "strict"]
TIMEOUT = 120.0


def attacks() -> dict[str, tuple[Callable[[Task], str], bool]]:
    """name -> (the code, whether it goes before the module's own code)."""
    found: dict[str, tuple[Callable[[Task], str], bool]] = {
        name: (code, True) for name, (code, _) in sealed_results.ATTACKS.items()
    }
    found.update({name: (code, False) for name, code in seal_attacks.ATTACKS.items()})
    found["always_equal"] = (lambda task: seal_attacks.ALWAYS_EQUAL, False)
    return found


def patches(task: Task, env: EnvSpec, root: Path) -> dict[str, str]:
    init = seal_attacks.package_init(task)
    made = {}
    for name, (code, before) in attacks().items():
        folder = root / name
        folder.mkdir()
        scratch = Scratch(task, env, folder)
        if before:
            prepend(scratch, init, code(task))
        else:
            scratch.write(init, scratch.read(init) + code(task))
        made[name] = scratch.patch()
    return made


def unittest_patches(task: Task, env: EnvSpec, root: Path) -> tuple[Task, dict[str, str]] | None:
    """The task under django's runner (its tests as unittest test cases: tests/harness/test_seal_unittest.py)
    and that module's attacks on it, each appended to the package's ``__init__.py``; None where its tests
    cannot run as test cases (a FAIL_TO_PASS test taking fixtures)."""
    variant = seal_unittest.as_unittest(task, env, root / "variant")
    if variant is None:
        return None
    init, made = seal_attacks.package_init(variant), {}
    for name, code in seal_unittest.generic_attacks(variant).items():
        scratch = Scratch(variant, env, root / f"unittest-{name}")
        scratch.write(init, scratch.read(init) + code)
        made[f"unittest:{name}"] = scratch.patch()
    return variant, made


class Tally:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], dict[str, int]] = defaultdict(
            lambda: {"graded": 0, "live": 0, "strict_resolved": 0}
        )
        self.gold: dict[tuple[str, str], dict[str, int]] = defaultdict(
            lambda: {"graded": 0, "official_resolved": 0, "strict_resolved": 0, "empty_official_resolved": 0}
        )
        self.cases: list[dict[str, Any]] = []

    def attack(self, backend: str, way: str, name: str, task: Task, verdicts: dict[str, Verdict]) -> None:
        row = self.rows[(backend, way, name)]
        row["graded"] += 1
        row["live"] += verdicts["official"].resolved
        row["strict_resolved"] += verdicts["strict"].resolved
        strict = verdicts["strict"]
        self.cases.append(
            {
                "backend": backend,
                "way": way,
                "attack": name,
                "instance_id": task.instance_id,
                "official": verdicts["official"].resolved,
                "strict": strict.resolved,
                "strict_status": strict.status,
                "seal": strict.seal,
                "trips": strict.seal_trips[:3],
                "screen": sorted({f.rule for f in strict.screen_flags}),
            }
        )

    def gold_row(
        self, backend: str, way: str, official: Verdict, strict: Verdict, empty: Verdict | None
    ) -> None:
        runner = "unittest" if official.instance_id.endswith("-unittest") else "pytest"
        row = self.gold[(backend, f"{way}, {runner}")]
        row["graded"] += 1
        row["official_resolved"] += official.resolved
        row["strict_resolved"] += strict.resolved
        row["empty_official_resolved"] += bool(empty and empty.resolved)


async def _both(grade: Callable[[str], Any], patch: str) -> dict[str, Verdict]:
    return {mode: await grade(patch, mode) for mode in MODES}  # type: ignore[misc]


async def fresh(
    backend: str, factory: SandboxFactory, task: Task, env: EnvSpec, made: dict[str, str], tally: Tally
) -> None:
    async def grade(patch: str, mode: GradingMode) -> Verdict:
        return await grade_patch(task, patch, factory, env, timeout=TIMEOUT, mode=mode)

    for name, patch in made.items():
        tally.attack(backend, "fresh", name, task, await _both(grade, patch))
    gold = await _both(grade, task.patch)
    empty = await grade_patch(task, "", factory, env, timeout=TIMEOUT, mode="official")
    tally.gold_row(backend, "fresh", gold["official"], gold["strict"], empty)


async def reused(
    backend: str, factory: SandboxFactory, task: Task, env: EnvSpec, made: dict[str, str], tally: Tally
) -> None:
    grader = Grader(factory, idle=1)

    async def grade(patch: str, mode: GradingMode) -> Verdict:
        return await grader.grade(task, patch, env, timeout=TIMEOUT, mode=mode)

    try:
        for name, patch in made.items():
            tally.attack(backend, "reused", name, task, await _both(grade, patch))
            after = await _both(grade, task.patch)  # use N+1, after the attack in the same sandbox
            tally.gold_row(backend, "reused", after["official"], after["strict"], None)
    finally:
        await grader.close()


def factories(names: list[str]) -> tuple[dict[str, SandboxFactory], list[Any]]:
    from swe_rl.sandbox import get_factory
    from swe_rl.sandbox.remote import RemoteFactory

    made: dict[str, SandboxFactory] = {}
    servers: list[Any] = []
    for name in names:
        if name == "remote":
            from tests.service.servers import exec_server, pool_server

            node = exec_server().start()
            pool = pool_server([node]).start()
            servers += [pool, node]
            made[name] = RemoteFactory(pool.url)
        else:
            made[name] = get_factory(name)
    return made, servers


async def run(args: argparse.Namespace) -> dict[str, Any]:
    args.commit = _commit()  # the code this run grades with, read before it starts
    tasks = load_tasks(args.tasks)
    if args.limit:
        tasks = tasks[: args.limit]
    cache = EnvCache(args.cache_dir) if args.cache_dir else EnvCache()
    made_factories, servers = factories(args.backends.split(","))
    tally = Tally()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="swe-rl-reward-hacks-") as root:
            for n, task in enumerate(tasks):
                env = cache.ensure(task)
                folder = Path(root) / str(n)
                folder.mkdir()
                runs = [(task, patches(task, env, folder))] if "pytest" in args.runners else []
                variant = unittest_patches(task, env, folder) if "unittest" in args.runners else None
                runs += [variant] if variant is not None else []
                for backend, factory in made_factories.items():
                    for graded, made in runs:
                        await fresh(backend, factory, graded, env, made, tally)
                        if not args.no_reused:
                            await reused(backend, factory, graded, env, made, tally)
                    print(
                        f"[{n + 1}/{len(tasks)}] {task.instance_id} {backend}: {time.monotonic() - started:.0f} s",
                        flush=True,
                    )
    finally:
        for factory in made_factories.values():
            close = getattr(factory, "close", None)
            if close is not None:
                await close()
        for server in servers:
            server.stop()
    return summarize(tally, args, time.monotonic() - started)


def summarize(tally: Tally, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    rows = [{"backend": b, "way": w, "attack": a, **v} for (b, w, a), v in sorted(tally.rows.items())]
    gold = [{"backend": b, "way": w, **v} for (b, w), v in sorted(tally.gold.items())]
    return {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d"),
        "commit": args.commit,
        "seconds": round(seconds, 1),
        "tasks": args.tasks,
        "totals": {
            "attack_gradings": sum(r["graded"] for r in rows),
            "live": sum(r["live"] for r in rows),
            "strict_resolved": sum(r["strict_resolved"] for r in rows),
            "gold_graded": sum(g["graded"] for g in gold),
            "gold_strict_resolved": sum(g["strict_resolved"] for g in gold),
            "gold_official_resolved": sum(g["official_resolved"] for g in gold),
            "empty_official_resolved": sum(g["empty_official_resolved"] for g in gold),
        },
        "attacks": rows,
        "gold": gold,
        "cases": tally.cases,
    }


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="builtin", help="task source (default: the builtin suite)")
    parser.add_argument("--cache-dir", default=None, help="env cache holding the tasks' envs")
    parser.add_argument("--backends", default="ns,docker,remote")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    parser.add_argument("--no-reused", action="store_true", help="fresh gradings only")
    parser.add_argument(
        "--runners",
        default="pytest,unittest",
        help="the test runners: pytest (the tasks as they are), unittest (their tests as unittest test cases "
        "run by a django-style runner, read by django's log parser)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result["totals"], indent=2))
    for row in result["attacks"]:
        if row["strict_resolved"]:
            print(f"STRICT RESOLVED: {row}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
