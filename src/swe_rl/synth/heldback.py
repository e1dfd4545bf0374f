"""One held-back split for every stage of an experiment: by repository, by function and by bug string (#42).

Two ``tasks synth --split`` runs split each file on its own, so a function held back in one can train in
the other, and the same misspelling (``name_typo: `data` -> `daa```) can sit on both sides.
:func:`split_heldback` takes every task of an experiment at once and decides, in this order:

1. **Repositories** named in ``heldback_repos``: all their tasks are held back.
2. **Functions**: whole functions (every task whose bug sits in one, of any kind) go to the held-back
   side or to training, in a seeded order, the biggest first, each to the side furthest below its
   share (as ``--split`` does). With ``count_kinds`` the share is measured on tasks of those kinds (the
   kind the experiment evaluates) and the functions without such tasks are placed after, by all tasks.
3. **Kinds** (``heldback_kinds``, optional): only held-back tasks of these kinds are kept; the others of
   held-back functions are dropped.
4. **Bug strings**: a training task that carries a held-back task's bug string (a mutation's kind and
   description, without its location, e.g. ``name_typo: `data` -> `daa```) or touches a held-back
   function is dropped, not moved: the held-back set is fixed before training is pruned.

The keys are those ``bench/heldback_disjoint.py`` checks from the written files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import ConfigError
from swe_rl.synth.splits import function_of, place_groups, synth_meta
from swe_rl.tasks.model import Task

HELDBACK, TRAIN, DROPPED = "heldback", "train", "dropped"


class HeldbackSplit(BaseModel):
    """The three sides of a split, each in the input order, and the keys of the held-back side."""

    model_config = ConfigDict(frozen=True)

    heldback: list[Task]
    train: list[Task]
    dropped: list[Task] = Field(
        description="Not held back, but repeating a held-back function or bug string."
    )
    functions: list[str] = Field(description="Held-back functions ('<source>:<path>:<function>').")
    bug_strings: list[str] = Field(description="Held-back bug strings ('<kind>: <description>').")
    repos: list[str] = Field(description="Repositories held back whole (short names).")

    def side_of(self) -> dict[str, str]:
        """instance_id -> heldback, train or dropped."""
        sides = {HELDBACK: self.heldback, TRAIN: self.train, DROPPED: self.dropped}
        return {t.instance_id: name for name, tasks in sides.items() for t in tasks}

    def summary(self) -> dict[str, object]:
        """Counts per side and kind, and the held-back keys (JSON-ready)."""
        sides = {HELDBACK: self.heldback, TRAIN: self.train, DROPPED: self.dropped}
        return {
            "tasks": {name: len(tasks) for name, tasks in sides.items()},
            "per_kind": {name: dict(sorted(kind_counts(tasks).items())) for name, tasks in sides.items()},
            "heldback_repos": self.repos,
            "heldback_functions": self.functions,
            "heldback_bug_strings": self.bug_strings,
        }


def repo_name(task: Task) -> str:
    """A task's repository by its short name ('swe-rl-synth/statkit' -> 'statkit')."""
    return task.repo.rsplit("/", 1)[-1]


def functions_of(task: Task) -> set[str]:
    """Every function a task's mutations sit in, as '<source>:<path>:<function>'."""
    meta = synth_meta(task)
    source = meta.get("source") or task.repo
    return {f"{source}:{m.get('path')}:{m.get('function')}" for m in meta.get("mutations") or []}


def bug_strings(task: Task) -> set[str]:
    """A task's bug strings: each mutation's '<kind>: <description>' (no file, function or line)."""
    return {f"{m.get('kind')}: {m.get('description')}" for m in synth_meta(task).get("mutations") or []}


def kind_counts(tasks: Iterable[Task]) -> Counter[str]:
    """Tasks per mutation kind ('+'-joined for a task of several kinds)."""
    return Counter("+".join(synth_meta(t).get("kinds") or ["?"]) for t in tasks)


