"""An eval attempt's settings, and its model priced.

An attempt is an episode request with ``train`` off (episode/request.py), run by any executor; the eval run
that asked for it writes its artifacts into the folder ``RunDir.attempt_dir`` names (rundir.py,
runs/evaluation.py).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from swe_rl.episode.spec import EpisodeSpec
from swe_rl.llm.base import LLM
from swe_rl.llm.cost import PricedLLM, PriceTable


class AttemptSettings(BaseModel):
    """How one eval attempt runs: where its artifacts go, and its episode (eval's defaults, episode/spec.py)."""

    output_dir: Path
    episode: EpisodeSpec = Field(
        default_factory=EpisodeSpec.for_eval,
        description="Its sandbox limits, context window, prices and grading (EpisodeSpec.for_eval).",
    )


def priced(llm: LLM, prices: PriceTable | None) -> LLM:
    """The model, pricing its calls where the table knows its price."""
    price = prices.lookup(llm.name) if prices is not None else None
    return PricedLLM(llm, price) if price is not None else llm
