"""Issue #39: the git history the pack stores of an env cache would hold for a list of instances, built in a given
order, without building their envs: each base's pack chain (swe_rl.envs.store.gitpacks.PackStore) made in a scratch cache.
Runs are the order `env build` would take them in: each run's instances per repository oldest first.

    python bench/history_packs.py PARQUET REPOS SCRATCH RUN1.txt [RUN2.txt ...] [--chunk 50 --rest REST.txt]
        [--anchor-every N]

Prints JSON: per repository the bases, pack directories, whole histories (chains from the root) and bytes of pack
files, and the total.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from swe_rl.envs.store.gitpacks import ANCHOR_EVERY, PackStore
from swe_rl.errors import InfraError


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("parquet")
    ap.add_argument("repos", type=Path)
    ap.add_argument("scratch", type=Path)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--rest", type=Path, help="more ids, built in runs of --chunk in the file's order")
    ap.add_argument("--chunk", type=int, default=50)
    ap.add_argument("--anchor-every", type=int, default=ANCHOR_EVERY)
    args = ap.parse_args()
    rows = pq.read_table(
        args.parquet, columns=["instance_id", "repo", "base_commit", "created_at"]
    ).to_pylist()
    by_id = {r["instance_id"]: r for r in rows}
    runs = [f.read_text().split() for f in args.runs]
    if args.rest:
        rest = args.rest.read_text().split()
        runs += [rest[k : k + args.chunk] for k in range(0, len(rest), args.chunk)]
    stores: dict[str, PackStore] = {}
    failed: list[str] = []
    started = time.monotonic()
    for n, run in enumerate(runs, 1):
        for iid in sorted(run, key=lambda i: (by_id[i]["repo"], by_id[i]["created_at"])):
            row = by_id[iid]
            owner, name = row["repo"].split("/")
            source = args.repos / owner / f"{name}.git"
            store = stores.setdefault(
                row["repo"], PackStore(args.scratch, str(source), anchor_every=args.anchor_every)
            )
            try:
                store.chain(row["base_commit"])
            except InfraError:
                failed.append(iid)
        print(f"run {n}/{len(runs)}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    out: dict[str, dict[str, int]] = {}
    for repo, store in sorted(stores.items()):
        dirs = [d for d in store.dir.iterdir() if (d / "parent").is_file()]
        out[repo] = {
            "pack_dirs": len(dirs),
            "roots": sum(1 for d in dirs if not (d / "parent").read_text().strip()),
            "bytes": sum(p.stat().st_size for d in dirs for p in d.iterdir() if p.name.startswith("pack-")),
        }
    total = sum(v["bytes"] for v in out.values())
    print(
        json.dumps(
            {
                "anchor_every": args.anchor_every,
                "runs": len(runs),
                "failed": failed,
                "total_bytes": total,
                "repos": out,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
