"""Group-relative advantages (GRPO), computed per trajectory and broadcast to every sample it produced."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from swe_rl.episode.result import TrainingSample


def drop_infra_errors(samples: Sequence[TrainingSample]) -> list[TrainingSample]:
    """Infrastructure failures are not answers: they leave the batch instead of being scored."""
    return [s for s in samples if s.status != "infra_error"]


def grpo_advantages(
    samples: Sequence[TrainingSample], *, eps: float = 1e-6, scale: bool = True
) -> list[TrainingSample]:
    """Set ``advantage`` on each sample: its trajectory's reward against the other trajectories of its instance.

    Statistics are over trajectories, not over step samples: a trajectory that fans out into many
    dynamic_history samples counts once, and all its samples get the same advantage.
    """
    kept = drop_infra_errors(samples)
    rewards: dict[str, dict[str, float]] = {}
    for s in kept:
        if s.reward is None:
            raise ValueError(f"sample of {s.trajectory_id} has no reward")
        rewards.setdefault(s.instance_id, {})[s.trajectory_id] = s.reward
    for s in kept:
        group = list(rewards[s.instance_id].values())
        mean = statistics.fmean(group)
        std = statistics.pstdev(group) if len(group) > 1 else 0.0
        assert s.reward is not None
        s.advantage = (s.reward - mean) / (std + eps) if scale else s.reward - mean
    return kept


def healthy_group_advantages(
    rewards: Sequence[float],
    groups: Sequence[object],
    healthy: Sequence[bool],
    *,
    scale: bool = True,
    eps: float = 1e-6,
    unbiased: bool = True,
    single_mean: float | None = 0.0,
) -> list[float]:
    """Group-normalized advantages where only healthy entries make the statistics; the rest get 0.0.

    For trainers whose own group statistics would count an infrastructure failure's placeholder reward:
    each group's mean and std are over its healthy entries only, so a group with a failed entry gives
    the others exactly the advantages of the group without it. ``unbiased`` is torch.std's default (what
    slime/miles and verl use); a group with one healthy entry has mean ``single_mean`` and std 1 (verl's
    rule; None: its own reward, advantage 0).
    """
    members: dict[object, list[float]] = {}
    for reward, group, ok in zip(rewards, groups, healthy, strict=True):
        if ok:
            members.setdefault(group, []).append(reward)
    out = []
    for reward, group, ok in zip(rewards, groups, healthy, strict=True):
        if not ok:
            out.append(0.0)
            continue
        values = members[group]
        if len(values) == 1:
            mean, std = (values[0] if single_mean is None else single_mean), 1.0
        else:
            mean = statistics.fmean(values)
            std = statistics.stdev(values) if unbiased else statistics.pstdev(values)
        out.append((reward - mean) / (std + eps) if scale else reward - mean)
    return out
