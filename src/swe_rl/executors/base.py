"""What every executor serves: ``run(EpisodeRequest) -> RolloutResult``, for eval and training alike.

The request (episode/request.py) is plain data, sent across the network as it is; the result
(episode/result.py) carries the episode's record, trajectory and patch, and for training its samples and
reward. A model that is an object of the caller's process (a trainer's own policy, a test's scripted model)
is handed over with ``adopt`` and named in requests by its ``HeldModel`` or ``NamedModel``; an executor
whose episodes run elsewhere refuses it.
"""

from __future__ import annotations

from typing import Any, Protocol

from swe_rl.episode.request import EpisodeRequest, HeldModel, NamedModel, Policy, ProcessReward
from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError
from swe_rl.llm.base import LLM
from swe_rl.llm.select import ModelChoice

__all__ = [
    "EpisodeRequest",
    "Executor",
    "HeldModel",
    "NamedModel",
    "Policy",
    "ProcessReward",
    "policy_llm",
    "policy_tokenizer",
]


class Executor(Protocol):
    """Runs episodes somewhere; never raises for infrastructure failures (they come back as infra_error).

    A wrong request (an unknown instance id, a bad task record, a config the executor refuses) raises
    ConfigError: retrying it cannot help.
    """

    name: str

    async def run(self, request: EpisodeRequest) -> RolloutResult: ...

    def adopt(self, model: NamedModel | HeldModel, choice: ModelChoice) -> None:
        """Run requests that name ``model`` with ``choice``, a model object of this process (closed with the
        executor: only its ``shared`` client). ConfigError where episodes run in another process: an
        object cannot travel there."""
        ...

    async def close(self) -> None: ...


def refuse_adoption(executor: str, model: NamedModel | HeldModel) -> ConfigError:
    """The error of an executor whose episodes run in other processes, asked to adopt a model object."""
    name = model.name if isinstance(model, HeldModel) else model.llm or model.model
    return ConfigError(
        f"executor {executor} runs episodes in other processes; the model object {name!r} of this one "
        "cannot go there: use a local or pool executor, or serve the model and name its endpoint (a policy)"
    )


def policy_tokenizer(policy: Policy) -> Any:
    """The policy's tokenizer; ConfigError when it cannot be loaded (the request is at fault)."""
    from swe_rl.rl.tokenizer import load_tokenizer

    try:
        return load_tokenizer(policy.tokenizer)
    except ConfigError:
        raise
    except Exception as exc:  # a missing directory, a corrupt tokenizer file
        raise ConfigError(f"cannot load tokenizer {policy.tokenizer!r}: {exc}") from None


def policy_llm(policy: Policy) -> tuple[LLM, Any]:
    """The client for a policy, and its tokenizer."""
    tokenizer = policy_tokenizer(policy)
    if policy.kind == "sglang":
        from swe_rl.llm.sglang import SGLangClient

        return SGLangClient(policy.url, tokenizer), tokenizer
    from swe_rl.llm.openai import OpenAIClient

    return OpenAIClient(policy.model, policy.url), tokenizer
