"""Recall of `swe-rl tasks mine` against SWE-bench (issue #41): where each reference fix landed, and which
of them a mining run produced.

    python bench/mine_recall.py pick --ref lite.parquet --ref verified.parquet --repos-dir /work/gold-data/repos \
        --repo pytest-dev/pytest --repo sympy/sympy=/path/to/sympy.git --days 31 --days 14 --out pick.json
    python bench/mine_recall.py score --ref lite.parquet --ref verified.parquet --repo pytest-dev/pytest=PATH \
        --since '2020-01-01 00:00:00 +0000' --until '2020-01-31 23:59:59 +0000' --tasks F.jsonl --out score.json

``pick`` finds, for each reference instance of a repository (``owner__name-N`` is pull request #N), the
commit of the mirror's first-parent line of HEAD that brought its fix: by subject (``Merge pull request #N
...``, or a squash subject ending ``(#N)``), else by the gold patch (the first commit after the instance's
``created_at`` whose change to the gold patch's files has the same added and removed lines: hunk offsets and
context may differ, the merge's parent being ahead of the PR's base). Then, for each ``--days D``, the
densest window: the D calendar days (UTC) of fix dates holding the most located instances, with the number
of first-parent commits in it (what a mining run over it has to decide).

``score`` reads a mined task file F.jsonl and its F.mine-state.json and decides each reference instance
whose fix landed in ``--since``/``--until`` (as git reads them, as the miner does): produced (a kept row of
the fix's commit, or whose source files are the gold patch's, with a FAIL_TO_PASS test in common, names
compared by function and parameters) or missed, with the reason: the miner's decision for that commit, the
history rule that dropped it, "not a candidate" (no first-parent commit carries the fix), or "kept but no
FAIL_TO_PASS in common". Prints recall = produced / in period; writes the JSON report.

``paths`` prints the source files of the gold patches of the instances ``score`` would decide for a period,
one per line: what ``tasks mine --path`` needs to validate only the candidates that could be scored
produced (a row counts only with exactly the gold patch's source files, so a change touching none of them
never does): the same recall as mining the whole period, without deciding its other candidates.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path

from _recall_locate import (
    DAY,
    Located,
    Reference,
    Step,
    day_of,
    first_parent,
    load_references,
    locate,
    parse_stamp,
    run_git,
)

from swe_rl.errors import InfraError
from swe_rl.mine.history import Commit, History, drop_reason, is_source_file
from swe_rl.mine.state import state_path


def densest(located: list[Located], line: list[Step], days: int) -> dict:
    """The ``days`` calendar days (UTC) holding the most located fixes (the earliest of equals)."""
    best: tuple[int, int] = (-1, 0)
    for start in sorted({loc.timestamp - loc.timestamp % DAY for loc in located}):
        count = sum(start <= loc.timestamp < start + days * DAY for loc in located)
        if count > best[0]:
            best = (count, start)
    if best[0] < 0:
        return {"days": days, "count": 0, "instances": []}
    start, end = best[1], best[1] + days * DAY
    inside = sorted((loc for loc in located if start <= loc.timestamp < end), key=lambda x: x.timestamp)
    return {
        "days": days,
        "since": f"{day_of(start)} 00:00:00 +0000",
        "until": f"{day_of(end - 1)} 23:59:59 +0000",
        "commits": sum(start <= s.timestamp < end for s in line),
        "count": len(inside),
        "instances": [loc.instance_id for loc in inside],
    }


def _repo_path(spec: str, repos_dir: Path) -> tuple[str, Path]:
    """``owner/name`` (a mirror at ``repos_dir/owner/name.git``) or ``owner/name=PATH``."""
    name, _, path = spec.partition("=")
    return name, Path(path) if path else repos_dir / f"{name}.git"


def pick_repo(spec: str, args: argparse.Namespace) -> dict:
    """One repository's located and unlocated instances and its densest windows."""
    name, path = _repo_path(spec, args.repos_dir)
    refs = load_references(args.ref, name)
    line = first_parent(path)
    located, why = locate(path, refs, line)
    return {
        "repo": name,
        "mirror": str(path),
        "head": line[-1].commit if line else "",
        "instances": len(refs),
        "located": [asdict(loc) | {"date": loc.date} for loc in located],
        "unlocated": [{"instance_id": key, "why": text} for key, text in why.items()],
        "windows": [densest(located, line, days) for days in args.days],
    }


