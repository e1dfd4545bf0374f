"""What model calls cost: a price table and an LLM wrapper that prices every reply from its token usage.

Prices are USD per token with LiteLLM's field names (``input_cost_per_token``, ``output_cost_per_token``).
Where a model's price comes from, first match wins: the user's price file (``--price-file``, a JSON object
``{model: {...}}`` like LiteLLM's ``model_prices_and_context_window.json``), LiteLLM's model cost map when
``litellm`` is importable, then the project's small ``prices.json``. A model is looked up by its name, then
without a ``provider/`` prefix. Local and scripted models cost nothing unless a price file names them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import ConfigError
from swe_rl.llm.base import LLM, Completion, Message, SamplingParams

PROJECT_PRICES = Path(__file__).parent / "prices.json"
FREE_PREFIXES = ("scripted:", "hf:")


class ModelPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    input_cost_per_token: float = Field(ge=0.0)
    output_cost_per_token: float = Field(ge=0.0)
    source: str = "?"

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.input_cost_per_token + completion_tokens * self.output_cost_per_token


class PriceTable(BaseModel):
    """Prices by model name, in lookup order (user file, LiteLLM, project file)."""

    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list)

    def lookup(self, model: str) -> ModelPrice | None:
        for name in (model, model.split("/", 1)[-1], model.lower()):
            if name in self.prices:
                return self.prices[name]
        if model.startswith(FREE_PREFIXES):
            return ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0, source="local model")
        return None

    def only(self, *models: str | None) -> PriceTable:
        """The prices of ``models`` alone, under the names given (what a remote episode needs of the map)."""
        kept = {m: p for m in models if m and (p := self.lookup(m)) is not None}
        return PriceTable(prices=kept, sources=self.sources)

    def require(self, model: str) -> ModelPrice:
        price = self.lookup(model)
        if price is None:
            raise ConfigError(
                f"no price for model {model!r} (looked in: {', '.join(self.sources)}); give a --price-file "
                'with {"<model>": {"input_cost_per_token": ..., "output_cost_per_token": ...}}'
            )
        return price


def _entries(data: Any, source: str) -> dict[str, ModelPrice]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a price file is a JSON object of model name -> prices")
    out = {}
    for name, entry in data.items():
        if not isinstance(entry, Mapping) or "input_cost_per_token" not in entry:
            continue  # comments and LiteLLM's entries without per-token prices (images, audio, ...)
        try:
            out[str(name)] = ModelPrice.model_validate(
                {
                    **entry,
                    "output_cost_per_token": entry.get("output_cost_per_token") or 0.0,
                    "source": source,
                }
            )
        except ValueError as exc:
            raise ConfigError(f"{source}: bad price for {name!r}: {exc}") from None
    return out


def _litellm_prices() -> dict[str, ModelPrice] | None:
    try:
        import litellm
    except Exception:  # not installed, or broken: the project file is the fallback
        return None
    return _entries(getattr(litellm, "model_cost", {}) or {}, "litellm")


def load_prices(user_file: Path | None = None, *, use_litellm: bool = True) -> PriceTable:
    """The price table: ``user_file`` over LiteLLM's map (when importable) over the project file."""
    layers: list[tuple[str, dict[str, ModelPrice]]] = []
    if user_file is not None:
        try:
            data = json.loads(Path(user_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read price file {user_file}: {exc}") from None
        layers.append((str(user_file), _entries(data, str(user_file))))
    litellm = _litellm_prices() if use_litellm else None
    if litellm is not None:
        layers.append(("litellm", litellm))
    project = json.loads(PROJECT_PRICES.read_text(encoding="utf-8"))
    layers.append((str(PROJECT_PRICES.name), _entries(project, "swe-rl prices.json")))
    prices: dict[str, ModelPrice] = {}
    for _, layer in reversed(layers):
        prices.update(layer)
    return PriceTable(prices=prices, sources=[name for name, _ in layers])


class PricedLLM:
    """Wraps an LLM: every reply gets ``cost_usd`` from its token usage (None when usage is missing)."""

    def __init__(self, inner: LLM, price: ModelPrice) -> None:
        self.inner = inner
        self.name = inner.name
        self.price = price
        self.cost_usd = 0.0
        self.calls = 0

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        completion = await self.inner.complete(messages, params)
        self.calls += 1
        if completion.prompt_tokens is None or completion.completion_tokens is None:
            return completion
        cost = self.price.cost(completion.prompt_tokens, completion.completion_tokens)
        self.cost_usd += cost
        return completion.model_copy(update={"cost_usd": cost})

    async def close(self) -> None:
        await self.inner.close()
