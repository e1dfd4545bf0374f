"""Yield tables of `swe-rl tasks mine` runs (issue #41), from their files alone, finished or not.

    python bench/mine_tables.py --run W/getmoto__moto.jsonl=/work/.mirror/getmoto+moto/repo \\
        --since 2023-01-01T00:00:00Z --until 2023-02-01T00:00:00Z [--run ...] [--json OUT]

For each run (a task file, its state file beside it, and the repository it was mined from), the window's
first-parent commits and candidates are recounted from the history with the miner's own rules
(``candidates_of``), then the state file's decisions are counted: decided, kept (valid tasks), tasks per 100
commits and per candidate, the share of candidates dropped at each stage by reason, and seconds per valid
task (the decisions' own times where the state has them; else the run's wall time from ``F.summary.json``,
whose candidates were decided ``-j`` at a time). A run still going is marked with how many are undecided.
Prints a Markdown table; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def tally(out: Path, repo: Path, since: str, until: str) -> dict:
    from swe_rl.mine.history import History
    from swe_rl.mine.pipeline import candidates_of
    from swe_rl.mine.state import MineState, state_path

    history = History(repo)
    commits = history.commits(since, until)
    candidates, history_drops = candidates_of(history, commits)
    path = state_path(out)
    state = MineState.model_validate_json(path.read_text()) if path.is_file() else None
    decided = [state.decided[c.commit] for c in candidates if state and c.commit in state.decided]
    kept = [d for d in decided if d.kept]
    drops = Counter(f"{d.stage}: {d.reason.split(' (')[0]}" for d in decided if not d.kept)
    timed = sum(d.seconds for d in decided)
    summary = out.with_name(f"{out.stem}.summary.json")
    wall = (
        json.loads(summary.read_text()).get("seconds")
        if summary.is_file() and summary.stat().st_size
        else None
    )
    return {
        "run": str(out),
        "repo": str(repo),
        "window": [since, until],
        "commits": len(commits),
        "not candidates": dict(sorted((f"{s}: {r}", n) for (s, r), n in history_drops.items())),
        "candidates": len(candidates),
        "decided": len(decided),
        "undecided": len(candidates) - len(decided),
        "valid tasks": len(kept),
        "tasks per 100 commits": round(100 * len(kept) / max(1, len(commits)), 1),
        "kept of decided": round(len(kept) / max(1, len(decided)), 3),
        "dropped (share of decided)": {k: round(n / len(decided), 3) for k, n in drops.most_common()},
        "seconds per valid task": round(timed / len(kept), 1) if timed and kept else None,
        "wall seconds (summary)": wall,
    }


def table(rows: list[dict]) -> str:
    head = "| run | commits | candidates | decided | valid | per 100 commits | kept / decided | s per valid | dropped |"
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        drops = "; ".join(f"{k} {v:.0%}" for k, v in r["dropped (share of decided)"].items()) or "-"
        lines.append(
            f"| {Path(r['run']).stem} | {r['commits']} | {r['candidates']} | {r['decided']}"
            f"{' (unfinished)' if r['undecided'] else ''} | {r['valid tasks']} | {r['tasks per 100 commits']} | "
            f"{r['kept of decided']:.0%} | {r['seconds per valid task'] or '-'} | {drops} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", action="append", required=True, help="TASKS.jsonl=REPO (repeatable)")
    parser.add_argument("--since", required=True)
    parser.add_argument("--until", required=True)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    rows = []
    for spec in args.run:
        out, sep, repo = spec.partition("=")
        if not sep:
            parser.error(f"--run {spec!r}: give TASKS.jsonl=REPO")
        rows.append(tally(Path(out), Path(repo), args.since, args.until))
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
