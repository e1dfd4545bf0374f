"""Choosing a model from the command line: ``--llm`` specs and ``--model/--api-base``."""

from __future__ import annotations

from collections.abc import Callable

from swe_rl.errors import ConfigError
from swe_rl.llm.base import LLM
from swe_rl.tasks.model import Task

LLM_SPECS = "scripted:oracle | scripted:oracle-compact | scripted:oracle-debug | scripted:never-submit | scripted:format-errors | hf:<model dir or 'smollm2'> | openai"


class ModelChoice:
    """A factory of per-task LLMs plus the shared client to close at the end."""

    def __init__(self, factory: Callable[[Task], LLM], shared: LLM | None, name: str) -> None:
        self.factory = factory
        self.shared = shared
        self.name = name

    async def close(self) -> None:
        if self.shared is not None:
            await self.shared.close()


def choose_model(
    llm: str | None, model: str | None, api_base: str | None, api_key: str | None = None
) -> ModelChoice:
    if llm and llm.startswith("scripted:"):
        from swe_rl.llm.oracle import scripted_for

        kind = llm.partition(":")[2]
        scripted_for(kind, Task(instance_id="x", repo="x/x", base_commit="0000"))  # validates the kind now
        return ModelChoice(lambda task: scripted_for(kind, task), None, llm)
    if llm and llm.startswith("hf:"):
        from swe_rl.llm.hf import HFLocalLLM

        local = HFLocalLLM(llm.partition(":")[2])
        local.load()
        return ModelChoice(lambda _task: local, local, local.name)
    if llm in (None, "openai"):
        if not model or not api_base:
            raise ConfigError(
                f"give --model and --api-base for an OpenAI-compatible endpoint, or --llm {LLM_SPECS}"
            )
        from swe_rl.llm.openai import OpenAIClient

        openai = OpenAIClient(model, api_base, api_key=api_key)
        return ModelChoice(lambda _task: openai, openai, model)
    raise ConfigError(f"unknown --llm {llm!r}; use {LLM_SPECS}")
