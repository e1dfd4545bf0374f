"""Grading with and without a byte-compiled venv (envs compile theirs at build time since session 2).

Sandboxes run with PYTHONDONTWRITEBYTECODE over a read-only venv, so without .pyc files every test run
compiles pytest from source. Same env, same gold patch, ns backend; rounds alternate between the two
states (compiled / __pycache__ removed) so machine noise hits both alike.

    python bench/grading_bytecode.py --rounds 5 --per-round 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path


async def main(rounds: int, per_round: int, out: Path) -> dict:
    import os

    os.environ.setdefault("SWE_RL_CACHE", tempfile.mkdtemp(prefix="swe-rl-bench-"))
    from swe_rl.envs.build.venv import compile_venv
    from swe_rl.envs.cache import EnvCache
    from swe_rl.harness.grade_patch import grade_patch
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.builtin import builtin_tasks

    task = next(t for t in builtin_tasks() if t.instance_id == "swe-rl-builtin__textkit-1")
    env = EnvCache().ensure(task)
    assert env.venv is not None
    factory = get_factory("ns")
    times: dict[str, list[float]] = {"compiled": [], "source only": []}
    for _ in range(rounds):
        for state in times:
            if state == "compiled":
                compile_venv(env.venv)
            else:
                for cache in env.venv.rglob("__pycache__"):
                    shutil.rmtree(cache)
            for _ in range(per_round):
                t0 = time.perf_counter()
                verdict = await grade_patch(task, task.patch, factory, env)
                times[state].append(time.perf_counter() - t0)
                assert verdict.resolved
    compile_venv(env.venv)
    result = {
        "task": task.instance_id,
        "grades_per_state": rounds * per_round,
        "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
    }
    result["ratio_compiled_vs_source"] = round(
        result["median_s"]["compiled"] / result["median_s"]["source only"], 2
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("bench/results/grading_bytecode.json"))
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.rounds, args.per_round, args.out)), indent=1))
