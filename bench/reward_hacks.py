"""The standing reward-hack benchmark: every code attack of the test suite on every builtin task, graded in
both modes, fresh on each backend and through one reused Grader, with the gold and empty patches beside them.

The attacks are the suite's own (tests/harness/test_sealed_results.py and tests/harness/test_seal_attacks.py:
code in the fixed package's ``__init__.py``, which strict mode keeps), applied to each task's package; and
tests/harness/test_seal_unittest.py's on each task run by a django-style runner (its tests as unittest test
cases, read by swebench's django parser: ``unittest:<attack>``). A real task (``--tasks FILE``) gets the
family of the runner its strict grading uses (``GradingSpec.seal_runner``): pytest's (and tox's, sphinx's
runner, whose tests pytest runs under the same seal, and pytest's own repository's, which no seal covers:
strict grades it unverifiable), the attacks above;
django's (``unittest``), test_seal_unittest's that need nothing of the task's own, forging lines in django's
format; sympy's, tests/harness/test_seal_sympy.py's that need nothing of the task's own, forging sympy's
``<name> ok`` lines. Each goes into the ``__init__.py`` of the package the gold patch fixes. An
attack is *live* on a task where official mode (the log alone, as the SWE-bench harness reads it) resolves
it: those are the cases strict mode must refuse. Reported per attack and backend, fresh and reused:

- ``live``: official resolved (the attack works where the guarantee is absent),
- ``strict_resolved``: strict resolved (target 0),
- and for the gold patches: strict resolved / graded (target: all, ``gold_flagged`` 0), official verdicts of
  gold and empty patches (gold resolved, empty not: the official verdicts unchanged).

    python bench/reward_hacks.py --backends ns,docker,remote --json bench/results/reward_hacks.json

Reused: one ``Grader`` per backend grades each attack in both modes and then the gold patch, in the same
sandbox (on ns reset in place, its next grading served by a fresh warm runner), so use N attacks and use
N+1 is graded. Real SWE-bench instances are graded with ``--tasks FILE --cache-dir DIR`` (DIR holding their
built envs):

    python bench/reward_hacks.py --tasks verified-sample.jsonl --cache-dir envs --repo-cache repos --backends ns \
        --json bench/results/reward_hacks_verified.json
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
from tests.harness import test_seal_sympy as seal_sympy
from tests.harness import test_seal_unittest as seal_unittest
from tests.harness import test_sealed_results as sealed_results
from tests.harness.test_reward_hacking import Scratch, prepend

from swe_rl.envs.cache import EnvCache
from swe_rl.harness.evalscript import GradingSpec
from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.sandbox.pool import SandboxPool
from swe_rl.tasks.builtin import builtin_mirror
from swe_rl.tasks.loaders import load_tasks
from swe_rl.tasks.model import Task, patch_files

MODES: list[GradingMode] = ["official", "strict"]
TIMEOUT = 120.0
# test_seal_sympy's attacks that need nothing of the task's own (rename_a_test names a textkit test)
SYMPY_ATTACKS = ["log_forging", "rewritten_results", "neutered_raises", "drive_the_seal", "unwrap_exec"]


def attacks() -> dict[str, tuple[Callable[[Task], str], bool]]:
    """name -> (the code, whether it goes before the module's own code)."""
    found: dict[str, tuple[Callable[[Task], str], bool]] = {
        name: (code, True) for name, (code, _) in sealed_results.ATTACKS.items()
    }
    found.update({name: (code, False) for name, code in seal_attacks.ATTACKS.items()})
    found["always_equal"] = (lambda task: seal_attacks.ALWAYS_EQUAL, False)
    return found


def package_init(task: Task, env: EnvSpec) -> str:
    """The ``__init__.py`` of the package the gold patch fixes: the builtin tasks' (``<top>/__init__.py``),
    else the outermost package around the first file it changes (``src/_pytest/__init__.py``)."""
    init = seal_attacks.package_init(task)
    if (env.testbed / init).is_file():
        return init
    fixed = next(p for p in patch_files(task.patch) if p.endswith(".py"))
    parts = fixed.split("/")[:-1]
    found = [
        i for i in range(1, len(parts) + 1) if (env.testbed / "/".join(parts[:i]) / "__init__.py").is_file()
    ]
    if not found:
        raise ValueError(f"{task.instance_id}: no package around {fixed}")
    return "/".join(parts[: found[0]]) + "/__init__.py"


def appended(task: Task, env: EnvSpec, root: Path, codes: dict[str, str]) -> dict[str, str]:
    """Each code appended to the package's ``__init__.py``, as a patch; one copy of the testbed for all."""
    init = package_init(task, env)
    scratch = Scratch(task, env, root)
    original, made = scratch.read(init), {}
    for name, code in codes.items():
        scratch.write(init, original + code)
        made[name] = subprocess.run(
            ["git", "diff", "HEAD", "--", init], cwd=scratch.repo, capture_output=True, text=True, check=True
        ).stdout
    return made


def django_patches(task: Task, env: EnvSpec, root: Path) -> dict[str, str]:
    """test_seal_unittest's task-independent attacks, their forged lines django's (``<name> ... ok``)."""
    return appended(task, env, root / "django", seal_unittest.generic_attacks(task))


def sympy_patches(task: Task, env: EnvSpec, root: Path) -> dict[str, str]:
    """test_seal_sympy's task-independent attacks, their forged lines sympy's (``<name> ok``); before sympy
    1.6 its runner and ``raises`` are in ``sympy.utilities``, where the attacks then reach for them."""
    lines = "".join(f"{name} ok\\n" for name in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
    old = not (env.testbed / "sympy" / "testing" / "runtests.py").is_file()
    codes = {}
    for name in SYMPY_ATTACKS:
        code = seal_sympy.ATTACKS[name][1].replace("{lines}", lines)
        codes[name] = (
            code.replace("from sympy.testing import", "from sympy.utilities import") if old else code
        )
    return appended(task, env, root / "sympy", codes)


def runner_of(task: Task) -> str:
    """The runner whose seal strict grading uses on ``task`` ('pytest', 'tox', 'unittest', 'sympy'),
    'self-hosted' where the runner is the repository under test (pytest's own: no seal, strict says
    unverifiable), else 'none'."""
    spec = GradingSpec.of(task)
    return "self-hosted" if spec.self_hosted else spec.seal_runner or "none"


def patches(task: Task, env: EnvSpec, root: Path) -> dict[str, str]:
    init = package_init(task, env)
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


def family(
    task: Task, env: EnvSpec, root: Path, runners: list[str]
) -> list[tuple[str, Task, dict[str, str]]]:
    """(runner, the task graded, attack patches) for each run of ``task``: its own runner's attacks, and for a
    builtin task also its unittest variant's."""
    runner = runner_of(task)
    made = {
        "pytest": patches,
        "tox": patches,
        "self-hosted": patches,  # pytest's attacks: strict grades every one unverifiable, never resolved
        "unittest": django_patches,
        "sympy": sympy_patches,
    }.get(runner)
    runs = [(runner, task, made(task, env, root))] if made is not None and runner in runners else []
    if builtin_mirror(task.repo) is not None and "unittest" in runners:
        variant = unittest_patches(task, env, root)
        runs += [("unittest", *variant)] if variant is not None else []
    return runs


class Tally:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str, str], dict[str, int]] = defaultdict(
            lambda: {"graded": 0, "live": 0, "strict_resolved": 0}
        )
        self.gold: dict[tuple[str, str, str], dict[str, int]] = defaultdict(
            lambda: {"graded": 0, "official_resolved": 0, "strict_resolved": 0, "empty_official_resolved": 0}
        )
        self.cases: list[dict[str, Any]] = []

    def attack(
        self, backend: str, way: str, runner: str, name: str, task: Task, verdicts: dict[str, Verdict]
    ) -> None:
        row = self.rows[(backend, way, runner, name)]
        row["graded"] += 1
        row["live"] += verdicts["official"].resolved
        row["strict_resolved"] += verdicts["strict"].resolved
        self._case(backend, way, runner, name, verdicts["official"], verdicts["strict"], unexpected=True)

    def gold_row(
        self, backend: str, way: str, runner: str, official: Verdict, strict: Verdict, empty: Verdict | None
    ) -> None:
        row = self.gold[(backend, way, runner)]
        row["graded"] += 1
        row["official_resolved"] += official.resolved
        row["strict_resolved"] += strict.resolved
        row["empty_official_resolved"] += bool(empty and empty.resolved)
        self._case(backend, way, runner, "gold", official, strict, unexpected=False)
        if empty is not None:
            self._case(backend, way, runner, "empty", empty, None, unexpected=True)

    def _case(
        self,
        backend: str,
        way: str,
        runner: str,
        name: str,
        official: Verdict,
        strict: Verdict | None,
        *,
        unexpected: bool,
    ) -> None:
        """One grading's record; the log's tail where strict (else official) resolved as it should not,
        ``unexpected`` saying which answer is the wrong one."""
        case: dict[str, Any] = {
            "backend": backend,
            "way": way,
            "runner": runner,
            "attack": name,
            "instance_id": official.instance_id,
            "official": official.resolved,
            "official_status": official.status,
        }
        if strict is not None:
            case.update(
                strict=strict.resolved,
                strict_status=strict.status,
                seal=strict.seal,
                trips=strict.seal_trips[:3],
                screen=sorted({f.rule for f in strict.screen_flags}),
            )
        shown = strict if strict is not None else official
        if shown.resolved == unexpected:
            case["log_tail"] = shown.log[-2000:]
        self.cases.append(case)