def split_heldback(
    tasks: Sequence[Task],
    *,
    share: float,
    seed: int = 0,
    heldback_repos: Sequence[str] = (),
    count_kinds: Sequence[str] = (),
    heldback_kinds: Sequence[str] = (),
) -> HeldbackSplit:
    """Hold back ``share`` of the tasks (by function, plus whole ``heldback_repos``); see the module.

    With ``heldback_kinds`` only tasks of those kinds are kept held back (the ones an experiment
    evaluates); the other tasks of held-back functions are dropped, neither held back nor trained on,
    and only the kept tasks' bug strings are kept out of training. ``count_kinds`` defaults to them.

    Raises :class:`ConfigError` for a task without synthesis metadata, an unknown repository or kind,
    a share outside [0, 1), and a split that leaves either side empty."""
    if not 0 <= share < 1:
        raise ConfigError(f"the held-back share must be in [0, 1), got {share}")
    count_kinds = count_kinds or heldback_kinds
    _check_inputs(tasks, heldback_repos, [*count_kinds, *heldback_kinds])
    held_repos = sorted({repo_name(t) for t in tasks if _in_repos(t, heldback_repos)})
    by_function: dict[str, list[Task]] = {}
    for task in tasks:
        by_function.setdefault(function_of(task), []).append(task)
    held = _held_functions(by_function, share, seed, set(held_repos), set(count_kinds), bool(heldback_kinds))
    in_held = [t for t in tasks if function_of(t) in held]
    heldback = [t for t in in_held if not heldback_kinds or _kinds(t) & set(heldback_kinds)]
    if not heldback:
        raise ConfigError(
            f"nothing is held back ({len(tasks)} tasks, share {share}, repositories "
            f"{', '.join(heldback_repos) or 'none'}): raise the share or name a repository"
        )
    held_keys = set().union(*(functions_of(t) for t in in_held))
    held_strings = set().union(*(bug_strings(t) for t in heldback))
    kept = {t.instance_id for t in heldback}
    rest = [t for t in tasks if t.instance_id not in kept]
    train = [t for t in rest if not (functions_of(t) & held_keys or bug_strings(t) & held_strings)]
    trained = {t.instance_id for t in train}
    if not train:
        raise ConfigError(
            f"the split leaves no training tasks: {len(heldback)} of {len(tasks)} held back and the other "
            f"{len(rest)} repeat a held-back function or bug string; lower the share or synthesize more"
        )
    return HeldbackSplit(
        heldback=heldback,
        train=train,
        dropped=[t for t in rest if t.instance_id not in trained],
        functions=sorted(held_keys),
        bug_strings=sorted(held_strings),
        repos=held_repos,
    )


def _check_inputs(tasks: Sequence[Task], repos: Sequence[str], kinds: Sequence[str]) -> None:
    no_meta = [t.instance_id for t in tasks if not synth_meta(t).get("mutations")]
    if no_meta:
        raise ConfigError(
            f"{len(no_meta)} task(s) without synthesis metadata (e.g. {no_meta[0]}): only tasks from "
            "`swe-rl tasks synth` can be split by function and bug string"
        )
    known = sorted({repo_name(t) for t in tasks})
    unknown = [r for r in repos if not any(_in_repos(t, [r]) for t in tasks)]
    if unknown:
        raise ConfigError(
            f"unknown repository {', '.join(unknown)} to hold back; the tasks have {', '.join(known)}"
        )
    have = {k for t in tasks for k in synth_meta(t).get("kinds") or []}
    missing = sorted(set(kinds) - have)
    if missing:
        raise ConfigError(
            f"no task of kind {', '.join(missing)} to count the share on; the tasks have {sorted(have)}"
        )


def _kinds(task: Task) -> set[str]:
    return set(synth_meta(task).get("kinds") or [])


def _in_repos(task: Task, names: Sequence[str]) -> bool:
    """Is the task from one of these repositories (short name, 'owner/name' or synth source)?"""
    return bool({repo_name(task), task.repo, str(synth_meta(task).get("source"))} & set(names))


def _held_functions(
    by_function: dict[str, list[Task]],
    share: float,
    seed: int,
    repos: set[str],
    kinds: set[str],
    only_counted: bool,
) -> set[str]:
    """The functions held back: those of ``repos``, then whole functions by the seeded greedy placement
    (with ``only_counted``, only functions with tasks of ``kinds``)."""
    shares = {HELDBACK: share, TRAIN: 1 - share}

    def counted(tasks: list[Task]) -> int:
        return sum(not kinds or bool(_kinds(t) & kinds) for t in tasks)

    held = {f for f, ts in by_function.items() if repo_name(ts[0]) in repos}
    free = {f: ts for f, ts in by_function.items() if f not in held}
    # first the functions with counted tasks, by those; then the others, by all their tasks
    first = {f: counted(ts) for f, ts in free.items() if counted(ts)}
    placed = place_groups(
        first, shares, seed=seed, counts={HELDBACK: sum(counted(by_function[f]) for f in held)}
    )
    held |= {f for f, side in placed.items() if side == HELDBACK}
    if only_counted:  # a function without a task to keep held back would only be lost to training
        return held
    later = {f: len(ts) for f, ts in free.items() if f not in first}
    so_far = {
        HELDBACK: sum(len(by_function[f]) for f in held),
        TRAIN: sum(len(free[f]) for f, side in placed.items() if side == TRAIN),
    }
    placed_later = place_groups(later, shares, seed=seed, counts=so_far)
    return held | {f for f, side in placed_later.items() if side == HELDBACK}
