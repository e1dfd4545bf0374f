"""False positives of the patch screen (``swe_rl.harness.screen``) on SWE-bench's gold patches (issue #58).

Every gold ``patch`` of each dataset file is screened two ways:

- **files**: each touched ``.py`` file's text at ``base_commit`` (``git show``, from a mirror of the
  repository) and after the patch (the gold hunks applied to it here, line for line), through
  ``screen_sources``, as ``screen_sandbox`` reads them in a grading sandbox;
- **hunks**: the patch's hunks alone (``screen_patch``), for rows whose repository has no mirror.

A row counts once, in files mode where every touched file could be read and patched, else in hunks mode.
Mirrors: ``--mirrors DIR`` holds ``DIR/<owner>+<name>/repo`` (git directories) or ``DIR/<owner>/<name>.git``.

    python bench/screen_gold.py verified.parquet lite.parquet dev.parquet --mirrors /work/.mirror \\
        --json bench/results/screen_gold.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from swe_rl.harness.screen import patch_images, screen_patch, screen_sources, screened
from swe_rl.tasks.loaders import load_tasks
from swe_rl.tasks.model import Task


def mirror_of(repo: str, roots: list[Path]) -> Path | None:
    owner, _, name = repo.partition("/")
    for root in roots:
        for candidate in (root / f"{owner}+{name}" / "repo", root / owner / f"{name}.git"):
            if candidate.is_dir():
                return candidate
    return None


def base_text(git_dir: Path, commit: str, path: str) -> str | None:
    """The file at ``commit``; None when it did not exist there. Raises when the commit is missing."""
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True)
    if proc.returncode != 0:
        probe = subprocess.run(
            ["git", "--git-dir", str(git_dir), "cat-file", "-e", commit], capture_output=True
        )
        if probe.returncode != 0:
            raise LookupError(f"{commit} not in {git_dir}")
        return None
    return proc.stdout.decode("utf-8", "surrogateescape")


def patched_files(
    patch: str, befores: dict[str, str | None], sources: dict[str, str | None]
) -> dict[str, str | None] | str:
    """The texts after ``git apply`` of the patch to the base texts (``sources``: every path the patch
    reads, renames' old paths too) for the paths of ``befores`` (None: deleted), or why not."""
    with tempfile.TemporaryDirectory(prefix="screen-gold-") as tmp:
        root = Path(tmp)
        for path, text in {**sources, **befores}.items():
            if text is not None:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(text.encode("utf-8", "surrogateescape"))
        (root / "gold.diff").write_text(patch)
        include = [f"--include={p}" for p in {**sources, **befores}]
        proc = subprocess.run(
            ["git", "apply", *include, "gold.diff"], cwd=root, capture_output=True, text=True
        )
        if proc.returncode != 0:
            return f"git apply: {proc.stderr.strip()[:200]}"
        after = {}
        for path in befores:
            file = root / path
            after[path] = file.read_bytes().decode("utf-8", "surrogateescape") if file.exists() else None
        return after


def files_mode(task: Task, git_dir: Path) -> dict[str, tuple[str | None, str | None]] | str:
    """path -> (before, after) for every screened file of the gold patch, or why not (a string)."""
    befores: dict[str, str | None] = {}
    sources: dict[str, str | None] = {}
    try:
        for line in task.patch.splitlines():
            if line.startswith("diff --git a/"):
                old, _, new = line[len("diff --git a/") :].partition(" b/")
                if screened(new, task.test_files):
                    befores[new] = base_text(git_dir, task.base_commit, new)
                    sources[old] = base_text(git_dir, task.base_commit, old)
    except LookupError as exc:
        return str(exc)
    after = patched_files(task.patch, befores, sources)
    if isinstance(after, str):
        return after
    return {path: (befores[path], after[path]) for path in befores}


def screen_row(task: Task, roots: list[Path]) -> dict:
    mirror = mirror_of(task.repo, roots)
    why = "no mirror of the repository"
    if mirror is not None:
        sources = files_mode(task, mirror)
        if not isinstance(sources, str):
            flags = screen_sources(sources, task.test_files)
            # the control: the same files judged as if each were new (no differential)
            whole = screen_sources({p: (None, after) for p, (_, after) in sources.items()}, task.test_files)
            return {
                "mode": "files",
                "flags": [f.model_dump() for f in flags],
                "without_differential": sorted({f.rule for f in whole}),
            }
        why = sources
    flags = screen_patch(task.patch, task.test_files)
    return {"mode": "hunks", "why_hunks": why, "flags": [f.model_dump() for f in flags]}


def line_text(task: Task, path: str, line: int) -> str:
    """The flagged line as the patch adds it, when it does."""
    for text, at in patch_images(task.patch).get(path, ([], []))[1]:
        lines = text.splitlines()
        if at < line <= at + len(lines):
            return lines[line - at - 1].strip()[:160]
    return ""


def screen_dataset(source: str, mirrors: list[Path], also_hunks: bool) -> dict:
    """One dataset file's summary: rows by mode, the flagged rows with their lines, and the controls."""
    tasks = load_tasks(source)
    modes: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    whole_rules: Counter[str] = Counter()
    flagged: list[dict] = []
    hunk_flagged: list[dict] = []
    whole_rows = 0
    for task in tasks:
        row = screen_row(task, mirrors)
        modes[row["mode"]] += 1
        for f in row["flags"]:
            f["text"] = line_text(task, f["path"], f["line"])
            rules[f["rule"]] += 1
        whole = row.pop("without_differential", [])
        whole_rows += bool(whole)
        whole_rules.update(whole)
        if row["flags"]:
            flagged.append({"instance_id": task.instance_id, **row})
        if also_hunks and (h := screen_patch(task.patch, task.test_files)):
            hunk_flagged.append({"instance_id": task.instance_id, "flags": [f.model_dump() for f in h]})
    entry = {
        "source": Path(source).name,
        "rows": len(tasks),
        "rows_by_mode": dict(modes),
        "rows_flagged": len(flagged),
        "flags_by_rule": dict(rules),
        "flagged": flagged,
        "files_mode_rows_flagged_without_differential": whole_rows,
        "files_mode_rows_by_rule_without_differential": dict(sorted(whole_rules.items())),
    }
    if also_hunks:
        entry["hunks_mode_rows_flagged"] = len(hunk_flagged)
        entry["hunks_mode_flagged"] = hunk_flagged
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="+", help="SWE-bench .parquet/.jsonl files")
    parser.add_argument("--mirrors", type=Path, action="append", default=[], help="mirror roots (repeatable)")
    parser.add_argument("--also-hunks", action="store_true", help="screen every row from its hunks too")
    parser.add_argument("--json", type=Path, help="write the summary and every flagged row here")
    args = parser.parse_args(argv)
    start = time.monotonic()
    report: dict = {"datasets": []}
    for source in args.tasks:
        entry = screen_dataset(source, args.mirrors, args.also_hunks)
        report["datasets"].append(entry)
        print(
            f"{source}: {entry['rows']} rows {entry['rows_by_mode']}, {entry['rows_flagged']} flagged "
            f"{entry['flags_by_rule']}; without the differential "
            f"{entry['files_mode_rows_flagged_without_differential']}",
            file=sys.stderr,
        )
        for row in entry["flagged"]:
            for f in row["flags"]:
                print(
                    f"  {row['instance_id']} [{row['mode']}] {f['path']}:{f['line']} {f['rule']}: {f['reason']}"
                )
                print(f"      {f['text']}")
    report["seconds"] = round(time.monotonic() - start, 1)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
