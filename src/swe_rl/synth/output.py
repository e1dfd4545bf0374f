"""Writing a synthesis run: the task file, its split files and the bare repository beside them.

Layout for ``--out DIR/NAME.jsonl``::

    DIR/NAME.jsonl            every task (with a "split" field when --split is given)
    DIR/NAME.<split>.jsonl    one file per split (only with --split)
    DIR/NAME.git/             bare repository with every task's base commit (refs/swe-rl/<id>)

Records name the repository by a relative ``repo_source`` ("NAME.git"), which the task loader reads
against the file's folder: copy the folder anywhere and ``env validate`` / ``eval`` still work.
Everything is built in a hidden staging folder and moved into place at the end; a failed run leaves
the previous output untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from swe_rl.fileio import atomic_write_text
from swe_rl.synth.splits import assign_splits
from swe_rl.tasks.model import Task


def repo_path_for(out: Path) -> Path:
    return out.with_name(f"{out.stem}.git")


def split_path_for(out: Path, split: str) -> Path:
    return out.with_name(f"{out.stem}.{split}{out.suffix or '.jsonl'}")


def staging_dir(out: Path) -> Path:
    return out.with_name(f".{out.name}.synth-{os.getpid()}")


def remove_stale_staging(out: Path) -> None:
    """Staging folders of runs that were killed (their process is gone)."""
    for folder in out.parent.glob(f".{out.name}.synth-*"):
        pid = folder.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def publish(
    tasks: list[Task], out: Path, staged_repo: Path, *, shares: dict[str, float] | None, seed: int
) -> list[Task]:
    """Move the staged repository next to ``out`` and write the task files; returns the tasks as written
    (``repo_source`` absolute, as the loader would read them back)."""
    final_repo = repo_path_for(out)
    splits = assign_splits(tasks, shares, seed=seed) if shares else {}
    records = []
    for task in tasks:
        record = task.to_record()
        record["repo_source"] = final_repo.name
        if splits:
            record["split"] = splits[task.instance_id]
        records.append(record)
    texts = {out: _jsonl(records)}
    for name in shares or {}:
        texts[split_path_for(out, name)] = _jsonl([r for r in records if r.get("split") == name])
    _replace_dir(staged_repo, final_repo)
    for path, text in texts.items():
        atomic_write_text(path, text)
    return [Task.model_validate({**r, "repo_source": str(final_repo.resolve())}) for r in records]


def publish_split(sides: dict[str, list[Task]], out: Path) -> dict[str, Path]:
    """Write each side of a split to ``NAME.<side>.jsonl`` and every task, with its side in a "split"
    field, to ``out`` (last, so its presence means the whole split was written). A ``repo_source`` that
    is a local path is written relative to ``out``'s folder, as ``tasks synth`` writes it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = {name: split_path_for(out, name) for name in sides}
    every = []
    for name, tasks in sides.items():
        records = [{**_relative_source(t.to_record(), out.parent), "split": name} for t in tasks]
        atomic_write_text(paths[name], _jsonl(records))
        every += records
    atomic_write_text(out, _jsonl(every))
    return paths


def _relative_source(record: dict[str, object], folder: Path) -> dict[str, object]:
    source = record.get("repo_source")
    if isinstance(source, str) and source.startswith("/"):
        record["repo_source"] = os.path.relpath(source, folder.resolve())
    return record


def _jsonl(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _replace_dir(new: Path, dest: Path) -> None:
    trash = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.rename(dest, trash)
    os.rename(new, dest)
    shutil.rmtree(trash, ignore_errors=True)
