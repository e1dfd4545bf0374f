"""An eval attempt's settings, and its model priced.

An attempt is an episode request with ``train`` off (episode/request.py), run by any executor; the eval run
that asked for it writes its artifacts into the folder ``RunDir.attempt_dir`` names (rundir.py,
runs/evaluation.py).
"""

from __future__ import annotations

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


def priced(llm: LLM, prices: PriceTable | None) -> LLM:
    """The model, pricing its calls where the table knows its price."""
    price = prices.lookup(llm.name) if prices is not None else None
    return PricedLLM(llm, price) if price is not None else llm
