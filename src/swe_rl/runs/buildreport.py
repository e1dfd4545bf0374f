"""What ``env build`` writes: one entry per instance, and a summary per repository with the class of each cause.

The cause of an instance that is not usable is read from its status and reason by :data:`CAUSE_RULES`, a table
(first match wins) so that a new kind of failure is one row, and the table is tested row by row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from swe_rl.envs.store.disk_usage import DiskUsage
from swe_rl.errors import ConfigError

BuildStatus = Literal["built", "failed", "valid", "invalid", "error", "unfetchable"]
STATUSES: tuple[BuildStatus, ...] = ("built", "valid", "invalid", "failed", "error", "unfetchable")


class BuildEntry(BaseModel):
    """One instance's outcome."""

    instance_id: str
    repo: str | None = Field(default=None, description="owner/name of the task's repository.")
    status: BuildStatus = Field(
        description="built; failed (env build); valid / invalid (gold and empty graded); error (grading infra); "
        "unfetchable (no mirror of its repository: retried on resume, once the mirror may be there)."
    )
    env: str | None = Field(default=None, description="Key of the built env.")
    python: str | None = Field(default=None, description="Interpreter the env's venv is based on.")
    seconds: float = 0.0
    reason: str | None = Field(default=None, description="Why it failed or is invalid.")
    notes: list[str] = Field(default_factory=list, description="What validation found odd, valid or not.")
    gold: str | None = Field(default=None, description="Gold patch verdict summary.")
    empty: str | None = Field(default=None, description="Empty patch (unchanged base) verdict summary.")

    @property
    def done(self) -> bool:
        return self.status in ("built", "valid", "invalid")


def failure_reason(exc: BaseException) -> str:
    """An entry's reason for ``exc``: its type, its first line and its last four (an install log's tail says
    what broke)."""
    lines = str(exc).strip().splitlines()
    kept = lines if len(lines) <= 6 else [lines[0], "...", *lines[-4:]]
    return f"{type(exc).__name__}: " + "\n".join(kept)


class CauseRule(NamedTuple):
    """An entry of one of ``statuses`` whose reason matches ``pattern`` (re.search) has this ``cause``."""

    cause: str
    statuses: frozenset[str]
    pattern: str


def _rule(cause: str, statuses: str, pattern: str) -> CauseRule:
    return CauseRule(cause, frozenset(statuses.split()), pattern)


CAUSE_RULES: tuple[CauseRule, ...] = (
    _rule("repository not fetchable", "unfetchable", ""),
    _rule("python not installed", "failed", r"Python \S+ is needed but not installed"),
    _rule("system library missing", "failed", r"needs .+ on this host|compiles against .+: install"),
    _rule("checkout failed", "failed", r"cannot check out "),
    _rule("build failed", "failed", r"^EnvBuildError: "),
    _rule("timeout", "invalid error", r"test_timeout|timed out|TimeoutError"),
    _rule("unparseable log", "invalid", r"gold patch not resolved: unparseable_log"),
    _rule("needs the network", "invalid", r"gold patch not resolved .*needs the network"),
    _rule("conda-only package", "invalid", r"gold patch not resolved .*needs a conda-only package"),
    _rule("gold does not resolve", "invalid", r"gold patch not resolved"),
    _rule("empty resolves", "invalid", r"unchanged base commit already resolves"),
    _rule("grading infrastructure", "error", ""),
)
"""First match wins; a failed, invalid or error entry that none matches is 'other'."""


def cause_of(entry: BuildEntry, rules: Iterable[CauseRule] = CAUSE_RULES) -> str | None:
    """The class of why ``entry`` is not usable; None for a built or valid one."""
    if entry.status in ("built", "valid"):
        return None
    for rule in rules:
        if entry.status in rule.statuses and re.search(rule.pattern, entry.reason or ""):
            return rule.cause
    return "other"


class RepoSummary(BaseModel):
    """One repository's instances by status, and why those not usable are not."""

    total: int = 0
    built: int = Field(default=0, description="Built, not validated.")
    valid: int = 0
    invalid: int = 0
    failed: int = Field(default=0, description="The env could not be built.")
    error: int = Field(default=0, description="Grading infrastructure failed.")
    unfetchable: int = Field(default=0, description="No mirror of the repository.")
    seconds: float = Field(default=0.0, description="Time of its instances, added up.")
    causes: dict[str, int] = Field(
        default_factory=dict, description="Cause class -> instances (CAUSE_RULES)."
    )

    def add(self, entry: BuildEntry) -> None:
        self.total += 1
        setattr(self, entry.status, getattr(self, entry.status) + 1)
        self.seconds = round(self.seconds + entry.seconds, 2)
        cause = cause_of(entry)
        if cause is not None:
            self.causes[cause] = self.causes.get(cause, 0) + 1


class BuildSummary(BaseModel):
    """Per repository (sorted by name), the whole, and the disk the env cache takes."""

    repos: dict[str, RepoSummary] = Field(default_factory=dict)
    overall: RepoSummary = Field(default_factory=RepoSummary, description="Every repository together.")
    disk: DiskUsage | None = Field(
        default=None, description="The env cache's testbeds, venvs, rootfs and records, measured at the end."
    )

    @classmethod
    def of(cls, entries: Iterable[BuildEntry], disk: DiskUsage | None = None) -> BuildSummary:
        repos: dict[str, RepoSummary] = {}
        whole = RepoSummary()
        for entry in entries:
            repos.setdefault(entry.repo or "?", RepoSummary()).add(entry)
            whole.add(entry)
        return cls(repos=dict(sorted(repos.items())), overall=whole, disk=disk)


class BuildReport(BaseModel):
    """The whole dataset's build; what ``data prepare --valid-only`` reads."""

    validated: bool = Field(description="Whether gold/empty validation ran; then only 'valid' is usable.")
    backend: str | None = None
    entries: dict[str, BuildEntry] = Field(default_factory=dict)
    summary: BuildSummary | None = Field(
        default=None, description="Per repository; rewritten with the entries, disk use added at the end."
    )

    def counts(self) -> dict[str, int]:
        out = {"total": len(self.entries)}
        for entry in self.entries.values():
            out[entry.status] = out.get(entry.status, 0) + 1
        return out

    def usable(self) -> list[str]:
        """Instances fit for training: valid when validated, else built."""
        want = "valid" if self.validated else "built"
        return [iid for iid, e in self.entries.items() if e.status == want]

    @classmethod
    def load(cls, path: Path) -> BuildReport:
        if not path.is_file():
            raise ConfigError(f"build report not found: {path}")
        try:
            return cls.model_validate_json(path.read_text())
        except ValueError as exc:
            raise ConfigError(f"{path} is not an `env build` report: {str(exc).splitlines()[0]}") from None