def pick_table(results: list[dict]) -> str:
    """The windows as a Markdown table, then the instances not located."""
    lines = [
        "| repo | instances | located: subject/patch/carried | days | window (UTC) | first-parent commits | in window |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        rules = [loc["rule"] for loc in res["located"]]
        carried = {loc["instance_id"] for loc in res["located"] if loc["rule"].startswith("carried")}
        counts = (sum(r.endswith("subject") for r in rules), rules.count("gold patch"), len(carried))
        found = f"{len(rules)}: {counts[0]}/{counts[1]}/{counts[2]}"
        for win in res["windows"]:
            span = f"{win['since'][:10]} .. {win['until'][:10]}" if win["count"] else "-"
            ids = ", ".join(i.rsplit("-", 1)[1] + ("*" if i in carried else "") for i in win["instances"])
            lines.append(
                f"| {res['repo']} | {res['instances']} | {found} | {win['days']} | {span} | "
                f"{win.get('commits', 0)} | {win['count']}: {ids} |"
            )
    lines.append(
        "(* carried: the PR was merged off the first-parent line; the window counts where it landed)"
    )
    for res in results:
        lines += [f"- not located: {u['instance_id']}: {u['why']}" for u in res["unlocated"]]
    return "\n".join(lines)


def cmd_pick(args: argparse.Namespace) -> int:
    results = [pick_repo(spec, args) for spec in args.repo]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"days": args.days, "repos": results}, indent=1) + "\n")
    print(pick_table(results))
    return 0


def normalize_test(name: str) -> str:
    """A test name as its function and parameters: ``path::Class::test_x[p]`` -> ``test_x[p]``, django's
    ``test_x (module.Class)`` -> ``test_x``, sympy's bare ``test_x`` as it is."""
    name = name.strip()
    if match := re.fullmatch(r"(\w+) \([\w.]+\)", name):
        return match.group(1)
    head, bracket, params = name.partition("[")
    return head.split("::")[-1].strip() + bracket + params


def _rows(tasks: Path) -> tuple[list[dict], dict[str, dict]]:
    """The kept rows of a task file and the decisions of its state file (empty when it has none); a run still
    going has written no task file yet: its rows are the kept records of its state."""
    state = state_path(tasks)
    decided = json.loads(state.read_text()).get("decided", {}) if state.is_file() else {}
    if not tasks.is_file():
        return [d["record"] for d in decided.values() if d.get("kept") and d.get("record")], decided
    rows = [json.loads(line) for line in tasks.read_text().splitlines() if line.strip()]
    return rows, decided


def _f2p(row: dict) -> list[str]:
    value = row.get("FAIL_TO_PASS") or []
    return json.loads(value) if isinstance(value, str) else list(value)


def verdict(
    ref: Reference, commit: str, rows: list[dict], decided: dict[str, dict], history: History
) -> dict:
    """Produced or missed, with the reason, for an instance whose fix landed with ``commit`` (in the mined
    range). Produced is the issue's "same fix": a kept row with the gold patch's source files, exactly, and a
    FAIL_TO_PASS test in common. A branch merge's fix is looked for on the branch's own commits, which are
    what the miner decided."""
    sources = sorted(f for f in ref.files if is_source_file(f))
    theirs = {normalize_test(t) for t in ref.fail_to_pass}
    parents = tuple(run_git(["rev-list", "--parents", "-n1", commit], history.path).split()[1:])
    unfolded = history.branch_line(Commit(commit=commit, parents=parents, timestamp=0))
    if unfolded is not None:  # a branch merge: the miner decided the branch's pull requests one by one
        inner = _inner_candidate(ref, sources, unfolded[0], history)
        if inner is None:
            return {
                "produced": False,
                "reason": "branch merge: no commit of the branch carries the fix alone",
            }
        commit = inner
    same_files = [r for r in rows if sorted(r["mine"].get("source_files", [])) == sources]
    # the fix's own row first: another fix of the same file may share a test with it too (sympy 13895 and
    # 14024 both change numbers.py and both make test_powers_Integer pass)
    same_files.sort(key=lambda r: r["mine"]["commit"] != commit)
    for row in same_files:
        if common := theirs & {normalize_test(t) for t in _f2p(row)}:
            return {"produced": True, "row": row["instance_id"], "common": sorted(common)}
    own = [r for r in rows if r["mine"]["commit"] == commit]  # why not: first what became of the fix's commit
    if own:
        row = own[0]
        ours_files = sorted(row["mine"].get("source_files", []))
        if ours_files != sources:
            why = f"kept, but another change: source files {', '.join(ours_files)} (theirs: {', '.join(sources)})"
            return {"produced": False, "reason": why, "row": row["instance_id"]}
        ours = sorted({normalize_test(t) for t in _f2p(row)})
        reason = f"kept but no FAIL_TO_PASS in common (ours: {', '.join(ours[:5])}; theirs: "
        return {
            "produced": False,
            "reason": reason + f"{', '.join(sorted(theirs)[:5])})",
            "row": row["instance_id"],
        }
    if (decision := decided.get(commit)) and not decision.get("kept"):
        reason = f"dropped at {decision['stage']}: {decision['reason']}"
        return {"produced": False, "reason": reason, "detail": decision.get("detail", "")[-500:]}
    parents = tuple(run_git(["rev-list", "--parents", "-n1", commit], history.path).split()[1:])
    if not parents:
        return {"produced": False, "reason": "dropped at history: root commit (no base)"}
    if why := drop_reason(*history.split(Commit(commit=commit, parents=parents, timestamp=0))[:2]):
        return {"produced": False, "reason": f"dropped at history: {why}"}
    return {
        "produced": False,
        "reason": "a candidate not decided (--max-candidates, or the run did not finish)",
    }


