"""The exceptions of a dataset-wide ``env build --validate`` run, as Markdown (issue #39).

Reads the run's report (``env build --report``) and prints the totals per repository and one row per instance
that is not ``valid``: its status, the class of its cause (``CAUSE_RULES`` of ``swe_rl.runs.buildreport``) and
the first line of its reason. docs/ENVIRONMENTS.md and BENCHMARKS.md quote its output.

    python bench/verified_exceptions.py /work/cache39/verified-report.json [--total 500]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def main() -> None:
    from swe_rl.runs.buildreport import BuildReport, cause_of

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument(
        "--total", type=int, default=0, help="Instances in the dataset (default: the report's)."
    )
    args = parser.parse_args()
    report = BuildReport.load(args.report)
    entries = list(report.entries.values())
    total = args.total or len(entries)
    statuses = Counter(e.status for e in entries)
    print(
        f"{len(entries)} of {total} instances in the report: "
        + ", ".join(f"{n} {s}" for s, n in statuses.most_common())
    )
    valid = statuses.get("valid", 0)
    fetchable = len(entries) - statuses.get("unfetchable", 0)  # the acceptance's denominator
    print(f"valid: {valid} of {fetchable} fetchable ({100 * valid / max(1, fetchable):.1f} %)\n")
    print("| instance | status | cause | reason |")
    print("|---|---|---|---|")
    for entry in sorted(entries, key=lambda e: e.instance_id):
        if entry.status == "valid":
            continue
        reason = (entry.reason or "").strip().splitlines()[0] if entry.reason else ""
        reason = reason.replace("|", "\\|")[:160]
        print(f"| {entry.instance_id} | {entry.status} | {cause_of(entry) or '-'} | {reason} |")


if __name__ == "__main__":
    main()
