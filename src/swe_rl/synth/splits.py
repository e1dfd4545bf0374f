"""Splits by source function (no function in two splits) and counts over synthesized task records."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from swe_rl.errors import ConfigError
from swe_rl.tasks.model import Task


def parse_split(spec: str) -> dict[str, float]:
    """``train:0.8,test:0.2`` -> ``{"train": 0.8, "test": 0.2}`` (fractions normalised to sum 1)."""
    out: dict[str, float] = {}
    for part in spec.split(","):
        name, sep, value = part.strip().partition(":")
        if not sep or not name.strip() or not name.strip().replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"bad --split part {part!r}: expected NAME:FRACTION, e.g. train:0.8,test:0.2")
        try:
            share = float(value)
        except ValueError:
            raise ConfigError(f"bad --split fraction {value!r} in {part!r}") from None
        if share <= 0 or name.strip() in out:
            raise ConfigError(f"bad --split part {part!r}: fractions must be > 0 and names unique")
        out[name.strip()] = share
    if len(out) < 2:
        raise ConfigError("--split needs at least two parts, e.g. train:0.8,test:0.2")
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}


def function_of(task: Task) -> str:
    """The source function a synthesized task's bug sits in ('<source>:<file>::<function>')."""
    meta = synth_meta(task)
    return f"{task.repo}:{meta.get('function', task.instance_id)}"


def synth_meta(task: Task) -> dict[str, Any]:
    meta = (task.model_extra or {}).get("synth")
    return meta if isinstance(meta, dict) else {}


def assign_splits(tasks: Sequence[Task], shares: dict[str, float], *, seed: int = 0) -> dict[str, str]:
    """instance_id -> split name. Whole functions go to one split, in a seeded order, each to the
    split furthest below its share of tasks, so sizes follow the shares as closely as functions allow."""
    by_function = tasks_by_function(tasks)
    sizes = {func: len(ids) for func, ids in by_function.items()}
    placed = place_groups(sizes, shares, seed=seed)
    return {iid: placed[func] for func, ids in by_function.items() for iid in ids}


def tasks_by_function(tasks: Sequence[Task]) -> dict[str, list[str]]:
    """function_of -> the instance ids of its tasks, in the tasks' order."""
    by_function: dict[str, list[str]] = {}
    for task in tasks:
        by_function.setdefault(function_of(task), []).append(task.instance_id)
    return by_function


def place_groups(
    sizes: dict[str, int], shares: dict[str, float], *, seed: int, counts: dict[str, int] | None = None
) -> dict[str, str]:
    """group -> split name: groups in a seeded order, the biggest first (ties keep the seeded order),
    each to the split furthest below its share of the total size. ``counts`` are sizes already placed
    (they count towards the total and their split's share)."""
    groups = sorted(sizes)
    random.Random(seed).shuffle(groups)
    groups.sort(key=lambda g: -sizes[g])
    counts = {name: (counts or {}).get(name, 0) for name in shares}
    total = sum(sizes.values()) + sum(counts.values())
    out: dict[str, str] = {}
    for group in groups:
        name = max(shares, key=lambda s: (shares[s] * total - counts[s], shares[s]))
        counts[name] += sizes[group]
        out[group] = name
    return out


def stats(tasks: Sequence[Task]) -> dict[str, Any]:
    """Counts per mutation kind, file, function, difficulty and split (synth metadata where present)."""
    kinds: Counter[str] = Counter()
    files: Counter[str] = Counter()
    difficulty: Counter[str] = Counter()
    splits: Counter[str] = Counter()
    functions: set[str] = set()
    for task in tasks:
        meta = synth_meta(task)
        for kind in meta.get("kinds") or ["(not synthesized)"]:
            kinds[kind] += 1
        files[f"{task.repo}:{meta['file']}" if "file" in meta else task.repo] += 1
        difficulty[str(meta.get("difficulty", "(unknown)"))] += 1
        splits[str((task.model_extra or {}).get("split", "(none)"))] += 1
        functions.add(function_of(task))
    return {
        "tasks": len(tasks),
        "functions": len(functions),
        "fail_to_pass_mean": round(sum(len(t.FAIL_TO_PASS) for t in tasks) / len(tasks), 2) if tasks else 0,
        "per_kind": dict(kinds.most_common()),
        "per_difficulty": dict(difficulty.most_common()),
        "per_split": dict(splits.most_common()),
        "per_file": dict(files.most_common()),
    }
