"""SkyRL adapter: a generator (SkyRL's ``GeneratorInterface``: ``async generate(input_batch) -> GeneratorOutput``)
whose trajectories are whole swe-rl rollouts run through an :class:`~swe_rl.executors.base.Executor`.

Each prompt's task is ``env_extras[i]["instance"]`` (a task record or an instance id the executor knows;
rows from ``swe-rl data prepare`` carry it). The policy is the trainer's inference endpoint.

Two shapes, as SkyRL's ``generator.step_wise_trajectories`` chooses:

* per trajectory (SkyRL's default): one output per prompt; ``prompt_token_ids`` are the first prompt's ids
  and ``response_ids`` every later id, the ids the model saw and generated, never re-tokenized text;
  ``loss_masks`` are 1 exactly on generated ids (observations and template ids 0). A trajectory whose
  prompts stop extending (context manager) keeps its first exact span (integrations/adapter_kit.py).
* step-wise (``step_wise=True``, swe-rl's ``dynamic_history``): one output per agent step, exactly the
  prompt sent at that step and the reply, with ``is_last_step`` and ``trajectory_ids`` so SkyRL computes
  the advantage on each trajectory's last step and broadcasts it to all of its steps.

Infrastructure failures are never scored. Step-wise, their trajectories are left out of the batch (SkyRL
allows any number of step outputs), except that a group whose every trajectory failed keeps one placeholder
step (loss mask 0, reward 0.0): SkyRL's trainer asserts that every prompt of the batch is there. Per
trajectory, SkyRL needs one output per prompt and counts every output in its group's statistics, so a
rollout that failed on infrastructure is first run again (``infra_retries`` times): the failure did not
come from the policy, so the new rollout is a sample of the same distribution. One that keeps failing
becomes a one-token placeholder with loss mask 0 and, as its reward, the mean reward of its group's
healthy trajectories (the group's mean is unchanged, its std and RLOO's baselines are not:
bench/skyrl_advantages.py), ``stop_reasons`` ``"infra_error"``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError, InfraError
from swe_rl.executors.base import Executor, Policy
from swe_rl.integrations.adapter_kit import (
    Span,
    build_request,
    episode_metrics,
    healthy_group_means,
    policy_from_env,
    sampling_from,
    shared_executor,
    task_of,
    trajectory_span,
)
from swe_rl.llm.base import SamplingParams

# SkyRL's stop reasons are the inference engine's ("stop", "length"); options such as
# zero_reward_on_non_stop and apply_overlong_filtering read them.
STOP_REASON = {"completed": "stop", "truncated": "length", "aborted": "abort", "infra_error": "infra_error"}


def _generator_interface() -> type:
    """SkyRL's ``GeneratorInterface`` where SkyRL is installed (``skyrl.train.generators.base`` at a9564572eb8e,
    ``skyrl_train.generators.base`` before), so the trainer sees a subclass; else ``object``."""
    for module in ("skyrl.train.generators.base", "skyrl_train.generators.base"):
        try:
            return importlib.import_module(module).GeneratorInterface
        except (ImportError, AttributeError):
            continue
    return object


class SkyRLGenerator(_generator_interface()):  # type: ignore[misc]  # SkyRL's, where installed
    """Runs one graded swe-rl rollout per prompt and returns a ``GeneratorOutput``-shaped dict."""

    def __init__(
        self,
        policy: Policy,
        *,
        sampling: SamplingParams | None = None,
        step_wise: bool = False,
        executor: Executor | None = None,
        filler_id: int = 0,
        infra_retries: int = 2,
    ) -> None:
        if infra_retries < 0:
            raise ConfigError(f"infra_retries must be >= 0, not {infra_retries}")
        self.policy = policy
        self.infra_retries = infra_retries
        self.sampling = sampling or SamplingParams(max_tokens=4096, temperature=1.0)
        self.step_wise = step_wise
        self._executor = executor
        self.filler_id = filler_id

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = shared_executor()
        return self._executor

    @classmethod
    def from_skyrl(cls, cfg: Any, tokenizer: Any, inference_engine_client: Any) -> SkyRLGenerator:
        """From what SkyRL hands ``get_generator``: its config, tokenizer and inference client.

        The policy is the client's HTTP endpoint (OpenAI routes under ``/v1``) unless ``SWE_RL_POLICY_URL``
        names one (an SGLang server for token-in/token-out).
        """
        generator = getattr(cfg, "generator", None)
        params = getattr(generator, "sampling_params", None)
        endpoint = inference_engine_client.get_endpoint_url().rstrip("/")
        policy = policy_from_env(
            f"{endpoint}/v1", default_kind="openai", tokenizer=getattr(tokenizer, "name_or_path", None)
        )
        model = getattr(getattr(getattr(cfg, "trainer", None), "policy", None), "model", None)
        model_path = getattr(model, "path", None)
        if policy.kind == "openai" and model_path:
            policy = policy.model_copy(update={"model": str(model_path)})
        default = SamplingParams(max_tokens=4096, temperature=1.0)
        sampling = sampling_from(
            {
                k: getattr(params, k)
                for k in ("max_generate_length", "temperature", "top_p")
                if hasattr(params, k)
            },
            default,
        )
        filler = getattr(tokenizer, "pad_token_id", None)
        if filler is None:
            filler = getattr(tokenizer, "eos_token_id", None)
        return cls(
            policy,
            sampling=sampling,
            step_wise=bool(getattr(generator, "step_wise_trajectories", False)),
            filler_id=int(filler or 0),
        )

    async def generate(self, input_batch: Mapping[str, Any]) -> dict[str, Any]:
        """One rollout per prompt, outputs in input order."""
        n = len(input_batch["prompts"])
        extras = input_batch.get("env_extras") or [{}] * n
        ids = input_batch.get("trajectory_ids") or [None] * n
        params = sampling_from(input_batch.get("sampling_params"), self.sampling)
        tasks = [task_of(extra or {}) for extra in extras]
        requests = [build_request(t, self.policy, params, dynamic_history=self.step_wise) for t in tasks]
        results = list(await asyncio.gather(*(self.executor.run(r) for r in requests)))
        retried = 0 if self.step_wise else await self._run_failed_again(requests, results)
        traj_ids = [
            tid if tid is not None else f"{_name(t)}_{i}"
            for i, (tid, t) in enumerate(zip(ids, tasks, strict=True))
        ]
        groups = [_group(tid, t) for tid, t in zip(ids, tasks, strict=True)]
        if self.step_wise:
            return self._step_outputs(results, traj_ids, groups)
        out = self._trajectory_outputs(results, traj_ids, groups)
        out["rollout_metrics"]["swe_rl/infra_retries"] = float(retried)
        return out

    async def _run_failed_again(self, requests: Sequence[Any], results: list[RolloutResult]) -> int:
        """Runs each rollout that failed on infrastructure again, up to ``infra_retries`` times, in place in
        ``results``; the number of runs made again."""
        retried = 0
        for _ in range(self.infra_retries):
            failed = [i for i, r in enumerate(results) if r.status == "infra_error"]
            if not failed:
                break
            again = await asyncio.gather(*(self.executor.run(requests[i]) for i in failed))
            for i, result in zip(failed, again, strict=True):
                results[i] = result
            retried += len(failed)
        return retried

    def _trajectory_outputs(
        self, results: Sequence[RolloutResult], traj_ids: list[Any], groups: list[str]
    ) -> dict[str, Any]:
        spans = [trajectory_span(r) for r in results]
        means = healthy_group_means(spans, groups)
        out = _empty()
        for span, group in zip(spans, groups, strict=True):
            # not scored: no loss, and a reward that leaves its group's mean where it is
            _append(out, span if span is not None else self._placeholder(means[group]))
        out["trajectory_ids"] = traj_ids
        out["rollout_metrics"] = _metrics(results, spans)
        return out

    def _placeholder(self, reward: float) -> Span:
        """An output for a trajectory that infrastructure failed: one filler token, no loss."""
        filler = [self.filler_id]
        return Span(
            prompt_ids=filler,
            response_ids=filler,
            loss_mask=[0],
            logprobs=[0.0],
            reward=reward,
            status="infra_error",
            turns=0,
        )

    def _step_outputs(
        self, results: Sequence[RolloutResult], traj_ids: list[Any], groups: list[str]
    ) -> dict[str, Any]:
        out = _empty()
        out["trajectory_ids"], out["is_last_step"] = [], []
        healthy = {g for g, r in zip(groups, results, strict=True) if r.status != "infra_error" and r.samples}
        kept: set[str] = set()
        for result, tid, group in zip(results, traj_ids, groups, strict=True):
            if result.status == "infra_error" or not result.samples:
                # left out of the batch: not trained on, not scored. Only where its whole group failed does
                # one placeholder stay: SkyRL asserts every prompt of the batch is there (its uids), and a
                # group of one placeholder is a group of its own, with no loss
                if group not in healthy and group not in kept:
                    kept.add(group)
                    _append(out, self._placeholder(0.0))
                    out["trajectory_ids"].append(tid)
                    out["is_last_step"].append(True)
                continue
            turns = len(result.trajectory.steps) if result.trajectory else len(result.samples)
            for j, sample in enumerate(result.samples):
                _append(out, Span.of(sample, turns=turns))
                out["trajectory_ids"].append(tid)
                out["is_last_step"].append(j == len(result.samples) - 1)
        if not healthy:
            raise InfraError(f"all {len(results)} rollouts of the batch failed on infrastructure")
        out["rollout_metrics"] = _metrics(results, [])
        return out


def _empty() -> dict[str, Any]:
    """Every key SkyRL's trainer reads; the optional ones it does not need from us stay None."""
    return {
        "prompt_token_ids": [],
        "response_ids": [],
        "rewards": [],
        "loss_masks": [],
        "stop_reasons": [],
        "rollout_metrics": None,
        "rollout_logprobs": [],
        "trajectory_ids": None,
        "trajectory_generation_times": None,
        "trajectory_time_splits": None,
        "rollout_expert_indices": None,
        "is_last_step": None,
        "env_metrics": None,
    }


def _append(out: dict[str, Any], span: Span) -> None:
    out["prompt_token_ids"].append(span.prompt_ids)
    out["response_ids"].append(span.response_ids)
    out["rewards"].append(span.reward)
    out["loss_masks"].append(span.loss_mask)
    out["stop_reasons"].append(STOP_REASON.get(span.status, "stop"))
    out["rollout_logprobs"].append(span.logprobs)


def _metrics(results: Sequence[RolloutResult], spans: Sequence[Span | None]) -> dict[str, float]:
    metrics = {f"swe_rl/{k.removeprefix('rl/')}": v for k, v in episode_metrics(results).items()}
    metrics["swe_rl/dropped_spans"] = float(sum(s.dropped_spans for s in spans if s is not None))
    return metrics


def _name(task: str | dict[str, Any]) -> str:
    return task if isinstance(task, str) else str(task.get("instance_id", "task"))


def _group(trajectory_id: Any, task: str | dict[str, Any]) -> str:
    """The GRPO group: SkyRL's ``TrajectoryID.instance_id`` when given, else the task's instance id."""
    return str(getattr(trajectory_id, "instance_id", None) or _name(task))
