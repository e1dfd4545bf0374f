"""Supervised examples from conversations: input ids and an assistant-only loss mask.

Made by the encoder of the RL samples: every assistant turn becomes a step whose context is the conversation
before it; :func:`~swe_rl.rl.samples.fill_ids_fixed_base` gives each step the prompt ids the chat template
builds for inference (generation prompt included) and the ids of the reply; :func:`trajectory_samples`
merges steps while each prompt extends the previous one (plain ChatML: one example per conversation) and
starts a new example where it does not (Qwen3 templates drop earlier think blocks). The mask is 1 exactly on
the ids the model would generate after each inference prompt: the reply and its end token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.agent.trajectory import Step, Trajectory
from swe_rl.errors import ConfigError
from swe_rl.llm.base import Completion, Message
from swe_rl.rl.samples import fill_ids_fixed_base, step_samples, trajectory_samples


class SFTExample(BaseModel):
    """One tokenized example; TRL's SFTTrainer reads ``input_ids`` + ``assistant_masks`` as they are."""

    input_ids: list[int]
    assistant_masks: list[int] = Field(description="1 on the ids the model is trained to generate.")
    turns: list[int] = Field(description="Indices of the conversation's assistant messages it trains on.")

    @property
    def trained_tokens(self) -> int:
        return sum(self.assistant_masks)


def as_trajectory(messages: Sequence[Message], name: str = "sft") -> Trajectory:
    """A text-only trajectory with one step per assistant message (context: everything before it)."""
    steps = [
        Step(index=n, context=list(range(i)), completion=Completion(text=m.content))
        for n, (i, m) in enumerate((i, m) for i, m in enumerate(messages) if m.role == "assistant")
    ]
    if not steps:
        raise ConfigError(f"{name}: the conversation has no assistant message")
    if steps[0].context == []:
        raise ConfigError(f"{name}: the conversation starts with an assistant message")
    return Trajectory(
        instance_id=name, model="sft", messages=list(messages), steps=steps, exit_status="submitted"
    )


def encode_chat(
    messages: Sequence[Message],
    tokenizer: Any,
    *,
    merge: bool = True,
    name: str = "sft",
    **template_kwargs: Any,
) -> list[SFTExample]:
    """Tokenized examples of one conversation with ``tokenizer``'s chat template (``template_kwargs`` such as
    ``enable_thinking`` go to it). ``merge=False``: one example per assistant turn."""
    traj = fill_ids_fixed_base(as_trajectory(messages, name), tokenizer, **template_kwargs)
    turn_of = {step.index: step.context[-1] + 1 for step in traj.steps}
    samples = trajectory_samples(traj, name) if merge else step_samples(traj, name)
    return [
        SFTExample(
            input_ids=s.tokens,
            assistant_masks=[0] * s.prompt_length + s.loss_mask,
            turns=[turn_of[i] for i in s.step_indices],
        )
        for s in samples
    ]