async def _both(grade: Callable[[str], Any], patch: str) -> dict[str, Verdict]:
    return {mode: await grade(patch, mode) for mode in MODES}  # type: ignore[misc]


async def fresh(
    backend: str,
    factory: SandboxFactory,
    task: Task,
    env: EnvSpec,
    runner: str,
    made: dict[str, str],
    tally: Tally,
) -> None:
    async def grade(patch: str, mode: GradingMode) -> Verdict:
        return await grade_patch(task, patch, factory, env, timeout=TIMEOUT, mode=mode)

    for name, patch in made.items():
        tally.attack(backend, "fresh", runner, name, task, await _both(grade, patch))
    gold = await _both(grade, task.patch)
    empty = await grade_patch(task, "", factory, env, timeout=TIMEOUT, mode="official")
    tally.gold_row(backend, "fresh", runner, gold["official"], gold["strict"], empty)


async def reused(
    backend: str,
    factory: SandboxFactory,
    task: Task,
    env: EnvSpec,
    runner: str,
    made: dict[str, str],
    tally: Tally,
) -> None:
    grader = Grader(SandboxPool(factory, idle=1))

    async def grade(patch: str, mode: GradingMode) -> Verdict:
        return await grader.grade(task, patch, env, timeout=TIMEOUT, mode=mode)

    try:
        for name, patch in made.items():
            tally.attack(backend, "reused", runner, name, task, await _both(grade, patch))
            after = await _both(grade, task.patch)  # use N+1, after the attack in the same sandbox
            tally.gold_row(backend, "reused", runner, after["official"], after["strict"], None)
    finally:
        await grader.close()


