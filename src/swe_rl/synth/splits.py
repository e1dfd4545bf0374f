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
    by_function: dict[str, list[str]] = {}
    for task in tasks:
        by_function.setdefault(function_of(task), []).append(task.instance_id)
    functions = sorted(by_function)
    random.Random(seed).shuffle(functions)
    # big functions first, so the small ones can even out the sizes; ties keep the seeded order
    functions.sort(key=lambda f: -len(by_function[f]))
    counts = dict.fromkeys(shares, 0)
    out: dict[str, str] = {}
    total = len(tasks)
    for func in functions:
        size = len(by_function[func])
        name = max(shares, key=lambda s: (shares[s] * total - counts[s], shares[s]))
        counts[name] += size
        for iid in by_function[func]:
            out[iid] = name
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