def _inner_candidate(ref: Reference, sources: list[str], line: list[Commit], history: History) -> str | None:
    """The commit of a branch's line that brought the instance's fix: its pull request's merge (by number in
    the subject), else the commit whose source files are the gold patch's."""
    for c in line:
        if re.search(rf"#{ref.number}\b", history.message(c.commit).partition("\n")[0]):
            return c.commit
    for c in line:
        if history.split(c)[0] == sources:
            return c.commit
    return None


def _period(
    args: argparse.Namespace,
) -> tuple[str, Path, list[Reference], set[str], dict[str, Located], dict[str, str]]:
    """The repository's name and mirror, its reference instances, the first-parent commits of ``--since`` /
    ``--until``, where each instance's fix landed (by id), and why the others were not located."""
    name, path = _repo_path(args.repo, args.repos_dir)
    refs = load_references(args.ref, name)
    in_range = {s.commit for s in first_parent(path, f"--since={args.since}", f"--until={args.until}")}
    located, why = locate(path, refs, first_parent(path))
    return name, path, refs, in_range, {loc.instance_id: loc for loc in located}, why


def score(args: argparse.Namespace) -> dict:
    """The report of one repository's mined task file against the reference instances of the period."""
    name, path, refs, in_range, where, why = _period(args)
    rows, decided = _rows(args.tasks)
    history = History(path)
    since, until = parse_stamp(args.since), parse_stamp(args.until)
    out = []
    for ref in refs:
        loc = where.get(ref.instance_id)
        if loc is None:
            if since <= parse_stamp(ref.created_at) <= until:
                out.append({"instance_id": ref.instance_id, "produced": False, "reason": "not a candidate: "})
                out[-1]["reason"] += why[ref.instance_id]
            continue
        if loc.commit in in_range:
            item = {"instance_id": ref.instance_id, "commit": loc.commit, "date": loc.date, "rule": loc.rule}
            out.append(item | verdict(ref, loc.commit, rows, decided, history))
    produced = sum(item["produced"] for item in out)
    return {
        "repo": name,
        "since": args.since,
        "until": args.until,
        "tasks": str(args.tasks),
        "first_parent_commits": len(in_range),
        "in_period": len(out),
        "produced": produced,
        "recall": round(produced / len(out), 4) if out else None,
        "instances": out,
    }


def cmd_paths(args: argparse.Namespace) -> int:
    """The gold source files of the instances whose fix's first-parent commit is in the period."""
    _, _, refs, in_range, where, _ = _period(args)
    ours = [ref for ref in refs if ref.instance_id in where and where[ref.instance_id].commit in in_range]
    for source in sorted({f for ref in ours for f in ref.files if is_source_file(f)}):
        print(source)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    report = score(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    for item in report["instances"]:
        what = f"produced as {item['row']}" if item["produced"] else f"missed: {item['reason']}"
        print(f"{item['instance_id']:32} {item.get('commit', '-')[:12]:12} {what}")
    recall = "-" if report["recall"] is None else f"{100 * report['recall']:.1f} %"
    print(f"recall {report['repo']}: {report['produced']}/{report['in_period']} = {recall}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("pick", "score", "paths"):
        cmd = sub.add_parser(name, help=f"{name} (see the module docstring)")
        cmd.add_argument(
            "--ref", type=Path, action="append", required=True, help="reference parquet (repeatable)"
        )
        cmd.add_argument(
            "--repos-dir", type=Path, default=Path("/work/gold-data/repos"), help="OWNER/NAME.git here"
        )
        if name != "paths":
            cmd.add_argument("--out", type=Path, required=True, help="JSON report to write")
    pick, score_, paths = sub.choices["pick"], sub.choices["score"], sub.choices["paths"]
    pick.add_argument(
        "--repo", action="append", required=True, help="OWNER/NAME or OWNER/NAME=MIRROR (repeatable)"
    )
    pick.add_argument(
        "--days", type=int, action="append", help="window length in days (repeatable; default 31)"
    )
    score_.add_argument("--repo", required=True, help="OWNER/NAME or OWNER/NAME=MIRROR")
    score_.add_argument("--since", required=True, help="the mined period's start, as given to tasks mine")
    score_.add_argument("--until", required=True, help="the mined period's end, as given to tasks mine")
    score_.add_argument(
        "--tasks", type=Path, required=True, help="the mined F.jsonl (F.mine-state.json beside it)"
    )
    paths.add_argument("--repo", required=True, help="OWNER/NAME or OWNER/NAME=MIRROR")
    paths.add_argument("--since", required=True, help="the period's start, as given to tasks mine")
    paths.add_argument("--until", required=True, help="the period's end, as given to tasks mine")
    args = parser.parse_args(argv)
    if args.command == "paths":
        return cmd_paths(args)
    if args.command == "pick":
        args.days = args.days or [31]
        return cmd_pick(args)
    try:
        return cmd_score(args)
    except InfraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
