"""What an infrastructure failure does to SkyRL's advantages, computed by SkyRL's own code (issue #38).

SkyRL (PyPI ``skyrl``) needs Python >= 3.12 (its pydantic models fail to build on 3.11) and pulls a CUDA
torch there, so it is not in the test venv; run this by hand in a 3.12 venv that has it:

    uv venv -p python3.12 /tmp/sky && VIRTUAL_ENV=/tmp/sky uv pip install torch numpy ray jaxtyping loguru \
        pydantic omegaconf tqdm aiohttp httpx transformers datasets torchdata skyrl-gym
    VIRTUAL_ENV=/tmp/sky uv pip install --no-deps skyrl==0.3.0
    PYTHONPATH=src /tmp/sky/bin/python bench/skyrl_advantages.py

The adapter's outputs (``SkyRLGenerator``'s per-trajectory and step-wise shapes, made from rollout results
of a group of four where one failed on infrastructure) go through SkyRL's ``validate_generator_output`` and
its registered GRPO / RLOO estimators, with ``grpo_norm_by_std`` on and off. Printed: whether the generator is
SkyRL's ``GeneratorInterface`` (by subclass) and, per case, the largest difference between a healthy row's
advantage and its advantage in the group without the failed row.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from skyrl.backends.skyrl_train.utils import ppo_utils
from skyrl.train.generators.base import GeneratorInterface
from skyrl.train.utils.trainer_utils import validate_generator_output

from swe_rl.episode.result import RolloutResult, TrainingSample
from swe_rl.integrations.skyrl import SkyRLGenerator

REWARDS = [1.0, 0.0, 1.0]  # the group's healthy rollouts; a fourth failed on infrastructure


def _result(i: int, reward: float | None) -> RolloutResult:
    if reward is None:
        return RolloutResult(status="infra_error", exit_status="infra_error", error="node lost")
    sample = TrainingSample(
        tokens=[1, 2, 3, 10 + i, 11 + i],
        prompt_length=3,
        loss_mask=[1, 1],
        rollout_logprobs=[-0.1, -0.2],
        reward=reward,
        status="completed",
        instance_id="task",
        trajectory_id=f"t{i}",
        step_indices=[0],
    )
    return RolloutResult(status="completed", exit_status="submitted", reward=reward, samples=[sample])


def _token_rewards(rewards: list[float], responses: list[list[int]]) -> torch.Tensor:
    """A scalar reward on each response's last token, right-aligned as SkyRL's batch tensors are."""
    width = max(len(r) for r in responses)
    out = torch.zeros(len(rewards), width)
    out[:, -1] = torch.tensor(rewards)
    return out


def _advantages(estimator: str, rewards: list[float], responses: list[list[int]], norm: bool) -> list[float]:
    width = max(len(r) for r in responses)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in responses], dtype=torch.float)
    adv, _ = ppo_utils.compute_advantages_and_returns(
        token_level_rewards=_token_rewards(rewards, responses),
        response_mask=mask,
        index=np.array(["task"] * len(rewards)),
        adv_estimator=estimator,
        config=None,
        grpo_norm_by_std=norm,
    )
    return [float(row[-1]) for row in adv]


def main() -> int:
    ppo_utils.AdvantageEstimatorRegistry.repopulate_registry()
    results = [_result(i, r) for i, r in enumerate(REWARDS)] + [_result(3, None)]
    groups = ["task"] * len(results)
    ids = [f"task_{i}" for i in range(len(results))]
    rows = []
    for step_wise in (False, True):
        gen = SkyRLGenerator.__new__(SkyRLGenerator)
        gen.step_wise, gen.filler_id = step_wise, 0
        shape = gen._step_outputs if step_wise else gen._trajectory_outputs
        out = shape(results, ids, groups)
        validate_generator_output(len(results), out, step_wise=step_wise)
        for estimator in ("grpo", "rloo"):
            for norm in (True, False) if estimator == "grpo" else (True,):
                got = _advantages(estimator, out["rewards"], out["response_ids"], norm)
                alone = _advantages(estimator, REWARDS, [[0, 0]] * len(REWARDS), norm)
                diff = max(abs(a - b) for a, b in zip(got[: len(REWARDS)], alone, strict=True))
                rows.append(
                    {
                        "shape": "step-wise" if step_wise else "per trajectory",
                        "estimator": estimator,
                        "grpo_norm_by_std": norm,
                        "rows": len(out["response_ids"]),
                        "max_diff_healthy": round(diff, 6),
                    }
                )
    subclass = issubclass(SkyRLGenerator, GeneratorInterface)  # SkyRL's trainer takes a GeneratorInterface
    json.dump(
        {"generator_is_generator_interface": subclass, "outputs_validated": True, "cases": rows},
        sys.stdout,
        indent=1,
    )
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
