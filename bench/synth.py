"""Full-size task synthesis from the builtin libraries, then every task proven by ``env validate``.

    python bench/synth.py [--n 220] [--seed 0] [-j 2] [--out /tmp/swe-rl-synth-bench]
    python bench/synth.py --compare-timeouts [--n 30] [--seed 3] [--rounds 2]

Runs ``swe-rl tasks synth`` (ns backend) and ``swe-rl env validate`` on the output, as a user would,
and a second synthesis with the same seed to check the ids are identical. Writes the per-kind time
and pass rate and the validation figures to ``bench/results/synth.json``.

``--compare-timeouts``: the candidate timeout before #25 (``max(30 s, 10 x baseline)``, as
``--timeout-floor 30``) and the current default, interleaved (the order alternates each round), with
the same seed: wall time, seconds per task and whether the task files are identical. Writes
``bench/results/synth_timeouts.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


def _run(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run([*SWE_RL, *args], capture_output=True, text=True, check=False)
    return proc, round(time.monotonic() - started, 1)


def _synth(out: Path, n: int, seed: int, jobs: int, *extra: str) -> tuple[dict, float]:  # type: ignore[type-arg]
    report = out.with_name(f"{out.stem}.report.json")
    proc, seconds = _run(
        "tasks", "synth", "--repo", "builtin", "--n", str(n), "--seed", str(seed), "--out", str(out),
        "--split", "train:0.8,test:0.2", "--backend", "ns", "-j", str(jobs), "--report", str(report), *extra,
    )  # fmt: skip
    if proc.returncode != 0:
        sys.exit(f"synth failed:\n{proc.stderr[-4000:]}")
    return json.loads(report.read_text()), seconds


TIMEOUT_CONFIGS = {"before (floor 30 s)": ("--timeout-floor", "30"), "after (default)": ()}


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def compare_timeouts(out: Path, n: int, seed: int, jobs: int, rounds: int) -> None:
    runs: list[dict] = []  # type: ignore[type-arg]
    for r in range(rounds):
        names = list(TIMEOUT_CONFIGS) if r % 2 == 0 else list(reversed(TIMEOUT_CONFIGS))
        for name in names:
            path = out / f"{r}-{name.split()[0]}" / "builtin.jsonl"
            load = _load()
            report, wall = _synth(path, n, seed, jobs, *TIMEOUT_CONFIGS[name])
            kinds = report["per_kind"].values()
            runs.append({
                "config": name, "round": r, "wall_s": wall, "synth_s": report["seconds"],
                "tasks": len(path.read_text().splitlines()), "tried": sum(k["tried"] for k in kinds),
                "timeouts": sum(k["timeout"] for k in kinds), "load_before": load, "load_after": _load(),
                "s_per_task": round(wall / max(1, len(path.read_text().splitlines())), 2),
                "tasks_sha": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
            })  # fmt: skip
            print(json.dumps(runs[-1]), flush=True)
    summary = {
        name: {
            "wall_s_median": statistics.median(r["wall_s"] for r in runs if r["config"] == name),
            "s_per_task_median": statistics.median(r["s_per_task"] for r in runs if r["config"] == name),
        }
        for name in TIMEOUT_CONFIGS
    }
    result = {
        "command": f"python bench/synth.py --compare-timeouts --n {n} --seed {seed} -j {jobs} --rounds {rounds}",
        "identical_tasks": len({r["tasks_sha"] for r in runs}) == 1,
        "summary": summary,
        "runs": runs,
    }
    (Path(__file__).parent / "results" / "synth_timeouts.json").write_text(
        json.dumps(result, indent=2) + "\n"
    )
    print(json.dumps({k: result[k] for k in ("identical_tasks", "summary")}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=220)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/swe-rl-synth-bench"))
    parser.add_argument("--compare-timeouts", action="store_true", help="Old vs new candidate timeout.")
    parser.add_argument("--rounds", type=int, default=2, help="With --compare-timeouts: runs of each.")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    if args.compare_timeouts:
        compare_timeouts(args.out, args.n, args.seed, args.j, args.rounds)
        return
    first, synth_s = _synth(args.out / "a" / "builtin.jsonl", args.n, args.seed, args.j)
    _, _ = _synth(args.out / "b" / "builtin.jsonl", args.n, args.seed, args.j)
    same = (args.out / "a" / "builtin.jsonl").read_text() == (args.out / "b" / "builtin.jsonl").read_text()
    proc, validate_s = _run(
        "env", "validate", "--tasks", str(args.out / "a" / "builtin.jsonl"), "--backend", "ns",
        "-j", str(args.j), "--json",
    )  # fmt: skip
    validation = json.loads(proc.stdout) if proc.stdout.strip() else {}
    stats, _ = _run("tasks", "stats", "--tasks", str(args.out / "a" / "builtin.jsonl"), "--json")
    result = {
        "n": args.n,
        "seed": args.seed,
        "jobs": args.j,
        "synth_seconds": synth_s,
        "tasks": len((args.out / "a" / "builtin.jsonl").read_text().splitlines()),
        "identical_on_rerun": same,
        "candidates": first["candidates"],
        "per_kind": {
            kind: {
                **s,
                "pass_rate": round(s["valid"] / s["tried"], 3) if s["tried"] else None,
                "seconds_per_run": round(s["seconds"] / s["tried"], 3) if s["tried"] else None,
            }
            for kind, s in first["per_kind"].items()
        },
        "baselines": first["baselines"],
        "validate_seconds": validate_s,
        "validate": {k: validation.get(k) for k in ("total", "valid", "invalid", "errors")},
        "stats": json.loads(stats.stdout),
    }
    out = Path(__file__).parent / "results" / "synth.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("per_kind", "stats")}, indent=2))
    for kind, s in result["per_kind"].items():
        print(
            f"{kind:16} tried {s['tried']:4} valid {s['valid']:4} pass {s['pass_rate']} {s['seconds_per_run']} s/run"
        )


if __name__ == "__main__":
    main()
