"""The named models an executor has built (``--llm``/``--model``/``--api-base``), each once, closed with it.

A model as the command line names it is built where its episodes run: a scripted model per task, a local
Hugging Face model loaded once, an OpenAI-compatible client shared by every episode. The book builds each
on first use and keeps it until the executor closes; a caller that already built one (``swe-rl eval`` in
this process, or a test's own scripted model) hands it over with :meth:`ModelBook.adopt`, and a held model
(a trainer's own policy: ``HeldModel``) exists only that way.
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

    def adopt(self, named: NamedModel | HeldModel, choice: ModelChoice) -> None:
        """Use ``choice`` for ``named``; the book closes it."""
        self._choices[named.key] = choice

    def check(self, named: NamedModel | HeldModel) -> None:
        """ConfigError for a model this book will not build."""
        if named.key in self._choices:
            return
        if isinstance(named, HeldModel):
            raise ConfigError(
                f"no model was handed to this executor as {named.name!r}: a held model runs only in the "
                "process that holds it (Executor.adopt)"
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

                assert isinstance(named, NamedModel)  # a held one not adopted failed the check
                choice = await asyncio.to_thread(choose_model, named.llm, named.model, named.api_base)
                self._choices[named.key] = choice
            return choice

    async def close(self) -> None:
        choices, self._choices = list(self._choices.values()), {}
        for choice in choices:
            await choice.close()
