"""Load tasks from JSON, JSONL, parquet, a Hugging Face dataset name, or the builtin suite.

A source string is one of::

    builtin                     the builtin suite (all libraries)
    builtin:textkit             one builtin library
    path/to/tasks.jsonl|.json|.parquet
    owner/dataset[:split]       a Hugging Face dataset (needs the `data` extra and network or a cache)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from swe_rl.errors import ConfigError, MissingExtraError, TaskFormatError
from swe_rl.tasks.model import Task, parse_task


def load_tasks(source: str | Path, *, instance_ids: Iterable[str] | None = None) -> list[Task]:
    """Load and validate every record of ``source``; optionally keep only ``instance_ids`` (in order)."""
    tasks = with_stand_ins(list(_iter_source(str(source))))
    _check_unique(tasks, str(source))
    if instance_ids is None:
        return tasks
    wanted = list(dict.fromkeys(instance_ids))
    by_id = {t.instance_id: t for t in tasks}
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise ConfigError(f"unknown instance id(s) in {source}: {', '.join(missing[:10])}")
    return [by_id[i] for i in wanted]


def _iter_source(source: str) -> Iterator[Task]:
    if source == "builtin" or source.startswith("builtin:"):
        from swe_rl.tasks.builtin import builtin_tasks

        yield from builtin_tasks(source.partition(":")[2] or None)
        return
    path = Path(source).expanduser()
    if path.exists():
        yield from _iter_file(path)
        return
    if path.suffix in {".json", ".jsonl", ".parquet"} or source.startswith((".", "/", "~")):
        raise ConfigError(f"task file not found: {source}")
    yield from _iter_hf(source)


def _iter_file(path: Path) -> Iterator[Task]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path.name}:{lineno}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TaskFormatError(f"invalid JSON: {exc.msg}", record=where) from None
                yield parse_task(_resolve_paths(_unwrap(record), path), where=where)
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TaskFormatError(f"invalid JSON: {exc.msg} (line {exc.lineno})", record=path.name) from None
        records = data if isinstance(data, list) else [data]
        for i, record in enumerate(records):
            yield parse_task(_resolve_paths(_unwrap(record), path), where=f"{path.name}[{i}]")
    elif suffix == ".parquet":
        for i, record in enumerate(_read_parquet(path)):
            yield parse_task(_resolve_paths(record, path), where=f"{path.name} row {i}")
    else:
        raise ConfigError(f"unsupported task file type {suffix!r} ({path}); use .json, .jsonl or .parquet")


def _unwrap(record: Any) -> Any:
    """Accept trainer JSONL rows (``{"text", "metadata": {"instance": {...}}}``) as well as plain rows."""
    if isinstance(record, dict) and "instance_id" not in record:
        instance = (
            (record.get("metadata") or {}).get("instance")
            if isinstance(record.get("metadata"), dict)
            else None
        )
        if isinstance(instance, dict):
            return instance
    return record


def _resolve_paths(record: Any, task_file: Path) -> Any:
    """A relative ``repo_source`` names a repository beside the task file: make it absolute."""
    if not isinstance(record, dict):
        return record
    source = record.get("repo_source")
    if not isinstance(source, str) or not source or "://" in source or source.startswith(("/", "~", "git@")):
        return record
    return {**record, "repo_source": str((task_file.resolve().parent / source).resolve())}


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("pyarrow", "data", "reading parquet task files") from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
        raise ConfigError(f"cannot read parquet file {path}: {exc}") from None


def _iter_hf(source: str) -> Iterator[Task]:
    name, _, split = source.partition(":")
    if name.count("/") != 1:
        raise ConfigError(
            f"task source {source!r} is neither a file, 'builtin[:library]', nor a dataset 'owner/name[:split]'"
        )
    try:
        import datasets
    except ImportError:
        raise MissingExtraError("datasets", "data", f"loading the Hugging Face dataset {name!r}") from None
    silent = _hub_silent()
    if silent:  # else the Hub's client retries for ~25 s, logging every try
        raise ConfigError(
            f"cannot load Hugging Face dataset {name!r}: the Hub does not answer ({silent}). Offline? With a "
            "copy in the Hugging Face cache, set HF_HUB_OFFLINE=1; else export it to JSONL/parquet on a "
            "connected machine and pass the file instead."
        )
    try:
        rows = datasets.load_dataset(name, split=split or "test")
    except Exception as exc:  # offline, unknown dataset or split: one clear message, no traceback
        raise ConfigError(
            f"cannot load Hugging Face dataset {name!r} (split {split or 'test'!r}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. "
            "Offline? Export it to JSONL/parquet on a connected machine and pass the file instead."
        ) from None
    for i, record in enumerate(rows):
        yield parse_task(dict(record), where=f"{name}[{i}]")


def _hub_silent() -> str | None:
    """Why the Hugging Face Hub does not answer one quick request (refused, no route, no name, timeout), or
    None when it answers; None too in offline mode, where datasets reads its cache and fails at once."""
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return None
    try:
        with urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=5):
            return None
    except urllib.error.HTTPError:
        return None  # it answered, if with an error status: the dataset's own request will say more
    except (OSError, ValueError) as exc:
        return f"{constants.ENDPOINT}: {getattr(exc, 'reason', exc)}"


def with_stand_ins(tasks: list[Task]) -> list[Task]:
    """``tasks`` with :attr:`Task.setup_stand_in` set where another row of the task's (repo, version, environment
    setup commit) is newer: the newest row's base commit (by created_at, then instance_id), the nearest commit
    to the setup commit the official harness builds the env at (the base commit of its version's newest
    instance). A row that carries one keeps it (a subset written from the whole set); a group's newest row
    gets none (it stands in for itself)."""
    newest: dict[tuple[str, str, str], Task] = {}
    for task in tasks:
        if not (task.environment_setup_commit and task.version):
            continue
        group = (task.repo, task.version, task.environment_setup_commit)
        if group not in newest or (task.created_at, task.instance_id) > (
            newest[group].created_at,
            newest[group].instance_id,
        ):
            newest[group] = task
    out = []
    for task in tasks:
        stand_in = newest.get((task.repo, task.version, task.environment_setup_commit))
        if task.setup_stand_in is None and stand_in is not None and stand_in.base_commit != task.base_commit:
            task = task.model_copy(update={"setup_stand_in": stand_in.base_commit})
        out.append(task)
    return out


def _check_unique(tasks: list[Task], source: str) -> None:
    seen: set[str] = set()
    for task in tasks:
        if task.instance_id in seen:
            raise TaskFormatError(
                "duplicate instance_id", record=f"{task.instance_id} in {source}", field="instance_id"
            )
        seen.add(task.instance_id)


def write_jsonl(tasks: Iterable[Task], path: Path) -> None:
    """Write tasks as SWE-bench JSONL, atomically."""
    from swe_rl.fileio import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(t.to_record()) + "\n" for t in tasks))
