"""An eval attempt's settings and the folder of its artifacts.

An attempt is an episode request with ``train`` off (episode/request.py), run by any executor; the eval run
that asked for it writes its artifacts where :func:`attempt_folder` says (runs/evaluation.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from swe_rl.harness.verdict import GradingMode
from swe_rl.llm.base import LLM
from swe_rl.llm.cost import PricedLLM, PriceTable
from swe_rl.sandbox.base import Limits


class AttemptSettings(BaseModel):
    """How one eval attempt runs: where its artifacts go, its context window, its sandbox and its grading."""

    output_dir: Path
    max_context: int | None = Field(default=None, description="Context window; enables the context manager.")
    grade_timeout: float = 1800.0
    grading: GradingMode = Field(
        default="official", description="official (SWE-bench's verdict, steering flagged) or strict."
    )
    limits: Limits = Field(default_factory=Limits)
    prices: PriceTable | None = Field(default=None, description="Price every model call (llm.cost).")


def attempt_folder(output_dir: Path, instance_id: str, attempt: int) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return (
        output_dir / f"{instance_id}__{stamp}"
        if attempt == 0
        else output_dir / f"{instance_id}__a{attempt}__{stamp}"
    )


def priced(llm: LLM, prices: PriceTable | None) -> LLM:
    """The model, pricing its calls where the table knows its price."""
    price = prices.lookup(llm.name) if prices is not None else None
    return PricedLLM(llm, price) if price is not None else llm
