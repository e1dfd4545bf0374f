"""What a synthesis run is asked for (:class:`SynthOptions`) and what it reports (:class:`SynthReport`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.synth.mutations import MUTATION_KINDS, Difficulty
from swe_rl.synth.runner import TIMEOUT_FACTOR, TIMEOUT_FLOOR
from swe_rl.synth.source import DEFAULT_TEST_CMD
from swe_rl.tasks.model import Task


class SynthOptions(BaseModel):
    """What to synthesize and how hard to try."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(default=50, ge=1, description="Tasks to produce (fewer when the repository runs out).")
    seed: int = Field(default=0, description="Shuffles the candidates; same seed, same tasks.")
    multi: float = Field(default=0.25, ge=0, le=1, description="Share of multi-location tasks.")
    difficulties: tuple[Difficulty, ...] = Field(default=("one-line", "multi-line", "multi-location"))
    kinds: tuple[str, ...] = Field(default=MUTATION_KINDS, description="Mutation kinds to use.")
    src: tuple[str, ...] = Field(default=(), description="Only mutate files under these path prefixes.")
    test_cmd: str = Field(default=DEFAULT_TEST_CMD, description="pytest command that prints -rA results.")
    python: str = Field(default="3", description="Python of the env ('3' = the one running swe-rl).")
    install: str = Field(default="", description="Install command run in the repo for its env.")
    env_seed: tuple[str, ...] = Field(default=("pytest",), description="Host packages copied into the env.")
    concurrency: int = Field(default=2, ge=1, description="Candidates tested at once.")
    timeout: float | None = Field(
        default=None, description="Seconds per candidate run (default: timeout_factor x baseline)."
    )
    timeout_factor: float = Field(
        default=TIMEOUT_FACTOR, gt=0, description="Candidate timeout as a multiple of the baseline's time."
    )
    timeout_floor: float = Field(
        default=TIMEOUT_FLOOR, gt=0, description="Least seconds per candidate run (start-up dominates)."
    )
    baseline_timeout: float = Field(default=900.0, description="Seconds for the unmutated suite.")
    allow_failing: bool = Field(default=False, description="Leave tests failing at baseline out.")


class KindStats(BaseModel):
    tried: int = 0
    valid: int = 0
    equivalent: int = 0
    broken: int = 0
    timeout: int = 0
    same_bytecode: int = Field(default=0, description="Equivalent (counted there too) and never run.")
    kept: int = 0
    seconds: float = 0.0

    @property
    def pass_rate(self) -> float:
        return self.valid / self.tried if self.tried else 0.0


class SynthReport(BaseModel):
    tasks: list[Task]
    asked: int
    seed: int
    candidates: int = Field(description="Single mutations found on covered lines.")
    per_kind: dict[str, KindStats]
    baselines: dict[str, dict[str, float]]
    seconds: float


__all__ = ["KindStats", "SynthOptions", "SynthReport"]
