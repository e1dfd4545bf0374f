"""The named models an executor has built (``--llm``/``--model``/``--api-base``), each once, closed with it.

A model as the command line names it is built where its episodes run: a scripted model per task, a local
Hugging Face model loaded once, an OpenAI-compatible client shared by every episode. The book builds each
on first use and keeps it until the executor closes. A model the caller already holds (``swe-rl eval``'s in
this process, a test's scripted one, a trainer's own policy: a ``HeldModel``) is no entry of the book: it goes
beside each request it runs (``Executor.run(request, model=...)``).
"""

from __future__ import annotations

import asyncio

from swe_rl.episode.request import HeldModel, NamedModel
from swe_rl.errors import ConfigError
from swe_rl.llm.select import ModelChoice


class ModelBook:
    """Named models by their config; ``local_models``: whether ``hf:`` specs may load here (a rollout
    server refuses them: a client must not make it read a path of its choosing)."""

    def __init__(self, *, local_models: bool = True) -> None:
        self.local_models = local_models
        self._choices: dict[str, ModelChoice] = {}
        self._lock = asyncio.Lock()

    def check(self, named: NamedModel | HeldModel) -> None:
        """ConfigError for a model this book will not build."""
        if named.key in self._choices:
            return
        if isinstance(named, HeldModel):
            raise ConfigError(
                f"no model object was given for the held model {named.name!r}: a held model runs only in the "
                "process that holds it, given beside the request (Executor.run(request, model=...))"
            )
        if not self.local_models and (named.llm or "").startswith("hf:"):
            raise ConfigError(
                "this executor loads no local models (hf:); serve the model behind an OpenAI-compatible "
                "endpoint and name it with model and api_base"
            )

    async def get(self, named: NamedModel | HeldModel) -> ModelChoice:
        """The model ``named`` names, built on first use (in a thread: a local model loads for seconds)."""
        self.check(named)
        async with self._lock:
            choice = self._choices.get(named.key)
            if choice is None:
                from swe_rl.llm.select import choose_model

                assert isinstance(named, NamedModel)  # a held one failed the check
                choice = await asyncio.to_thread(choose_model, named.llm, named.model, named.api_base)
                self._choices[named.key] = choice
            return choice

    async def close(self) -> None:
        choices, self._choices = list(self._choices.values()), {}
        for choice in choices:
            await choice.close()
