"""What an executor is asked to run: one episode, as plain data, the same for eval and training.

A request names its task (a record, or an id the executor knows), its model (a typed config: the policy
being trained, or a model as the command line names it), the agent's config and limits, sampling, and
how the episode is graded and what comes back (training samples and a reward, or only the record). It
crosses the network as it is: to a rollout server (``POST /run``) or to a Ray worker on another node.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from swe_rl.agent.config import AgentConfig
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.llm.base import SamplingParams


class Policy(BaseModel):
    """The model being trained, as the rollout reaches it: token ids in and out."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="SGLang server/router (kind sglang) or OpenAI-compatible base URL ending in /v1 (kind openai).",
    )
    kind: Literal["sglang", "openai"] = Field(
        default="sglang",
        description="sglang: token ids in and out (exact). openai: chat completions; ids from the server "
        "when it returns them, else re-encoded with the tokenizer (fixed-base method).",
    )
    tokenizer: str = Field(
        default="qwen", description="'qwen' (bundled vocabulary) or a tokenizer directory."
    )
    model: str = Field(default="policy", max_length=512, description="Model name sent to an OpenAI endpoint.")


class NamedModel(BaseModel):
    """A model as the command line names it (``--llm/--model/--api-base``), built where the episode runs.

    API keys are not part of it: whoever runs the episode reads its own ``OPENAI_API_KEY``.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["named"] = "named"
    llm: str | None = Field(default=None, max_length=2048, description="An --llm spec (llm/select.py).")
    model: str | None = Field(default=None, max_length=512)
    api_base: str | None = Field(default=None, max_length=2048)

    @property
    def key(self) -> str:
        return self.model_dump_json()


class HeldModel(BaseModel):
    """A model object this process holds (a trainer's own policy: TRL's), named so in the request and given
    beside it (``Executor.run(request, model=...)``). It gives token ids, so its episodes can train; it cannot
    cross the network, so only an executor that runs episodes in this process takes it (others refuse it)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["held"] = "held"
    name: str = Field(min_length=1, max_length=256)

    @property
    def key(self) -> str:
        return self.model_dump_json()


def _model_kind(value: Any) -> str:
    """Which model a config is: ``kind`` named or held, else a policy (whose ``kind`` defaults to sglang)."""
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in ("named", "held") else "policy"


ModelConfig = Annotated[
    Annotated[Policy, Tag("policy")]
    | Annotated[NamedModel, Tag("named")]
    | Annotated[HeldModel, Tag("held")],
    Discriminator(_model_kind),
]


class ProcessReward(BaseModel):
    """A judge LLM (OpenAI-compatible) scores every step m times; reward = outcome + coef * mean step score."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, description="Judge base URL ending in /v1.")
    model: str = Field(default="judge", max_length=512)
    m: int = Field(default=3, ge=1, le=16, description="Judgements per step.")
    coef: float = Field(default=1.0, description="Weight of the mean step score.")
    concurrency: int = Field(default=8, ge=1, le=256, description="Judge calls at once per rollout.")


class EpisodeRequest(EpisodeSpec):
    """One episode to run: its task, model, agent and sampling, and how it runs and is scored (the
    :class:`.EpisodeSpec` it is, training's defaults; an eval attempt's request is made from eval's spec,
    runs/evaluation.py). ``train`` (the default): training samples and a reward come back; else the episode's
    record, trajectory and patch only (an eval attempt). A field it does not have is refused by name (a
    misspelt one would otherwise be dropped and its default run)."""

    model_config = ConfigDict(extra="forbid")

    task: str | dict[str, Any] = Field(
        description="A full task record, or an instance id the executor knows."
    )
    model: ModelConfig
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    agent_config: str | None = Field(
        default=None, max_length=256, description="Shipped agent config name (default swebench)."
    )
    agent: AgentConfig | None = Field(
        default=None,
        description="The agent's whole config, inline (a user's YAML file). Executors in this process and on "
        "Ray nodes run it; a rollout server refuses it: its templates are code, and it runs shipped ones only.",
    )
    step_limit: int | None = Field(default=None, ge=1, le=1000)
    wall_time_s: float | None = Field(default=None, gt=0, description="Seconds for the agent's run.")
    cost_limit: float | None = Field(default=None, gt=0, description="USD for the agent's priced calls.")
    prm: ProcessReward | None = Field(default=None, description="Process rewards from a judge (seed's PRM).")
    train: bool = Field(default=True, description="Build training samples and a reward.")
    attempt: int = Field(default=0, ge=0, description="Which attempt at the task (eval's --n-samples).")

    @model_validator(mode="after")
    def _context_fits_a_reply(self) -> EpisodeRequest:
        if self.max_context is not None and self.max_context <= self.sampling.max_tokens:
            raise ValueError(
                f"max_context ({self.max_context}) must exceed sampling.max_tokens ({self.sampling.max_tokens})"
            )
        if self.train and isinstance(self.model, NamedModel):
            raise ValueError(
                "a training episode needs the policy's token ids: give a policy model (sglang or openai) or "
                "a held one (the trainer's own), or set train false for an episode without samples"
            )
        if self.agent is not None and self.agent_config is not None:
            raise ValueError("give agent (inline) or agent_config (a shipped name), not both")
        return self

    @property
    def policy(self) -> Policy | None:
        """The trained policy, when the model is one."""
        return self.model if isinstance(self.model, Policy) else None

    @property
    def instance_id(self) -> str:
        return self.task if isinstance(self.task, str) else str(self.task.get("instance_id", ""))
