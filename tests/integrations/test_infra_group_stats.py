"""An infrastructure failure never moves its group's advantage statistics: with each trainer's real sample
types and advantage code, a group with one failed sample gives the others exactly the advantages of the
group without it; the controls run the trainer's own default computation, which does move them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

REWARDS = [1.0, -1.0, -1.0]


def _miles_args() -> SimpleNamespace:
    return SimpleNamespace(
        advantage_estimator="grpo",
        rewards_normalization=True,
        grpo_std_normalization=True,
        reward_key="score",
        n_samples_per_prompt=4,
        rollout_batch_size=1,
    )


def _miles_samples(with_failure: bool) -> list:
    types = pytest.importorskip("miles.utils.types")
    samples = []
    for i, r in enumerate(REWARDS):
        for step in range(i + 1):  # dynamic_history: a trajectory fans out into several samples
            samples.append(
                types.Sample(
                    group_index=0,
                    reward={"score": r, "acc": float(r > 0)},
                    metadata={"trajectory_id": f"t{i}", "instance_id": "x", "step": step},
                )
            )
    if with_failure:
        failed = types.Sample(
            group_index=0,
            reward={"score": 0.0, "acc": 0.0},
            remove_sample=True,
            metadata={"trajectory_id": "t-infra", "instance_id": "x"},
        )
        failed.status = types.Sample.Status.FAILED
        samples.insert(1, failed)
    return samples


def test_slime_miles_post_process_leaves_the_failed_sample_out_of_the_statistics():
    from swe_rl.integrations.slime import reward_post_process

    args = _miles_args()
    clean = reward_post_process(args, _miles_samples(False))[1]
    mixed_samples = _miles_samples(True)
    mixed = reward_post_process(args, mixed_samples)[1]
    kept = [a for a, s in zip(mixed, mixed_samples, strict=True) if not s.remove_sample]
    assert kept == pytest.approx(clean) and mixed[1] == 0.0
    assert clean[0] > 0 > clean[1] and len(set(clean[1:])) == 1  # a trajectory's samples share one
    # control (miles.ray.rollout needs IPython, absent here, so its RolloutManager is not run): the same
    # samples with the failure counted, as miles' default post-process counts a removed sample, differ
    naive_samples = _miles_samples(True)
    naive_samples[1].remove_sample = False
    naive = reward_post_process(args, naive_samples)[1]
    assert [a for k, a in enumerate(naive) if k != 1] != pytest.approx(clean)


def test_verl_swe_rl_grpo_leaves_a_row_without_loss_out_of_its_group():
    torch = pytest.importorskip("torch")
    pytest.importorskip("verl")
    import numpy as np
    from verl.trainer.ppo import core_algos

    import swe_rl.integrations.verl as verl_mod

    def rows(with_failure: bool):
        rewards = [*REWARDS, 0.0] if with_failure else REWARDS
        masks = [[1, 1, 0]] * 3 + ([[0, 0, 0]] if with_failure else [])
        scores = torch.zeros(len(rewards), 3)
        scores[:, -1] = torch.tensor(rewards)
        return scores, torch.tensor(masks, dtype=torch.float32), np.array(["g"] * len(rewards), dtype=object)

    estimator = core_algos.get_adv_estimator_fn(verl_mod.ADV_ESTIMATOR)
    clean, _ = estimator(*rows(False), config={"norm_adv_by_std_in_grpo": True})
    mixed, _ = estimator(*rows(True), config={"norm_adv_by_std_in_grpo": True})
    assert torch.allclose(mixed[:3], clean) and torch.all(mixed[3] == 0)
    # control: verl's own GRPO counts the failure's 0.0 in the group's mean and std
    own_clean, _ = core_algos.compute_grpo_outcome_advantage(*rows(False))
    own_mixed, _ = core_algos.compute_grpo_outcome_advantage(*rows(True))
    assert torch.allclose(own_clean, clean, atol=1e-5)
    assert not torch.allclose(own_mixed[:3], own_clean, atol=1e-3)
