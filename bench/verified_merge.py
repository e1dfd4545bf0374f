"""Put the entries of one ``env build`` report into another (issue #39's whole-set run).

The Verified run built one instance of each (repository, version) first, in its own process and report, beside
the run over the whole set; both used the same env cache. This puts the side report's entries into the whole
run's report (the side report's win for an instance both have: they are the newer) and sums it up again, with
the env cache's disk measured now when --cache-dir is given. Run it while neither run is going.

    python bench/verified_merge.py /work/cache39/verified-report.json /work/groups39/report.json \\
        --cache-dir /work/cache39/envs
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    from swe_rl.envs.cache import EnvCache
    from swe_rl.fileio import atomic_write_json
    from swe_rl.runs.buildreport import BuildReport, BuildSummary

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("into", type=Path, help="The report the entries go into (rewritten).")
    parser.add_argument("sides", type=Path, nargs="+", help="Reports whose entries are put in.")
    parser.add_argument("--cache-dir", type=Path, help="Measure this env cache's disk for the summary.")
    args = parser.parse_args()
    report = BuildReport.load(args.into)
    for side in args.sides:
        other = BuildReport.load(side)
        if other.validated != report.validated or other.backend != report.backend:
            raise SystemExit(f"{side}: validated/backend differ from {args.into}'s; not merged")
        report.entries.update(other.entries)
    disk = EnvCache(args.cache_dir).disk_usage() if args.cache_dir else None
    report.summary = BuildSummary.of(report.entries.values(), disk=disk)
    atomic_write_json(args.into, report.model_dump(mode="json"))
    overall = report.summary.overall
    print(
        f"{args.into}: {overall.total} entries, {overall.valid} valid, {overall.invalid} invalid, "
        f"{overall.failed} failed, {overall.error} error"
    )


if __name__ == "__main__":
    main()
