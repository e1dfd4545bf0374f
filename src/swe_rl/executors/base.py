"""What every executor serves: ``run(EpisodeRequest) -> RolloutResult``, for eval and training alike.

The request (episode/request.py) is plain data, sent across the network as it is; the result
(episode/result.py) carries the episode's record, trajectory and patch, and for training its samples and
reward. Objects of the caller's process go beside the request, never through it, for that one episode:
``run(request, task=..., model=...)``: the task object reaches the episode as it is, and the model object
(a trainer's own policy, a model eval built here, a test's scripted model: a factory of the episode's LLM)
runs it, the request naming it by a ``HeldModel`` or ``NamedModel``. Nothing is swapped into the executor
between calls. An executor whose episodes run elsewhere (``in_process`` false) refuses both with
InProcessObjectError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from swe_rl.episode.request import EpisodeRequest, HeldModel, NamedModel, Policy, ProcessReward
from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError, InProcessObjectError
from swe_rl.llm.base import LLM
from swe_rl.tasks.model import Task

ModelFactory = Callable[[Task], LLM]  # a model object of the caller's process: the LLM of each episode's task

__all__ = [
    "EpisodeRequest",
    "Executor",
    "HeldModel",
    "ModelFactory",
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
    in_process: bool
    """Whether its episodes run in this process (and so take this process's model and task objects)."""

    async def run(
        self, request: EpisodeRequest, *, task: Task | None = None, model: ModelFactory | None = None
    ) -> RolloutResult:
        """Run ``request``. ``task``: the task object the caller holds for the instance ``request.task``
        names, handed to the episode unchanged (no record parsed back). ``model``: the model object of this
        process the episode runs with (called with the task for the episode's LLM, which the caller closes),
        the model ``request.model`` names (a ``HeldModel`` runs only so). InProcessObjectError for either
        where episodes run in another process: send the record in ``request.task`` and a served model's
        endpoint there."""
        ...

    async def close(self) -> None: ...


def refuse_model(executor: str, model: Any) -> InProcessObjectError:
    """The error of an executor whose episodes run in other processes, given a model object to run with
    (``model``: the request's model config, which names it)."""
    name = getattr(model, "name", None) or getattr(model, "llm", None) or getattr(model, "model", None)
    return InProcessObjectError(
        f"executor {executor} runs episodes in other processes; the model object {name!r} of this one "
        "cannot go there: use a local or pool executor, or serve the model and name its endpoint (a policy)"
    )


def refuse_task(executor: str, task: Task) -> InProcessObjectError:
    """The error of an executor whose episodes run in other processes, given a task object to run."""
    return InProcessObjectError(
        f"executor {executor} runs episodes in other processes; the task object {task.instance_id!r} of this "
        "one cannot go there: send its record in request.task (Task.to_record()) and no task object"
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
