"""TRL adapter: GRPO's rollout function, whose rollouts are whole agent episodes in sandboxes.

TRL's ``GRPOTrainer`` takes a ``rollout_func(prompts, trainer)``; ours reads each prompt as an instance
id, runs the agent on that task with the trainer's own model as the policy (concurrent episodes batched
into one ``generate`` per turn, prompts extended id for id: llm/hf.py ``BatchedHFPolicy``), grades the
patch, and hands TRL one exact multi-turn sample per episode: the first prompt's ids as the prompt, every
later id as the completion, with ``env_mask`` = 1 exactly on generated ids (observations and template ids
are 0) and the rollout logprobs. The reward is the outcome reward (resolved or not); rewards and
advantages are per episode, groups being TRL's ``num_generations`` episodes of one task.

The episodes run on an executor (executors/), as every trainer's do: the one ``SWE_RL_EXECUTOR`` and
``SWE_RL_REUSE`` name (:func:`~swe_rl.integrations.adapter_kit.executor_from`), or one the caller gives. The
trainer's model is an object of this process, given beside each of a step's requests
(``Executor.run(request, model=...)``) and named in them as a ``HeldModel``: so the executor must run
episodes here (local or pool); a rollout server or a Ray cluster refuses it. The function owns the executor and runs every step's episodes in one
event loop of its own, so the sandboxes the executor keeps between steps (reset in place, the grading
ones with their warm test runner) stay usable; :meth:`SweRolloutFunc.close` closes them there.

An infrastructure failure cannot leave TRL's fixed-size batch, so its episode carries no loss (mask all
0) and no reward (None): TRL (>= 1.x, ``_generate_and_score_completions``) marks a completion every reward
function left None unscorable, keeps it out of its group's nan-aware mean and std, and sets its advantage
to 0, so the others get the advantages of the group without it. It is counted in the run's metrics and
never scored as a wrong answer.

Dynamic sampling (DAPO's, off by default: ``resample_rounds``): a group whose healthy episodes all got the same
reward gives GRPO no gradient, and a policy that falls into such a state (every episode submitting with no fix,
or none submitting) gets no signal to leave it. With ``resample_rounds`` N, up to N times a step each such group
is run again on a training task this step has not used (drawn by a generator seeded with the run's seed and the
step), and a group that mixes rewards takes its place in TRL's batch. Every episode run is logged (the ones
left out of the update marked ``dropped``), so the step's rates are the policy's own, not the selected
groups'.

The trainer around it, with its run directory, is ``swe-rl train rl`` (train/grpo.py).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Any, Protocol

from swe_rl.agent.config import AgentConfig
from swe_rl.episode.request import EpisodeRequest, HeldModel
from swe_rl.episode.result import RolloutResult
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.errors import ConfigError
from swe_rl.executors.base import Executor, refuse_model
from swe_rl.integrations.adapter_kit import episode_metrics, executor_from, trajectory_span
from swe_rl.llm.base import SamplingParams
from swe_rl.tasks.model import Task

POLICY = HeldModel(name="trl-policy")  # the trainer's model, as the requests name it


class StepLog(Protocol):
    """Where the rollout function reports each trainer step (the run directory's files: train/grpo.py)."""

    def step(
        self,
        step: int,
        ids: Sequence[str],
        results: Sequence[RolloutResult],
        metrics: dict[str, float],
        dropped: Sequence[tuple[str, RolloutResult]] = (),
    ) -> None: ...


class SweRolloutFunc:
    """TRL ``rollout_func``: each prompt is an instance id; one graded agent episode per prompt, run on
    ``executor`` (default: the one the ``SWE_RL_*`` settings name), which the function owns and closes."""

    def __init__(
        self,
        tasks: Sequence[Task],
        agent: AgentConfig,
        params: SamplingParams,
        *,
        executor: Executor | None = None,
        log: StepLog | None = None,
        max_concurrent: int = 16,
        window_s: float = 0.5,
        spec: EpisodeSpec | None = None,
        resample_rounds: int = 0,
        seed: int = 0,
    ) -> None:
        self.resample_rounds = resample_rounds  # dynamic sampling: rounds a step for one-reward groups
        self.seed = seed
        # how each episode runs and is paid (training's defaults); TRL trains one exact multi-turn sample
        self.spec = (spec or EpisodeSpec.for_training()).model_copy(update={"dynamic_history": False})
        self.window_s = window_s  # episodes run in step: wait this long to batch a whole turn together
        self.tasks = {t.instance_id: t for t in tasks}
        self.executor = executor or executor_from()
        self.agent = agent
        self.params = params
        self.log = log
        self.max_concurrent = max_concurrent
        self.split_episodes = 0
        self.last_metrics: dict[str, float] = {}
        self._loop = asyncio.Runner()  # one event loop for every step: the kept sandboxes live in it
        # the trainer's model cannot go where the episodes would run in other processes: fail now
        if not self.executor.in_process:
            name = self.executor.name
            self.close()
            raise refuse_model(name, POLICY)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        from swe_rl.llm.hf import BatchedHFPolicy

        ids = [self._instance(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        policy = BatchedHFPolicy(model, tokenizer, max_batch=self.max_concurrent, window_s=self.window_s)
        started = time.monotonic()
        step, group = int(trainer.state.global_step), int(trainer.num_generations)
        drawn = ids
        ids, results, dropped = self.episodes(ids, policy, group=group, step=step)
        metrics = episode_metrics([*results, *(r for _, r in dropped)])  # every episode the policy ran
        metrics["rl/one_reward_groups"] = float(len(one_reward_groups(results, group)))  # in the update
        if self.resample_rounds:
            metrics["rl/resampled_groups"] = float(len(dropped) // group)  # groups run again
            metrics["rl/replaced_groups"] = float(
                sum(a != b for a, b in zip(drawn, ids, strict=True)) // group
            )
        metrics["rl/rollout_time_s"] = time.monotonic() - started
        metrics["rl/generate_time_s"] = policy.generate_s  # the rest: sandboxes, grading, batching waits
        metrics["rl/generate_batch_mean"] = (
            sum(policy.batches) / len(policy.batches) if policy.batches else 0.0
        )
        if self.log is not None:
            self.log.step(step, ids, results, metrics, dropped)
        self.last_metrics = metrics
        return self.to_trl(ids, results, tokenizer)

    def _instance(self, prompt: Any) -> str:
        text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        if text not in self.tasks:
            raise ConfigError(f"rollout prompt {text!r} is not an instance id of the training tasks")
        return str(text)

    def request(self, instance_id: str) -> EpisodeRequest:
        """The episode of one prompt: the task by its id (the object goes beside it: the trainer's executor
        runs episodes in this process), the trainer's model, one exact multi-turn sample."""
        return EpisodeRequest(
            task=instance_id,
            model=POLICY,
            sampling=self.params,
            agent=self.agent,
            **dict(self.spec),
        )

    def episodes(
        self, ids: list[str], policy: Any, *, group: int, step: int
    ) -> tuple[list[str], list[RolloutResult], list[tuple[str, RolloutResult]]]:
        """One step's episodes with ``policy`` (given beside each of the step's requests), then dynamic
        sampling's rounds: the ids and results TRL trains on, and the episodes run but left out of them."""
        return self._loop.run(self._step(ids, policy, group, step))

    async def _step(
        self, ids: list[str], policy: Any, group: int, step: int
    ) -> tuple[list[str], list[RolloutResult], list[tuple[str, RolloutResult]]]:
        try:
            results = await self._episodes(ids, policy)
            if not self.resample_rounds:
                return ids, results, []
            rng = random.Random(f"{self.seed}:{step}")
            return await self._resample(list(ids), results, group, rng, policy)
        finally:
            await policy.close()

    async def _resample(
        self, ids: list[str], results: list[RolloutResult], group: int, rng: random.Random, policy: Any
    ) -> tuple[list[str], list[RolloutResult], list[tuple[str, RolloutResult]]]:
        """Up to ``resample_rounds`` times, each one-reward group run again on an unused training task; a
        group that mixes rewards replaces it in place (TRL's groups are consecutive blocks of ``group``)."""
        if any(len(set(ids[b : b + group])) != 1 for b in range(0, len(ids), group)):
            raise ConfigError(
                f"dynamic sampling needs whole groups of {group} episodes of one task in a rollout call"
            )
        dropped: list[tuple[str, RolloutResult]] = []
        used = set(ids)
        for _ in range(self.resample_rounds):
            pool = sorted(set(self.tasks) - used)
            rng.shuffle(pool)
            blocks = one_reward_groups(results, group)[: len(pool)]
            if not blocks:
                break
            fresh = pool[: len(blocks)]
            used.update(fresh)
            tried = await self._episodes([t for t in fresh for _ in range(group)], policy)
            for k, b in enumerate(blocks):
                run = tried[k * group : (k + 1) * group]
                if one_reward_groups(run, group):  # no better: the original stays, this one is logged
                    dropped.extend((fresh[k], r) for r in run)
                    continue
                dropped.extend(zip(ids[b : b + group], results[b : b + group], strict=True))
                ids[b : b + group], results[b : b + group] = [fresh[k]] * group, run
        return ids, results, dropped

    async def _episodes(self, ids: list[str], policy: Any) -> list[RolloutResult]:
        limit = asyncio.Semaphore(self.max_concurrent)

        def model(_task: Task) -> Any:
            return policy  # the trainer's model, this step's: closed by _step

        async def one(instance_id: str) -> RolloutResult:
            async with limit:
                request, task = self.request(instance_id), self.tasks[instance_id]
                return await self.executor.run(request, task=task, model=model)

        return list(await asyncio.gather(*(one(i) for i in ids)))

    def close(self) -> None:
        """Close the executor (its kept sandboxes, in the loop they live in), then the loop."""
        try:
            self._loop.run(self.executor.close())
        finally:
            self._loop.close()

    def to_trl(self, ids: list[str], results: list[RolloutResult], tokenizer: Any) -> dict[str, list[Any]]:
        """TRL's rollout output: prompt/completion ids, logprobs, env_mask, and the rewards as extra fields."""
        spans = [trajectory_span(r) for r in results]
        eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        out: dict[str, list[Any]] = {
            k: []
            for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "swe_reward", "swe_status")
        }
        for instance_id, span in zip(ids, spans, strict=True):
            if span is None:
                first = self.tasks[instance_id].problem_statement[:64]
                out["prompt_ids"].append(list(tokenizer.encode(first, add_special_tokens=False)) or [eos])
                out["completion_ids"].append([eos])
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])  # no loss: an infrastructure failure is not an answer
                out["swe_reward"].append(None)  # unscorable: out of its group's statistics
                out["swe_status"].append("infra_error")
                continue
            if span.dropped_spans:
                self.split_episodes += 1  # the template broke the prefix: train on the exact first part
            out["prompt_ids"].append(span.prompt_ids)
            out["completion_ids"].append(span.response_ids)
            out["logprobs"].append(span.logprobs)
            out["env_mask"].append(span.loss_mask)
            out["swe_reward"].append(span.reward)
            out["swe_status"].append(span.status)
        return out


def one_reward_groups(results: Sequence[RolloutResult], group: int) -> list[int]:
    """The starts of the consecutive groups whose healthy episodes all got one reward (or that have none):
    groups GRPO's advantages are all zero in."""
    starts = []
    for b in range(0, len(results), group):
        spans = (trajectory_span(r) for r in results[b : b + group])
        if len({s.reward for s in spans if s is not None}) < 2:
            starts.append(b)
    return starts


def swe_reward(completions: list[Any], swe_reward: list[float | None], **_: Any) -> list[float | None]:
    """TRL reward function: the episode's outcome reward, set by the rollout function (None: unscorable)."""
    return list(swe_reward)
