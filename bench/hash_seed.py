"""Whether grading verdicts depend on the string-hash seed (issue #38), on real SWE-bench instances.

Until #58 a warm runner's forked test runs shared the runner's hash secret, where a cold run draws its own
(each grading now has a runner of its own: docs/SECURITY.md, "One hash secret per grading"). A running
interpreter cannot be re-seeded (dicts and sets built at preload hold hashes of the old secret), so this
measured instead whether the seed changes a verdict on benign patches: each
instance's gold patch, and its base tests (the empty patch), graded cold with fixed ``PYTHONHASHSEED``
values and with the env's default (no ``PYTHONHASHSEED``: a random secret per run).

How a seed is forced: the task is copied with its test command prefixed ``PYTHONHASHSEED=N`` (the eval
script runs it as written; ``grade_patch`` offers no warm runner, and the prefixed command would not match
warm.py's pytest pattern anyway). tox 4 (sphinx) takes its ``--hashseed`` default from that variable;
sympy's ``bin/test`` runs in-process when it is set (when not, it re-runs itself under a random seed, and
prints the seed: recorded as ``seed_in_log``). Before grading, a probe in a sandbox of the instance's env
runs the env's ``python`` twice under each fixed seed and twice without one: the seed reaches it when each
fixed seed gives the same ``hash('swe-rl')`` twice, the fixed seeds give different ones, and the two
default runs differ.

Instances run in a random order drawn once (``random.Random(--seed).shuffle`` of the sorted ids), recorded
in the results, so a run stopped early is a fair sample. Where a test's status differs between the runs of
one kind, the fixed seeds of that kind are graded once more: a test that repeats its status under every
fixed seed, and differs between seeds, follows the seed; one that changes under the same seed is flaky.
Resumable: instances already in ``--out`` are skipped.

    python bench/hash_seed.py --tasks /work/gold-data/tasks.jsonl --cache-dir /work/gold-data/envs \\
        --repo-cache /work/gold-data/repos [--seeds 0,1,2] [--ids ID,...] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "hash_seed.json"
DEFAULT = "default"  # the env's default: no PYTHONHASHSEED, a random secret per run
GROUPS = ("FAIL_TO_PASS", "PASS_TO_PASS")
PROBE = "import sys; print(sys.flags.hash_randomization, hash('swe-rl'))"
_PROBE_LINE = re.compile(r"^[01] -?\d+$")
_SYMPY_SEED = re.compile(r"hash randomization: (?:on \(PYTHONHASHSEED=(\d+)\)|(off))")


def seeded(task: Any, seed: int | None) -> Any:
    """``task`` with its test command run under ``PYTHONHASHSEED=seed`` (None: as written)."""
    from swe_rl.errors import ConfigError
    from swe_rl.harness.evalscript import eval_script
    from swe_rl.tasks.rowspec import row_spec
    from swe_rl.tasks.specs import spec_for

    if seed is None:
        return task
    spec = row_spec(task) or spec_for(task)
    command = task.test_cmd or (spec.test_cmd if spec else None)
    if not command:
        raise ConfigError(f"{task.instance_id}: no test command to prefix")
    copy = task.model_copy(update={"test_cmd": f"PYTHONHASHSEED={seed} {command}"})
    if f"PYTHONHASHSEED={seed} {command}" not in eval_script(copy):  # a row's own script runs as written
        raise ConfigError(f"{task.instance_id}: its own eval script runs as written; the seed cannot be set")
    return copy


async def probe(factory: Any, env: Any, seeds: list[int]) -> dict[str, Any]:
    """``hash('swe-rl')`` of the env's python, twice under each fixed seed and twice under none."""
    labels = [str(s) for s in seeds for _ in range(2)] + [DEFAULT] * 2
    commands = [
        ("" if label == DEFAULT else f"PYTHONHASHSEED={label} ") + f"python -c {shlex.quote(PROBE)}"
        for label in labels
    ]
    async with await factory.create(env) as box:
        result = await box.exec("; ".join(commands), timeout=300)
    lines = [line for line in result.output.splitlines() if _PROBE_LINE.match(line)]
    if len(lines) != len(labels):
        return {"reached": False, "output": result.output[-2000:]}
    hashes: dict[str, list[int]] = {}
    for label, line in zip(labels, lines, strict=True):
        hashes.setdefault(label, []).append(int(line.split()[1]))
    fixed = [hashes[str(s)] for s in seeds]
    reached = (
        all(a == b for a, b in fixed)
        and len({a for a, _ in fixed}) == len(seeds)
        and len(set(hashes[DEFAULT])) == 2
    )
    return {"reached": reached, "hashes": hashes}


