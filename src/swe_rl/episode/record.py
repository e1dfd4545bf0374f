"""The record of one finished attempt: one line of an eval run's results.jsonl."""

from __future__ import annotations

from pydantic import BaseModel


class InstanceResult(BaseModel):
    """One line of results.jsonl."""

    instance_id: str
    attempt: int = 0
    resolved: bool = False
    exit_status: str
    patch_source: str = "none"  # submission | diff_fallback | none
    n_steps: int = 0
    tool_calls: int = 0
    format_errors: int = 0  # replies without exactly one command block
    error: str | None = None
    elapsed: float = 0.0
    model_time_s: float = 0.0
    env_time_s: float = 0.0
    eval_time_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    grade_status: str | None = None
    artifacts: str | None = None

    @property
    def infra_error(self) -> bool:
        return self.exit_status == "infra_error" or self.error is not None