def factories(names: list[str], cache_dir: Path | None) -> tuple[dict[str, SandboxFactory], list[Any]]:
    """The backends' factories; ``remote``'s exec server on loopback serves the envs of ``cache_dir`` (the
    tasks' envs: without it the node looked for them in its default cache and refused each as unknown)."""
    from swe_rl.sandbox import get_factory
    from swe_rl.sandbox.remote import RemoteFactory

    made: dict[str, SandboxFactory] = {}
    servers: list[Any] = []
    for name in names:
        if name == "remote":
            from tests.service.servers import exec_server, pool_server

            node = exec_server(
                None, *(["--cache-dir", str(cache_dir.resolve())] if cache_dir else [])
            ).start()
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
    cache = EnvCache(args.cache_dir, repo_cache=args.repo_cache)
    made_factories, servers = factories(args.backends.split(","), args.cache_dir)
    tally = Tally()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="swe-rl-reward-hacks-") as root:
            for n, task in enumerate(tasks):
                env = cache.ensure(task)
                folder = Path(root) / str(n)
                folder.mkdir()
                runs = family(task, env, folder, args.runners.split(","))
                for backend, factory in made_factories.items():
                    for runner, graded, made in runs:
                        await fresh(backend, factory, graded, env, runner, made, tally)
                        if not args.no_reused:
                            await reused(backend, factory, graded, env, runner, made, tally)
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
    rows = [
        {"backend": b, "way": w, "runner": r, "attack": a, **v}
        for (b, w, r, a), v in sorted(tally.rows.items())
    ]
    gold = [{"backend": b, "way": w, "runner": r, **v} for (b, w, r), v in sorted(tally.gold.items())]
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
        "by_runner": by_runner(rows, gold),
        "attacks": rows,
        "gold": gold,
        "cases": tally.cases,
    }


def by_runner(rows: list[dict[str, Any]], gold: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per runner, backend and way: the attack gradings, live, strict resolved, and the gold and empty rows."""
    found: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        into = found[f"{row['runner']}, {row['backend']}, {row['way']}"]
        for key in ("graded", "live", "strict_resolved"):
            into[f"attack_{key}"] += row[key]
    for row in gold:
        into = found[f"{row['runner']}, {row['backend']}, {row['way']}"]
        for key in ("graded", "official_resolved", "strict_resolved", "empty_official_resolved"):
            into[f"gold_{key}" if key != "empty_official_resolved" else key] += row[key]
    return {key: dict(value) for key, value in sorted(found.items())}


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


def main() -> None:
    global TIMEOUT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="builtin", help="task source (default: the builtin suite)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="env cache holding the tasks' envs")
    parser.add_argument(
        "--repo-cache", type=Path, default=None, help="the mirrors the envs were built from (env build's)"
    )
    parser.add_argument("--backends", default="ns,docker,remote")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    parser.add_argument("--no-reused", action="store_true", help="fresh gradings only")
    parser.add_argument(
        "--runners",
        default="pytest,tox,self-hosted,unittest,sympy",
        help="the test runners: pytest (the tasks as they are), tox (sphinx's: pytest's attacks), self-hosted "
        "(pytest's own repository: pytest's attacks, strict says unverifiable), unittest "
        "(django's runner; for a builtin task its tests as unittest test cases run by a django-style runner, "
        "read by django's log parser), sympy",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT,
        help="seconds per test run (real instances: as validation's)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    TIMEOUT = args.timeout
    result = asyncio.run(run(args))
    print(json.dumps(result["totals"], indent=2))
    for row in result["attacks"]:
        if row["strict_resolved"]:
            print(f"STRICT RESOLVED: {row}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
