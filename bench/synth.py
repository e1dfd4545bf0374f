"""Full-size task synthesis from the builtin libraries, then every task proven by ``env validate``.

    python bench/synth.py [--n 220] [--seed 0] [-j 2] [--out /tmp/swe-rl-synth-bench]

Runs ``swe-rl tasks synth`` (ns backend) and ``swe-rl env validate`` on the output, as a user would,
and a second synthesis with the same seed to check the ids are identical. Writes the per-kind time
and pass rate and the validation figures to ``bench/results/synth.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


def _run(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run([*SWE_RL, *args], capture_output=True, text=True, check=False)
    return proc, round(time.monotonic() - started, 1)


def _synth(out: Path, n: int, seed: int, jobs: int) -> tuple[dict, float]:  # type: ignore[type-arg]
    report = out.with_name(f"{out.stem}.report.json")
    proc, seconds = _run(
        "tasks", "synth", "--repo", "builtin", "--n", str(n), "--seed", str(seed), "--out", str(out),
        "--split", "train:0.8,test:0.2", "--backend", "ns", "-j", str(jobs), "--report", str(report),
    )  # fmt: skip
    if proc.returncode != 0:
        sys.exit(f"synth failed:\n{proc.stderr[-4000:]}")
    return json.loads(report.read_text()), seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=220)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/swe-rl-synth-bench"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
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