def failed_tests(verdict: Any) -> dict[str, list[str]]:
    """The FAIL_TO_PASS and PASS_TO_PASS tests that did not pass (swebench counts a missing one failed)."""
    return {g: sorted(verdict.tests_status.get(g, {}).get("failure", [])) for g in GROUPS}


def seed_in_log(output: str) -> str | None:
    """The seed a runner that prints one (sympy's bin/test) says it ran under."""
    found = _SYMPY_SEED.search(output)
    if not found:
        return None
    return "0" if found.group(2) else found.group(1)


async def grade_run(task: Any, kind: str, seed: int | None, factory: Any, env: Any, timeout: float) -> dict:
    """One cold grading: the gold patch (``kind`` gold) or the base tests (empty), under ``seed``."""
    from swe_rl.errors import SweRlError
    from swe_rl.harness.grade_patch import grade_patch, run_tests

    run: dict[str, Any] = {"seed": DEFAULT if seed is None else str(seed)}
    started = time.monotonic()
    try:
        copy = seeded(task, seed)
        if kind == "gold":
            verdict = await grade_patch(copy, task.patch, factory, env, timeout=timeout)
        else:
            verdict = await run_tests(copy, factory, env, timeout=timeout)
    except SweRlError as exc:
        return run | {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
    if kind == "empty":
        run["fail_to_pass_passed"] = sorted(
            set(task.FAIL_TO_PASS) - set(failed_tests(verdict)["FAIL_TO_PASS"])
        )
    run |= {
        "status": verdict.status,
        "resolved": verdict.resolved,
        "summary": verdict.summary().splitlines()[0],
        "failed": failed_tests(verdict),
        "seed_in_log": seed_in_log(verdict.test_output),
        "seconds": round(time.monotonic() - started, 2),
    }
    return run


def differing_tests(task: Any, runs: list[dict]) -> dict[str, list[str]]:
    """Per group, the tests whose status is not the same in every graded run."""
    graded = [r for r in runs if r["status"] != "error"]
    found: dict[str, list[str]] = {}
    for group in GROUPS:
        names = getattr(task, group)
        counts = {n: sum(n in r["failed"][group] for r in graded) for n in names}
        odd = sorted(n for n, c in counts.items() if 0 < c < len(graded))
        if odd:
            found[group] = odd
    return found


def classify(test: str, group: str, runs: list[dict], repeats: list[dict]) -> dict[str, Any]:
    """How one differing test behaved: its statuses by seed (first run, repeat) and what that says."""
    by_seed: dict[str, list[str]] = {}
    for r in [*runs, *repeats]:
        if r["status"] != "error":
            by_seed.setdefault(r["seed"], []).append("fail" if test in r["failed"][group] else "pass")
    fixed = {s: v for s, v in by_seed.items() if s != DEFAULT}
    if any(len(set(v)) > 1 for v in fixed.values()):
        why = "flaky: differs under one fixed seed"
    elif len({v[0] for v in fixed.values()}) > 1:
        why = "follows the seed" if repeats else "differs between seeds (not repeated)"
    else:
        why = "the default (random-seed) run alone differs"
    return {"group": group, "test": test, "statuses": by_seed, "classification": why}


async def one_kind(task: Any, kind: str, args: argparse.Namespace, factory: Any, env: Any, say: Any) -> dict:
    """Every run of one kind (gold or empty) of one instance, repeated where a test's status differs."""
    seeds: list[int | None] = [*args.seeds, *[None] * args.default_runs]
    runs = []
    for seed in seeds:
        runs.append(await grade_run(task, kind, seed, factory, env, args.timeout))
        say(kind, runs[-1])
    differing = differing_tests(task, runs)
    repeats: list[dict] = []
    if differing and args.repeat:
        for seed in args.seeds:
            repeats.append(await grade_run(task, kind, seed, factory, env, args.timeout))
            say(f"{kind} (repeat)", repeats[-1])
    verdicts = {(r["status"], r.get("resolved")) for r in runs + repeats}
    return {
        "runs": runs,
        "repeats": repeats,
        "verdict_varied": len(verdicts) > 1,
        "tests_varied": [classify(t, g, runs, repeats) for g, tests in differing.items() for t in tests],
    }


async def one_instance(task: Any, args: argparse.Namespace, cache: Any, factory: Any, say: Any) -> dict:
    from swe_rl.errors import SweRlError

    try:
        env = cache.get(cache.key_for(task))
        if env is None:
            return {"skipped": "its env is not built in --cache-dir"}
        record: dict[str, Any] = {"env": env.key, "probe": await probe(factory, env, args.seeds)}
    except SweRlError as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"[:2000]}
    if not record["probe"]["reached"]:
        say("probe", {"seed": "-", "status": "the seed did not reach python", "seconds": 0})
    for kind in args.kinds:
        record[kind] = await one_kind(task, kind, args, factory, env, say)
    return record


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    done = {i: r for i, r in result["instances"].items() if "skipped" not in r}
    summary: dict[str, Any] = {
        "instances": len(done),
        "skipped": sorted(set(result["instances"]) - set(done)),
        "probe_reached": sum(r["probe"]["reached"] for r in done.values()),
    }
    for kind in result["kinds"]:
        records = {i: r[kind] for i, r in done.items()}
        runs = [run for r in records.values() for run in r["runs"] + r["repeats"]]
        summary[kind] = {
            "gradings": len(runs),
            "errors": sum(run["status"] == "error" for run in runs),
            "resolved_in_every_run": sum(
                all(run.get("resolved") for run in r["runs"]) for r in records.values()
            ),
            "verdict_varied": sorted(i for i, r in records.items() if r["verdict_varied"]),
            "tests_varied": [{"instance": i, **t} for i, r in records.items() for t in r["tests_varied"]],
            "seconds": round(sum(run.get("seconds", 0) for run in runs), 1),
        }
    if "empty" in result["kinds"]:  # FAIL_TO_PASS tests that passed on the base commit: none expected
        summary["empty"]["fail_to_pass_passed"] = [
            {"instance": i, "seed": run["seed"], "tests": run["fail_to_pass_passed"]}
            for i, r in done.items()
            for run in r["empty"]["runs"] + r["empty"]["repeats"]
            if run.get("fail_to_pass_passed")
        ]
    return summary


def invocation() -> dict[str, Any]:
    """This run of the script: its command line, when it started, and the commit it ran (``changed``: files
    of src/ or this script that differ from that commit)."""
    where = ["git", "-C", str(Path(__file__).parent)]
    head = subprocess.run([*where, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(
        [*where, "status", "--porcelain", "--", "../src", Path(__file__).name], capture_output=True, text=True
    ).stdout.split("\n")
    return {
        "command": " ".join(["python", "bench/hash_seed.py", *sys.argv[1:]]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": head or "unknown",
        "changed": [line[3:] for line in changed if line.strip()],
    }


def load_previous(args: argparse.Namespace, order: list[str]) -> dict[str, Any]:
    """The results file to resume, or a new one; refused when it was run with other settings."""
    settings = {
        "seeds": args.seeds,
        "default_runs": args.default_runs,
        "kinds": args.kinds,
        "order_seed": args.seed,
    }
    if args.out.is_file():
        previous = json.loads(args.out.read_text())
        if {k: previous.get(k) for k in settings} != settings:
            old = {k: previous.get(k) for k in settings}
            sys.exit(f"error: {args.out} was run with {old}; rerun with those or another --out")
        return previous
    return {
        "invocations": [],  # every run of the script that added to the file, the first one first
        "cores": os.cpu_count(),
        "tasks": str(args.tasks),
        **settings,
        "order": order,
        "instances": {},
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from swe_rl.envs.cache import EnvCache
    from swe_rl.fileio import atomic_write_json
    from swe_rl.harness.official import preload
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.loaders import load_tasks

    preload()
    tasks = {t.instance_id: t for t in load_tasks(args.tasks)}
    order = sorted(tasks)
    random.Random(args.seed).shuffle(order)
    chosen = [i for i in order if args.ids is None or i in args.ids][: args.limit]
    result = load_previous(args, order)
    result["invocations"].append(invocation())
    cache = EnvCache(args.cache_dir, repo_cache=args.repo_cache)
    factory = get_factory("ns")
    todo = [i for i in chosen if i not in result["instances"]]
    print(f"{len(chosen) - len(todo)} of {len(chosen)} instances already in {args.out}", flush=True)
    deadline = time.monotonic() + args.stop_after * 60 if args.stop_after else None
    for n, instance_id in enumerate(todo, 1):
        if deadline is not None and time.monotonic() > deadline:
            print(
                f"--stop-after {args.stop_after} min reached: {len(todo) - n + 1} instances left", flush=True
            )
            break
        task = tasks[instance_id]

        def say(what: str, run: dict, n: int = n, instance_id: str = instance_id) -> None:
            text = run.get("summary") or run.get("error") or run["status"]
            print(
                f"[{n}/{len(todo)}] {instance_id} {what} seed={run['seed']}: {text} ({run.get('seconds')} s)"
            )

        record = await one_instance(task, args, cache, factory, say)
        result["instances"][instance_id] = record
        result["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        result["summary"] = summarize(result)
        atomic_write_json(args.out, result)
        varied = [k for k in args.kinds if record.get(k, {}).get("tests_varied")]
        print(f"[{n}/{len(todo)}] {instance_id} done; tests varied in: {varied or 'none'}", flush=True)
    result["summary"] = summarize(result)
    atomic_write_json(args.out, result)
    return result["summary"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", type=Path, required=True, help="SWE-bench task records (.jsonl/.json/.parquet)."
    )
    parser.add_argument("--cache-dir", type=Path, required=True, help="The env cache the envs are built in.")
    parser.add_argument("--repo-cache", type=Path, help="Bare mirrors DIR/<owner>/<name>.git.")
    parser.add_argument("--seeds", default="0,1,2", help="Fixed PYTHONHASHSEED values, comma-separated.")
    parser.add_argument(
        "--default-runs", type=int, default=1, help="Runs without PYTHONHASHSEED (random) per kind."
    )
    parser.add_argument("--kinds", default="gold,empty", help="gold (the gold patch), empty (base tests).")
    parser.add_argument("--ids", help="Only these instance ids, comma-separated (kept in the drawn order).")
    parser.add_argument("--limit", type=int, help="Only the first N instances of the drawn order.")
    parser.add_argument("--seed", type=int, default=38, help="Seed of the instance order's shuffle.")
    parser.add_argument(
        "--no-repeat", dest="repeat", action="store_false", help="Do not repeat runs where tests differ."
    )
    parser.add_argument(
        "--stop-after", type=float, help="Start no new instance after this many minutes (resume later)."
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="Seconds for one test run.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.kinds = [k for k in args.kinds.split(",") if k.strip()]
    if set(args.kinds) - {"gold", "empty"}:
        parser.error("--kinds takes gold and empty")
    if len(set(args.seeds)) < 2:
        parser.error("--seeds needs two different seeds at least")
    args.ids = set(args.ids.split(",")) if args.ids else None
    return args


if __name__ == "__main__":
    summary = asyncio.run(main(parse_args()))
    print(json.dumps(summary, indent=1))
