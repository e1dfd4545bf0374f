"""Is a held-back set disjoint from every training stage? Reads the stages' task files (issue #42).

    python bench/heldback_disjoint.py --heldback W/rl.test.jsonl \
        --stage warm-start=W/warm-start.jsonl --stage probe=W/probe-tasks.jsonl --stage grpo=W/rl.train.jsonl

For each training stage, what it shares with the held-back set, by four keys of the synthesized records
(docs/SYNTH.md, "Records"): instance ids; functions (the ``synth.source`` library and each mutation's
file and qualified function); bug strings (each mutation's kind and description, e.g. a misspelling
``name_typo: `data` -> `daa```, compared without its location); and repositories (the library). A task
record without ``synth`` metadata counts by its id and repository only. Prints a table (Markdown) and
exits 1 when any stage shares anything with the held-back set, so a run script can stop on it.
``--allow repositories`` (repeatable) names keys that may be shared, for a design that holds back by
function and bug string inside one repository.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

KEYS = ("ids", "functions", "bug strings", "repositories")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def keys_of(record: dict) -> dict[str, set[str]]:
    """The four keys of one task record."""
    synth = record.get("synth") or {}
    repo = str(synth.get("source") or record.get("repo") or "")
    mutations = synth.get("mutations") or []
    return {
        "ids": {record["instance_id"]},
        "functions": {f"{repo}:{m.get('path')}:{m.get('function')}" for m in mutations},
        "bug strings": {f"{m.get('kind')}: {m.get('description')}" for m in mutations},
        "repositories": {repo} if repo else set(),
    }


def union(records: Iterable[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {k: set() for k in KEYS}
    for record in records:
        for key, values in keys_of(record).items():
            out[key] |= values
    return out


def overlaps(heldback: list[dict], stages: dict[str, list[dict]]) -> dict[str, dict[str, list[str]]]:
    """stage -> key -> the values it shares with the held-back set (sorted)."""
    held = union(heldback)
    return {
        name: {key: sorted(held[key] & values) for key, values in union(records).items()}
        for name, records in stages.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heldback", type=Path, required=True, help="The held-back task file.")
    parser.add_argument("--stage", action="append", default=[], help="NAME=FILE of a training stage.")
    parser.add_argument(
        "--allow", action="append", default=[], choices=KEYS, help="A key that may be shared."
    )
    parser.add_argument("--json", type=Path, help="Also write the overlaps here.")
    args = parser.parse_args(argv)
    stages = {}
    for spec in args.stage:
        name, sep, file = spec.partition("=")
        if not sep:
            parser.error(f"--stage takes NAME=FILE, not {spec!r}")
        stages[name] = _records(Path(file))
    heldback = _records(args.heldback)
    found = overlaps(heldback, stages)
    held = union(heldback)
    print(f"held back: {len(heldback)} tasks, " + ", ".join(f"{len(held[k])} {k}" for k in KEYS[1:]))
    print("| stage | tasks | " + " | ".join(f"shared {k}" for k in KEYS) + " |")
    print("|---|---|" + "---|" * len(KEYS))
    for name, shared in found.items():
        cells = [
            f"{len(v)}" + (f" ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})" if v else "")
            for v in shared.values()
        ]
        print(f"| {name} | {len(stages[name])} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    bad = [(n, k) for n, shared in found.items() for k, v in shared.items() if v and k not in args.allow]
    if bad:
        print("not disjoint: " + "; ".join(f"{n} shares {k}" for n, k in bad), file=sys.stderr)
        return 1
    print("disjoint: no training stage shares " + ", ".join(k for k in KEYS if k not in args.allow))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
