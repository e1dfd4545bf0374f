"""Whether ns and Docker sandboxes give the same verdicts on real SWE-bench Verified instances (issue #39).

The instances are drawn from an ``env build --validate`` report (its ``valid`` and ``invalid`` entries, so
an env exists): grouped by repository, each repository's ids shuffled with ``random.Random(--seed)``, then
taken round-robin across repositories until ``--count`` are drawn, so every repository built is in the
sample. Without ``--report``, every row of ``--tasks`` is drawn from (mined rows: issue #41). Each instance's gold patch and its unchanged base (the empty patch) are graded in the same env on
both backends; a difference in the verdict's status, ``resolved``, or any FAIL_TO_PASS / PASS_TO_PASS test's
status is recorded. Resumable: instances already in ``--out`` are skipped.

    python bench/ns_vs_docker.py --report /work/cache39/verified-report.json \\
        --tasks /work/gold-data/verified-9fa5614.parquet --cache-dir /work/cache39/envs \\
        --repo-cache /work/gold-data/repos [--count 24] [--seed 39]
    python bench/ns_vs_docker.py --tasks mined.jsonl --cache-dir W/envs --count 10 --seed 41 \
        --out bench/results/ns_vs_docker_mined.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "ns_vs_docker.json"
GROUPS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def draw(ids: list[str], count: int, seed: int) -> list[str]:
    """Round-robin over repositories (sorted), each repository's ids in a seeded shuffle."""
    rng = random.Random(seed)
    by_repo: dict[str, list[str]] = {}
    for iid in sorted(ids):
        by_repo.setdefault(iid.rsplit("-", 1)[0], []).append(iid)
    for ids in by_repo.values():
        rng.shuffle(ids)
    drawn: list[str] = []
    while len(drawn) < count and any(by_repo.values()):
        for repo in sorted(by_repo):
            if by_repo[repo] and len(drawn) < count:
                drawn.append(by_repo[repo].pop())
    return drawn


def statuses(verdict: Any) -> dict[str, str]:
    """Each FAIL_TO_PASS / PASS_TO_PASS test's status in a verdict ('success' or 'failure')."""
    out = {}
    for group in GROUPS:
        for status, names in verdict.tests_status.get(group, {}).items():
            for name in names:
                out[f"{group}::{name}"] = status
    return out


async def grade_both(task: Any, env: Any, factories: dict[str, Any], timeout: float) -> dict[str, Any]:
    from swe_rl.harness.grade_patch import grade_patch, run_tests

    row: dict[str, Any] = {"instance_id": task.instance_id}
    for backend, factory in factories.items():
        for kind in ("gold", "empty"):
            started = time.monotonic()
            if kind == "gold":
                verdict = await grade_patch(task, task.patch, factory, env, timeout=timeout)
            else:
                verdict = await run_tests(task, factory, env, timeout=timeout)
            row[f"{backend}.{kind}"] = {
                "status": verdict.status,
                "resolved": verdict.resolved,
                "summary": verdict.summary(),
                "tests": statuses(verdict),
                "seconds": round(time.monotonic() - started, 1),
            }
    row["differences"] = [
        f"{kind}: {what}"
        for kind in ("gold", "empty")
        for what in differences(row[f"ns.{kind}"], row[f"docker.{kind}"])
    ]
    return row


def differences(ns: dict[str, Any], docker: dict[str, Any]) -> list[str]:
    out = [f"{key} {ns[key]} vs {docker[key]}" for key in ("status", "resolved") if ns[key] != docker[key]]
    names = set(ns["tests"]) | set(docker["tests"])
    out += [
        f"{name}: {ns['tests'].get(name)} vs {docker['tests'].get(name)}"
        for name in sorted(names)
        if ns["tests"].get(name) != docker["tests"].get(name)
    ]
    return out


def commit() -> str:
    git = ["git", "rev-parse", "--short", "HEAD"]
    return subprocess.run(git, capture_output=True, text=True, check=False).stdout.strip()


async def main(args: argparse.Namespace) -> None:
    from swe_rl.envs.cache import EnvCache
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.loaders import load_tasks

    every = {t.instance_id: t for t in load_tasks(args.tasks)}
    if args.report:  # the instances the build report has an env for
        entries = json.loads(Path(args.report).read_text())["entries"]
        built = [iid for iid, e in entries.items() if e["status"] in ("valid", "invalid")]
    else:  # every row of the task file (mined or synthesized rows: validated when they were made)
        built = list(every)
    ids = draw(built, args.count, args.seed)
    tasks = {iid: every[iid] for iid in ids}
    cache = EnvCache(Path(args.cache_dir), repo_cache=Path(args.repo_cache) if args.repo_cache else None)
    factories = {"ns": get_factory("ns"), "docker": get_factory("docker")}
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.is_file() else {}
    results.update(
        {
            "command": " ".join(sys.argv),
            "commit": commit(),
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "drawn": ids,
        }
    )
    rows = results.setdefault("instances", {})
    for n, iid in enumerate(ids, 1):
        if iid in rows:
            continue
        env = await asyncio.to_thread(cache.ensure, tasks[iid])
        rows[iid] = await grade_both(tasks[iid], env, factories, args.timeout)
        print(f"[{n}/{len(ids)}] {iid}: {rows[iid]['differences'] or 'same'}", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
    same = [iid for iid in ids if iid in rows and not rows[iid]["differences"]]
    results["totals"] = {
        "instances": len(ids),
        "identical": len(same),
        "repos": len({i.rsplit("-", 1)[0] for i in ids}),
    }
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results["totals"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", help="an `env build --validate` report: draw among its built instances")
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--repo-cache", help="mirrors (rows without repo_source)")
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", default=str(RESULTS))
    asyncio.run(main(parser.parse_args()))
