"""Rollouts per core where RL spends them: the scripted oracle's episodes, graded cold and warm, side by side.

    python bench/throughput.py [--jobs 1,2,4] [--rounds 3] [--samples 2] [--synth 30] [--grading MODE] [--out FILE]

Each episode is what ``swe-rl eval --llm scripted:oracle`` runs (episode/run.py: the env, the agent in a
sandbox, its patch graded in another): no model time, so what is left is the sandbox, the harness and the
tests. Two grading paths, interleaved (the order alternates each round), same tasks, same concurrency:

- cold: a fresh sandbox for every agent's run and every grading, a fresh interpreter for every test run
  (``swe-rl eval --fresh-grading``);
- warm: sandboxes reset in place between uses, the agents' and the gradings' kept apart, each grading's
  test run forked from a runner of its own that imported pytest beside the grading (launched after the
  previous reset: its own interpreter and hash secret; harness/grade_many.py, the default).

Task sets: the builtin suite, and ``--synth N`` tasks synthesized from the builtin libraries (seed 3).
Reports attempts/s per core, the split of an attempt (agent; grading = sandbox + harness + tests) and
whether every verdict is the same on both paths. Writes ``bench/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "throughput.json"


def _synth_tasks(n: int, where: Path) -> Path:
    out = where / f"synth-{n}" / "tasks.jsonl"
    if not out.exists():
        command = [str(Path(sys.executable).with_name("swe-rl")), "tasks", "synth", "--repo", "builtin"]
        command += ["--n", str(n), "--seed", "3", "--out", str(out), "--backend", "ns", "-j", "2"]
        subprocess.run(command, check=True, capture_output=True, text=True)
    return out


async def _run(
    tasks: list[Any], samples: int, jobs: int, warm: bool, cache: Any, factory: Any, grading: str
) -> dict[str, Any]:
    from swe_rl.agent.config import load_agent_config
    from swe_rl.episode.run import run_episode
    from swe_rl.episode.spec import EpisodeSpec
    from swe_rl.harness.grade_many import Grader
    from swe_rl.llm.base import SamplingParams
    from swe_rl.llm.oracle import scripted_for
    from swe_rl.sandbox.pool import SandboxPool

    grader = Grader(SandboxPool(factory, idle=64)) if warm else None
    limit = asyncio.Semaphore(jobs)
    agent = load_agent_config()
    rows: list[dict[str, Any]] = []

    async def one(task: Any, sample: int) -> None:
        async with limit:
            episode = await run_episode(
                task,
                scripted_for("oracle", task),
                cache=cache,
                factory=factory,
                agent=agent,
                params=SamplingParams(),
                spec=EpisodeSpec.for_eval(grading=grading),
                grader=grader,
            )
            verdict = episode.verdict
            if verdict is None:
                raise SystemExit(f"{task.instance_id}: {episode.error}")
            timings = verdict.timings
            rows.append({
                "id": f"{task.instance_id}#{sample}", "status": verdict.status, "tests_status": verdict.tests_status,
                "total": episode.total_s, "grading": episode.grade_s, "tests": timings.get("tests", 0.0),
                "sandbox": timings.get("sandbox", 0.0), "runner": verdict.test_runner, "seal": verdict.seal,
            })  # fmt: skip

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(t, s) for t in tasks for s in range(samples)))
    finally:
        if grader is not None:
            await grader.close()
    wall = time.perf_counter() - started
    return {"wall_s": wall, "rows": rows}


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 4)


def _summary(runs: list[dict[str, Any]], cores: int) -> dict[str, Any]:
    rows = [r for run in runs for r in run["rows"]]
    attempts = len(rows)
    wall = sum(run["wall_s"] for run in runs)
    grading = _median(rows, "grading")
    tests = _median(rows, "tests")
    sandbox = _median(rows, "sandbox")
    return {
        "attempts": attempts,
        "attempts_per_s_per_core": round(attempts / wall / cores, 3),
        "median_s": {
            "attempt": _median(rows, "total"),
            "agent": round(statistics.median(r["total"] - r["grading"] for r in rows), 4),
            "grading": grading,
            "grading: sandbox": sandbox,
            "grading: tests (eval script)": tests,
            "grading: harness (apply, inventories, files)": round(
                statistics.median(r["grading"] - r["tests"] - r["sandbox"] for r in rows), 4
            ),
        },
        "forked": sum(r["runner"] == "forked" for r in rows),
        "cold fallbacks": sum(r["runner"].startswith("cold") for r in rows),
        "sealed (strict)": sum(r["seal"] == "confirmed" for r in rows),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("SWE_RL_CACHE", tempfile.mkdtemp(prefix="swe-rl-bench-"))
    from swe_rl.envs.cache import EnvCache
    from swe_rl.harness.official import preload
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.builtin import builtin_tasks
    from swe_rl.tasks.loaders import load_tasks

    preload()
    cores = os.cpu_count() or 1
    sets: dict[str, list[Any]] = {"builtin": builtin_tasks()}
    if args.synth:
        sets[f"synth-{args.synth}"] = load_tasks(str(_synth_tasks(args.synth, args.work)))
    cache, factory = EnvCache(), get_factory("ns")
    for tasks in sets.values():  # envs built before anything is timed
        for task in tasks:
            cache.ensure(task)
    result: dict[str, Any] = {
        "command": " ".join(["python", "bench/throughput.py", *sys.argv[1:]]),
        "cores": cores,
        "grading": args.grading,
        "sets": {},
    }
    for name, tasks in sets.items():
        for jobs in args.jobs:
            runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
            for r in range(args.rounds):
                for mode in ("cold", "warm") if r % 2 == 0 else ("warm", "cold"):
                    runs[mode].append(
                        await _run(tasks, args.samples, jobs, mode == "warm", cache, factory, args.grading)
                    )
            same = {
                row["id"]: (row["status"], row["tests_status"]) for run in runs["cold"] for row in run["rows"]
            } == {
                row["id"]: (row["status"], row["tests_status"]) for run in runs["warm"] for row in run["rows"]
            }
            cold, warm = _summary(runs["cold"], cores), _summary(runs["warm"], cores)
            entry = {
                "tasks": len(tasks),
                "cold": cold,
                "warm": warm,
                "throughput_ratio": round(
                    warm["attempts_per_s_per_core"] / cold["attempts_per_s_per_core"], 2
                ),
                "grading_median_ratio": round(warm["median_s"]["grading"] / cold["median_s"]["grading"], 2),
                "identical_verdicts": same,
            }
            result["sets"][f"{name} -j {jobs}"] = entry
            print(json.dumps({f"{name} -j {jobs}": entry}), flush=True)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", default="1,2,4", help="Concurrency levels, comma-separated.")
    parser.add_argument("--rounds", type=int, default=3, help="Runs of each path per level (interleaved).")
    parser.add_argument(
        "--samples", type=int, default=4, help="Attempts per task in each run (a GRPO group)."
    )
    parser.add_argument(
        "--synth", type=int, default=30, help="Synthesized tasks (0: the builtin suite only)."
    )
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/swe-rl-throughput"), help="Synthesized tasks go here."
    )
    parser.add_argument(
        "--grading",
        choices=["official", "strict"],
        default="official",
        help="Grading mode (strict: training rewards, with the steering rule and sealed results).",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parsed = parser.parse_args()
    parsed.jobs = [int(j) for j in parsed.jobs.split(",")]
    report = asyncio.run(main(parsed))
    parsed.out.parent.mkdir(parents=True, exist_ok=True)
    parsed.out.write_text(json.dumps(report, indent=1) + "\n")
