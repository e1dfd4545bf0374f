"""What a mining run keeps on disk: the decisions so far (resumable), the exclusion set, the task file.

For ``--out DIR/NAME.jsonl`` the state is ``DIR/NAME.mine-state.json``: one decision per candidate
commit (kept with its record, or dropped with its stage and reason) and a fingerprint of the
repository and the options that decide; a rerun with the same fingerprint skips what is decided, a
run with another starts over. The task file is rewritten whole, atomically, from the decisions in
history order, so it is the same whatever was resumed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_json, atomic_write_text

Stage = Literal["history", "exclude", "env", "validate"]


class Decision(BaseModel):
    """What became of one candidate commit."""

    kept: bool
    stage: Stage | Literal["kept"] = "kept"
    reason: str = ""
    detail: str = Field(default="", description="More on the reason (an env build's error, ...).")
    record: dict[str, Any] | None = Field(default=None, description="The task record, when kept.")
    seconds: float = Field(default=0.0, description="Time to decide it (env build and validation).")


class MineState(BaseModel):
    """The decisions of a run, keyed by commit id."""

    fingerprint: str
    decided: dict[str, Decision] = Field(default_factory=dict)


def state_path(out: Path) -> Path:
    """The state file beside ``out``."""
    return out.with_name(f"{out.stem}.mine-state.json")


def fingerprint(*parts: object) -> str:
    """A digest of what decides the outcome of a candidate (the repository, options, exclusions)."""
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]


def load_state(path: Path, digest: str) -> tuple[MineState, str]:
    """The saved state when its fingerprint is ``digest``; else a new one. Also a note on which it was."""
    if not path.is_file():
        return MineState(fingerprint=digest), ""
    try:
        saved = MineState.model_validate_json(path.read_text())
    except (ValidationError, ValueError):
        return MineState(fingerprint=digest), f"{path} is not a mining state; starting over"
    if saved.fingerprint != digest:
        return MineState(
            fingerprint=digest
        ), f"{path} is of other options or another repository; starting over"
    return saved, f"resuming: {len(saved.decided)} candidates already decided ({path})"


def save_state(path: Path, state: MineState) -> None:
    """Write the state atomically (after every decision: a killed run loses at most the ones in flight)."""
    atomic_write_json(path, state.model_dump(mode="json"))


def normalized_patch(patch: str) -> str:
    """A patch without its ``index`` lines and trailing whitespace: equal changes compare equal."""
    return "\n".join(line.rstrip() for line in patch.strip().splitlines() if not line.startswith("index "))


class Exclusion(BaseModel):
    """Base commits and patches of the datasets named by ``--exclude``."""

    commits: frozenset[str] = frozenset()
    patches: frozenset[str] = frozenset()
    names: tuple[str, ...] = ()

    def why(self, base: str, patch: str) -> str:
        """Why a candidate is excluded ('' when it is not)."""
        if base in self.commits:
            return "base commit is a task's in the excluded dataset"
        if normalized_patch(patch) in self.patches:
            return "patch is a task's in the excluded dataset"
        return ""


def load_exclusion(sources: list[str]) -> Exclusion:
    """The base commits and patches of every row of ``sources`` (task files or datasets the loader reads)."""
    if not sources:
        return Exclusion()
    from swe_rl.tasks.loaders import load_tasks

    commits: set[str] = set()
    patches: set[str] = set()
    for source in sources:
        try:
            tasks = load_tasks(source)
        except FileNotFoundError:
            raise ConfigError(f"--exclude {source}: no such task file") from None
        commits |= {t.base_commit for t in tasks}
        patches |= {normalized_patch(t.patch) for t in tasks if t.patch.strip()}
    return Exclusion(commits=frozenset(commits), patches=frozenset(patches), names=tuple(sources))


def write_tasks(out: Path, records: list[dict[str, Any]]) -> None:
    """The task file, atomically, one JSON record a line."""
    atomic_write_text(out, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
