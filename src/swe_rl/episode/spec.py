"""How an episode runs, beside its task, model and agent: one model, two named sets of defaults.

An :class:`EpisodeSpec` holds what decides an episode's run and its score apart from what it is about: the
agent's sandbox limits and context window, the prices of its model calls, how its patch is graded, and what an
episode that never submitted is paid. Its field defaults are training's (:meth:`EpisodeSpec.for_training`);
evaluation's differ where :data:`EVAL_DIFFERS` says, and only there (:meth:`EpisodeSpec.for_eval`). The
episode request is one (episode/request.py: it crosses the network as these fields and the rest), eval's
settings hold one (episode/attempt.py), and :func:`.run.run_episode` and :func:`swe_rl.rl.rollout.run_rollout`
read it as it is: nothing copies it field by field.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.harness.grade_patch import DEFAULT_TEST_TIMEOUT
from swe_rl.harness.verdict import GradingMode
from swe_rl.llm.cost import PriceTable
from swe_rl.sandbox.base import Limits

Unsubmitted = Literal["graded", "unresolved"]

# Where evaluation's defaults differ from training's, and why: an eval reports the SWE-bench harness's own
# verdict (steering flagged beside it); training pays strict grading's, which the code under test cannot
# talk into a pass (docs/SECURITY.md).
EVAL_DIFFERS: dict[str, Any] = {"grading": "official"}


class EpisodeSpec(BaseModel):
    """How one episode runs and is scored (see the module's docstring); training's defaults."""

    model_config = ConfigDict(extra="forbid")

    limits: Limits | None = Field(
        default=None, description="The agent's sandbox limits (None: the backend's)."
    )
    max_context: int | None = Field(
        default=None, ge=256, description="Context window; enables the context manager."
    )
    prices: PriceTable | None = Field(default=None, description="Price every model call (llm.cost).")
    grading: GradingMode = Field(
        default="strict",
        description="strict (training's default: a pass the code under test cannot produce) or official "
        "(eval's default: SWE-bench's verdict, steering flagged).",
    )
    grade_timeout: float = Field(default=DEFAULT_TEST_TIMEOUT, gt=0, description="Seconds for the test run.")
    dynamic_history: bool = Field(
        default=True, description="Training samples one per agent step (else one exact multi-turn span)."
    )
    unsubmitted: Unsubmitted = Field(
        default="graded",
        description="The reward of an episode that never submitted: graded (its working tree's diff at the "
        "limit, SWE-agent's convention) or unresolved (mini-swe-agent's: it submitted nothing). Its verdict is "
        "kept either way; this decides the reward only.",
    )

    @classmethod
    def for_training(cls, **fields: Any) -> Self:
        """Training's episode: the field defaults, ``fields`` over them."""
        return cls(**fields)

    @classmethod
    def for_eval(cls, **fields: Any) -> Self:
        """An eval attempt's episode: training's defaults but for :data:`EVAL_DIFFERS`, ``fields`` over them."""
        return cls(**(EVAL_DIFFERS | fields))

    def spec(self) -> EpisodeSpec:
        """Just the spec's fields (of a request, which is one: the rest left out)."""
        return EpisodeSpec(**{name: getattr(self, name) for name in EpisodeSpec.model_fields})
