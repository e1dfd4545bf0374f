"""The report of a held-back GRPO run with several seeds (bench/learning_heldback.sh, issue #42).

    python bench/heldback_report.py W [--resamples 2000] [--rng-seed 0]

Reads the run folder W: heldback.jsonl (each task's function, from its ``synth`` metadata), the
evaluations' results.jsonl (before-sampled, before-greedy, after-s<SEED>-sampled, after-s<SEED>-greedy,
probe; one without summary.json is still going: shown, and left out of every difference) and each GRPO run's
grpo-s<SEED>/summary.json and rollouts.jsonl. Writes W/results.json and W/report.md (the same figures, for
people) and prints the report.

Two conventions of "resolved", both reported every time: **submitted** (mini-swe-agent's: the episode
submitted and its patch resolves) and **graded** (SWE-agent's: the working tree's diff is graded at the
limit whether the agent submitted or not). Episodes with an infrastructure error are left out of both.

What it computes:
- each evaluation: episodes, resolved and rate under both conventions, submit rate, format-error rate;
- per seed, sampled: after minus before in points under both conventions, a 95 % interval from a cluster
  bootstrap over functions (functions resampled with replacement, each with all its tasks and episodes,
  before and after together), the bootstrap sd (evaluation noise), an interval that treats episodes as
  independent (Wald, for contrast only), and the paired per-task count of tasks up and down;
- pooled over seeds: the mean difference, its spread across seeds (min, max, sd) and a 95 % interval from a
  two-level bootstrap (functions resampled, and for each draw the seeds resampled with replacement), so seed
  variance and evaluation noise are both in it; the evaluation noise alone (mean within-seed bootstrap sd)
  next to the seed sd;
- per held-back function, each sampled evaluation's episodes and resolved under both conventions;
- greedy, per seed: tasks solved before and after under both conventions;
- per GRPO run: per step, the training episodes' submit rate and resolve rates (rollouts.jsonl);
- the goal (#42): GRPO raises the held-back submitted-only rate by >= 10 points, pooled over >= 3 seeds, with
  the lower end of the pooled interval above zero: "met" or "not met", computed from the figures above.

Percentile intervals; the bootstrap's RNG is seeded (--rng-seed), so the same inputs give the same files.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
from collections import Counter
from pathlib import Path

from _heldback_render import render  # the report for people, beside this script

CONVENTIONS = ("submitted", "graded")
GOAL_POINTS, MIN_SEEDS = 10.0, 3
AFTER = re.compile(r"^after-s(\d+)-(sampled|greedy)$")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def function_of(record: dict) -> str:
    """The function a task's bug is in: ``source:file:function`` from ``synth``, else the mutations' (sorted),
    else the task itself (a record without synth metadata is its own cluster)."""
    synth = record.get("synth") or {}
    source = synth.get("source") or record.get("repo") or ""
    if synth.get("function"):
        return f"{source}:{synth.get('file')}:{synth['function']}"
    keys = sorted({f"{source}:{m.get('path')}:{m.get('function')}" for m in synth.get("mutations") or []})
    return "+".join(keys) or record["instance_id"]


def label_of(record: dict) -> str:
    """What the report's table calls a task's function: ``synth``'s own name for it (``file::name``), else the
    cluster key itself."""
    return (record.get("synth") or {}).get("function") or function_of(record)


def infra(row: dict) -> bool:
    return bool(row.get("error")) or row.get("exit_status") == "infra_error"


def wins(row: dict, convention: str) -> bool:
    """Resolved under ``convention``: submitted (and resolved) or graded at the limit."""
    resolved = bool(row.get("resolved"))
    return resolved and row.get("patch_source") == "submission" if convention == "submitted" else resolved


def rate(k: int, n: int) -> float:
    return round(k / n, 4) if n else 0.0


def eval_stats(rows: list[dict]) -> dict:
    """One evaluation's figures under both conventions."""
    ok = [r for r in rows if not infra(r)]
    n = len(ok)
    out = {"episodes": n, "infra_errors": len(rows) - n, "tasks": len({r["instance_id"] for r in rows})}
    for c in CONVENTIONS:
        k = sum(wins(r, c) for r in ok)
        out[c] = {"resolved": k, "rate": rate(k, n)}
    submitted = sum(r.get("patch_source") == "submission" for r in ok)
    out["submit_rate"] = rate(submitted, n)
    out["format_error_rate"] = rate(sum(bool(r.get("format_errors")) for r in ok), n)
    return out


