"""Compare two `swe-rl env build --report` files entry by entry: the same status, env key, and gold and empty
verdicts (with their F2P/P2P counts)? Used to show that packed envs grade as the loose ones did (issue #39).

    python bench/report_compare.py BEFORE.json AFTER.json [--out RESULT.json]

Prints a JSON summary: how many entries both hold, how many are identical, each difference, and the seconds
per entry of AFTER (validation of an env already built: the time to its verdicts).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

FIELDS = ("status", "env", "gold", "empty")


def compare(before: dict, after: dict) -> dict:
    a, b = before["entries"], after["entries"]
    both = sorted(set(a) & set(b))
    differ = {
        iid: {f: [a[iid].get(f), b[iid].get(f)] for f in FIELDS if a[iid].get(f) != b[iid].get(f)}
        for iid in both
        if any(a[iid].get(f) != b[iid].get(f) for f in FIELDS)
    }
    seconds = sorted(float(b[iid]["seconds"]) for iid in both if b[iid].get("seconds") is not None)
    return {
        "entries_before": len(a),
        "entries_after": len(b),
        "compared": len(both),
        "identical": len(both) - len(differ),
        "differ": differ,
        "only_before": sorted(set(a) - set(b)),
        "after_seconds": {
            "median": statistics.median(seconds) if seconds else None,
            "max": seconds[-1] if seconds else None,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, help="Also write the summary here.")
    args = parser.parse_args(argv)
    result = compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if not result["differ"] else 1


if __name__ == "__main__":
    sys.exit(main())
