"""Training samples from trajectories, built from token ids only (never by re-tokenizing text).

* :func:`step_samples` — ``dynamic_history``: one sample per step, exactly the prompt ids sent at that
  step followed by the ids generated at it; loss mask 1 on the generated ids only.
* :func:`trajectory_samples` — multi-turn samples that concatenate steps while each prompt extends the
  previous prompt + completion; observation ids in between get mask 0. Where a prompt does not extend
  (the context manager dropped turns, a template dropped an earlier ``<think>``) a new sample starts.
* :func:`fill_ids_fixed_base` — for servers that return text only: the seed's fixed-base method.

The sample type itself belongs to the episode's result (episode/result.py), which carries the samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.episode.result import SampleStatus, TrainingSample, status_of
from swe_rl.errors import ConfigError
from swe_rl.llm.base import Message


def _ids(traj: Trajectory) -> list[tuple[list[int], list[int], list[float]]]:
    out = []
    for step in traj.steps:
        c = step.completion
        if c.prompt_ids is None or c.completion_ids is None:
            raise ConfigError(
                f"{traj.instance_id}: step {step.index} has no token ids; the server returned text "
                "only: fill them with fill_ids_fixed_base() first"
            )
        logprobs = (
            c.logprobs
            if c.logprobs is not None and len(c.logprobs) == len(c.completion_ids)
            else [0.0] * len(c.completion_ids)
        )
        out.append((c.prompt_ids, c.completion_ids, logprobs))
    return out


def step_samples(traj: Trajectory, trajectory_id: str, reward: float | None = None) -> list[TrainingSample]:
    """dynamic_history: one sample per step, on exactly the (context-managed) prompt the model saw."""
    status = status_of(traj)
    return [
        TrainingSample(
            tokens=[*prompt, *completion],
            prompt_length=len(prompt),
            loss_mask=[1] * len(completion),
            rollout_logprobs=list(logprobs),
            reward=reward,
            status=status,
            instance_id=traj.instance_id,
            trajectory_id=trajectory_id,
            step_indices=[i],
        )
        for i, (prompt, completion, logprobs) in enumerate(_ids(traj))
    ]


def trajectory_samples(
    traj: Trajectory, trajectory_id: str, reward: float | None = None
) -> list[TrainingSample]:
    """Multi-turn samples: one while prompts keep extending; a new one wherever a prefix breaks."""
    status = status_of(traj)
    samples: list[TrainingSample] = []
    current: dict[str, Any] | None = None
    for i, (prompt, completion, logprobs) in enumerate(_ids(traj)):
        if current is not None:
            seen = current["tokens"]
            if prompt[: len(seen)] == seen:
                gap = prompt[len(seen) :]  # observation + template ids between the turns: not trained on
                current["tokens"] += [*gap, *completion]
                current["mask"] += [0] * len(gap) + [1] * len(completion)
                current["logprobs"] += [0.0] * len(gap) + list(logprobs)
                current["steps"].append(i)
                continue
            samples.append(_finish(current, traj, trajectory_id, reward, status))
        current = {
            "tokens": [*prompt, *completion],
            "prompt": len(prompt),
            "mask": [1] * len(completion),
            "logprobs": list(logprobs),
            "steps": [i],
        }
    if current is not None:
        samples.append(_finish(current, traj, trajectory_id, reward, status))
    return samples


def _finish(
    current: dict[str, Any], traj: Trajectory, trajectory_id: str, reward: float | None, status: SampleStatus
) -> TrainingSample:
    return TrainingSample(
        tokens=current["tokens"],
        prompt_length=current["prompt"],
        loss_mask=current["mask"],
        rollout_logprobs=current["logprobs"],
        reward=reward,
        status=status,
        instance_id=traj.instance_id,
        trajectory_id=trajectory_id,
        step_indices=current["steps"],
    )


def chat_ids(
    tokenizer: Any, messages: Sequence[Message], *, generation_prompt: bool, **template_kwargs: Any
) -> list[int]:
    ids = tokenizer.apply_chat_template(
        [m.model_dump() for m in messages],
        tokenize=True,
        add_generation_prompt=generation_prompt,
        return_dict=False,
        **template_kwargs,
    )
    return list(ids)


def fill_ids_fixed_base(traj: Trajectory, tokenizer: Any, **template_kwargs: Any) -> Trajectory:
    """The text-only fallback (the seed's fixed-base method), for steps without ids.

    The prompt is the chat template of the step's context with a generation prompt; the completion's ids
    are those of [base + the assistant message] past the ids of [base] + generation prompt, where base is
    the step's context. Exact only when the template renders an assistant turn as generation prompt +
    content + end token, or when the generation prompt opens more than the rendered turn does (thinking off);
    then the reply's own ids follow the prompt.
    """
    for step in traj.steps:
        c = step.completion
        if c.prompt_ids is not None and c.completion_ids is not None:
            continue
        context = [traj.messages[i] for i in step.context if i >= 0]
        base = chat_ids(tokenizer, context, generation_prompt=False, **template_kwargs)
        prompt = chat_ids(tokenizer, context, generation_prompt=True, **template_kwargs)
        full = chat_ids(
            tokenizer,
            [*context, Message(role="assistant", content=c.text)],
            generation_prompt=False,
            **template_kwargs,
        )
        turn = full[len(base) :]  # the assistant turn as the template renders it after the fixed base
        opener = prompt[len(base) :]
        eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        if turn[: len(opener)] == opener:
            completion = turn[len(opener) :]
            if eos in completion:  # the model stops at the end token; the newline after it is not generated
                completion = completion[: completion.index(eos) + 1]
        else:
            # the generation prompt holds more than the rendered turn's opening (thinking off: an empty think
            # block the template never renders again): the reply is what follows the prompt, then the end token
            completion = [*tokenizer.encode(c.text, add_special_tokens=False), eos]
        c.prompt_ids, c.completion_ids = prompt, completion
    return traj