def cells(rows: list[dict], functions: dict[str, str]) -> dict[str, list[int]]:
    """function -> [episodes, resolved submitted, resolved graded] of one evaluation."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if infra(r):
            continue
        cell = out.setdefault(functions.get(r["instance_id"], r["instance_id"]), [0, 0, 0])
        cell[0] += 1
        cell[1] += wins(r, "submitted")
        cell[2] += wins(r, "graded")
    return out


def diff_points(before: dict, after: dict, draw: list[str]) -> tuple[float, float]:
    """After minus before, in points, for both conventions, over the functions ``draw`` (with repeats)."""
    b, a = [0, 0, 0], [0, 0, 0]
    for f in draw:
        for total, cell in ((b, before.get(f)), (a, after.get(f))):
            if cell:
                for i in range(3):
                    total[i] += cell[i]
    return tuple(100 * (a[i] / max(1, a[0]) - b[i] / max(1, b[0])) for i in (1, 2))


def per_function(runs: dict[str, list[dict]], records: list[dict]) -> dict[str, dict]:
    """Each held-back function's sampled evaluations: its label, its tasks, and per evaluation the episodes and
    the resolved under both conventions (the cells the cluster bootstrap resamples, for a reader to see)."""
    functions = {r["instance_id"]: function_of(r) for r in records}
    labels = {function_of(r): label_of(r) for r in records}
    sampled = {name: cells(rows, functions) for name, rows in runs.items() if name.endswith("-sampled")}
    out: dict[str, dict] = {}
    for name, tasks in sorted(Counter(functions.values()).items()):
        counts = {
            e: dict(zip(("episodes", *CONVENTIONS), c.get(name, [0, 0, 0]), strict=True))
            for e, c in sampled.items()
        }
        out[name] = {"label": labels[name], "tasks": tasks, "sampled": counts}
    return out


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


def summarize(draws: list[float]) -> dict:
    return {
        "ci95_points": [round(percentile(draws, 0.025), 2), round(percentile(draws, 0.975), 2)],
        "bootstrap_sd_points": round(statistics.stdev(draws), 2) if len(draws) > 1 else 0.0,
    }


def wald(before: dict, after: dict, i: int) -> list[float]:
    """Episodes as independent (contrast only): a Wald interval for the difference of two rates, in points."""
    nb, kb = sum(c[0] for c in before.values()), sum(c[i] for c in before.values())
    na, ka = sum(c[0] for c in after.values()), sum(c[i] for c in after.values())
    pb, pa = kb / max(1, nb), ka / max(1, na)
    se = math.sqrt(pb * (1 - pb) / max(1, nb) + pa * (1 - pa) / max(1, na))
    return [round(100 * (pa - pb - 1.96 * se), 2), round(100 * (pa - pb + 1.96 * se), 2)]


def per_task(rows: list[dict], c: str) -> dict[str, float]:
    by: dict[str, list[bool]] = {}
    for r in rows:
        if not infra(r):
            by.setdefault(r["instance_id"], []).append(wins(r, c))
    return {t: sum(v) / len(v) for t, v in by.items()}


def seed_difference(before_rows, after_rows, functions, resamples: int, rng: random.Random) -> dict:
    """One seed's sampled difference, both conventions, with its function-clustered bootstrap."""
    before, after = cells(before_rows, functions), cells(after_rows, functions)
    names = sorted(set(before) | set(after))
    point = diff_points(before, after, names)
    draws = [diff_points(before, after, rng.choices(names, k=len(names))) for _ in range(resamples)]
    out = {"functions": len(names)}
    for j, c in enumerate(CONVENTIONS):
        pb, pa = per_task(before_rows, c), per_task(after_rows, c)
        both = sorted(set(pb) & set(pa))
        out[c] = {
            "points": round(point[j], 2),
            **summarize([d[j] for d in draws]),
            "ci95_points_episodes": wald(before, after, j + 1),
            "paired": {
                "tasks": len(both),
                "tasks_up": sum(pa[t] > pb[t] for t in both),
                "tasks_down": sum(pa[t] < pb[t] for t in both),
                "tasks_same": sum(pa[t] == pb[t] for t in both),
            },
        }
    return out


def pooled(before_rows, afters: dict, functions, per_seed: dict, resamples: int, rng) -> dict:
    """Over seeds: mean, spread, and a two-level bootstrap (functions, then seeds with replacement)."""
    before = cells(before_rows, functions)
    after = {s: cells(rows, functions) for s, rows in afters.items()}
    seeds = sorted(after)
    names = sorted(set(before).union(*after.values()))
    draws = []
    for _ in range(resamples):
        draw = rng.choices(names, k=len(names))
        picks = [diff_points(before, after[s], draw) for s in rng.choices(seeds, k=len(seeds))]
        draws.append(tuple(statistics.fmean(p[j] for p in picks) for j in range(2)))
    out = {"seeds": len(seeds)}
    for j, c in enumerate(CONVENTIONS):
        points = [diff_points(before, after[s], names)[j] for s in seeds]
        noise = [per_seed[s][c]["bootstrap_sd_points"] for s in seeds]
        out[c] = {
            "points": round(statistics.fmean(points), 2),
            "seed_min": round(min(points), 2),
            "seed_max": round(max(points), 2),
            "seed_sd_points": round(statistics.stdev(points), 2) if len(points) > 1 else 0.0,
            "eval_noise_sd_points": round(statistics.fmean(noise), 2),
            **summarize([d[j] for d in draws]),
        }
    return out


def goal(pool: dict | None) -> dict:
    """#42's goal, from the pooled submitted-only figures: met only when every condition holds."""
    if not pool:
        return {"met": False, "line": "Goal: not met (no seed evaluated after GRPO)."}
    s = pool["submitted"]
    why = []
    if pool["seeds"] < MIN_SEEDS:
        why.append(f"{pool['seeds']} seed(s), fewer than {MIN_SEEDS}")
    if s["points"] < GOAL_POINTS:
        why.append(f"pooled submitted-only difference {s['points']:+.1f} < {GOAL_POINTS:+.0f} points")
    if s["ci95_points"][0] <= 0:
        why.append(f"the pooled interval's lower end {s['ci95_points'][0]:+.1f} is not above zero")
    head = f"pooled submitted-only {s['points']:+.1f} points (95 % {s['ci95_points'][0]:+.1f} to {s['ci95_points'][1]:+.1f})"
    line = f"Goal (>= {GOAL_POINTS:.0f} points submitted-only, pooled lower end > 0): " + (
        f"**met**: {head}." if not why else f"**not met**: {head}; " + "; ".join(why) + "."
    )
    return {"met": not why, "line": line, "reasons": why}


def greedy(rows: list[dict]) -> dict:
    ok = [r for r in rows if not infra(r)]
    tasks = {r["instance_id"] for r in ok}
    return {
        "tasks": len(tasks),
        **{c: len({r["instance_id"] for r in ok if wins(r, c)}) for c in CONVENTIONS},
    }


def grpo_run(folder: Path) -> dict:
    """One GRPO run: its settings that matter here and, per step, submit and resolve rates."""
    summary = read_json(folder / "summary.json")
    # a run still going has no summary yet; its config.json holds the same settings from the start
    settings = summary.get("settings") or read_json(folder / "config.json").get("settings") or {}
    steps: dict[int, list[dict]] = {}
    for r in read_jsonl(folder / "rollouts.jsonl"):
        if not infra(r):
            steps.setdefault(int(r.get("step") or 0), []).append(r)
    curve = []
    for step, rows in sorted(steps.items()):
        stats = eval_stats(rows)
        rewards = [r["reward"] for r in rows if r.get("reward") is not None]
        curve.append(
            {
                "step": step,
                "episodes": stats["episodes"],
                **{c: stats[c]["rate"] for c in CONVENTIONS},
                "submit_rate": stats["submit_rate"],
                "format_error_rate": stats["format_error_rate"],
                "reward_mean": round(statistics.fmean(rewards), 4) if rewards else None,
            }
        )
    return {
        "finished": bool(summary),  # `train rl` writes summary.json last, after final/ (not kept in results)
        "steps": summary.get("steps"),
        "seed": settings.get("seed"),
        "unsubmitted": settings.get("unsubmitted"),
        "curve": curve,
    }


def _seed_of(folder: Path) -> tuple[int, str]:
    tail = folder.name[len("grpo-s") :]
    return (int(tail) if tail.isdigit() else 1 << 30, tail)


def _eval_order(folder: Path) -> tuple[int, int, str]:
    """probe, before-sampled, before-greedy, then each seed's (numerically), sampled before greedy."""
    m = AFTER.match(folder.name)
    first = ("probe", "before-sampled", "before-greedy")
    if m:
        return (len(first), int(m.group(1)), m.group(2)[::-1])  # "delpmas" < "ydeerg"
    return (first.index(folder.name) if folder.name in first else 99, 0, folder.name)


def build(w: Path, resamples: int, rng_seed: int) -> dict:
    """Every figure of the report, from the run folder."""
    records = read_jsonl(w / "heldback.jsonl")
    functions = {r["instance_id"]: function_of(r) for r in records}
    every, runs = {}, {}
    for d in sorted((p for p in w.iterdir() if p.is_dir()), key=_eval_order):
        named = d.name in ("probe", "before-sampled", "before-greedy") or AFTER.match(d.name)
        if named and (d / "results.jsonl").is_file():
            every[d.name] = read_jsonl(d / "results.jsonl")
            if (d / "summary.json").is_file():  # `swe-rl eval` writes it when every attempt is done
                runs[d.name] = every[d.name]
    out: dict = {"heldback": {"tasks": len(functions), "functions": len(set(functions.values()))}}
    out["bootstrap"] = {"resamples": resamples, "rng_seed": rng_seed, "unit": "function"}
    # an evaluation still going is shown, and left out of every figure computed from two evaluations
    out["evaluations"] = {
        name: {**eval_stats(rows), "finished": name in runs} for name, rows in every.items()
    }
    out["functions"] = per_function(runs, records)
    seeds = sorted({int(m.group(1)) for n in runs if (m := AFTER.match(n))})
    rng = random.Random(rng_seed)
    before = runs.get("before-sampled")
    afters = {str(s): runs[f"after-s{s}-sampled"] for s in seeds if f"after-s{s}-sampled" in runs}
    out["seeds"] = {}
    for s in seeds:
        entry: dict = {}
        if before is not None and str(s) in afters:
            entry["sampled"] = seed_difference(before, afters[str(s)], functions, resamples, rng)
        if "before-greedy" in runs and f"after-s{s}-greedy" in runs:
            entry["greedy"] = {
                "before": greedy(runs["before-greedy"]),
                "after": greedy(runs[f"after-s{s}-greedy"]),
            }
        out["seeds"][str(s)] = entry
    sampled = {s: e["sampled"] for s, e in out["seeds"].items() if "sampled" in e}
    pool = pooled(before, afters, functions, sampled, resamples, rng) if sampled else None
    out["pooled"] = pool
    out["goal"] = goal(pool)
    out["grpo"] = {
        d.name[len("grpo-s") :]: grpo_run(d) for d in sorted(w.glob("grpo-s*"), key=_seed_of) if d.is_dir()
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    parser.add_argument("run", type=Path, help="The run folder (W of bench/learning_heldback.sh).")
    parser.add_argument("--resamples", type=int, default=2000, help="Bootstrap resamples (default 2000).")
    parser.add_argument("--rng-seed", type=int, default=0, help="The bootstrap's RNG seed (default 0).")
    parser.add_argument("--quiet", action="store_true", help="Do not print the report.")
    args = parser.parse_args(argv)
    if not (args.run / "heldback.jsonl").is_file():
        parser.error(f"no {args.run / 'heldback.jsonl'}: not a held-back run folder")
    out = build(args.run, args.resamples, args.rng_seed)
    text = render(args.run, out)
    (args.run / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    (args.run / "report.md").write_text(text)
    if not args.quiet:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
