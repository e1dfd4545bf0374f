"""miles' own code at its head on the adapter's samples: set ``SWE_RL_MILES_SRC`` to a radixark/miles
checkout (read at 31f1ca9); every test skips without it. The installed miles-rl (0.0.2) would shadow the
checkout in this process, so each check runs in a Python whose path starts with the checkout.

What runs, as miles wrote it: the default reward post-process (miles/ray/rollout/train_data_conversion.py,
grouping by ``group_index`` and counting each ``rollout_id`` once), the ``--advantage-estimator`` choices,
``check_no_aborted`` (miles/rollout/filter_hub/dynamic_sampling_filters.py) and the fully-async buffer's
``put`` (miles/rollout/fully_async_data_buffer.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import asyncio, json, math
from types import SimpleNamespace
from miles.utils.types import Sample
from swe_rl.episode.result import TrainingSample
from swe_rl.integrations.adapter_kit import infra_placeholder
from swe_rl.integrations.slime import reward_post_process, to_trainer_sample

ROLLOUTS = [("a0", 0, 1.0, 3), ("a1", 0, -1.0, 2), ("a2", 0, -1.0, 4), ("b0", 1, 1.0, 2), ("b1", 1, -1.0, 1)]

def samples_of(trajectory, group, reward, steps, index):
    out = []
    for step in range(steps):
        ours = TrainingSample(
            tokens=[1, 2, 3, 4], prompt_length=2, loss_mask=[1, 1], rollout_logprobs=[-0.1, -0.2],
            reward=reward, resolved=reward > 0, status="completed" if reward > 0 else "aborted",
            instance_id=f"task-{group}", trajectory_id=trajectory, step_indices=[step],
        )
        out.append(to_trainer_sample(ours, Sample(index=index, group_index=group), Sample))
    return out

def rollouts():
    return [samples_of(*r, index=i) for i, r in enumerate(ROLLOUTS)]

def placeholder(group, index):
    return to_trainer_sample(infra_placeholder(f"task-{group}"), Sample(index=index, group_index=group), Sample)

def args(estimator="grpo"):
    return SimpleNamespace(
        advantage_estimator=estimator, rewards_normalization=True, grpo_std_normalization=True,
        reward_key=None, n_samples_per_prompt=3, rollout_batch_size=2,
    )
"""


def run_miles_head(body: str) -> Any:
    root = os.environ.get("SWE_RL_MILES_SRC")
    if not root or not (Path(root) / "miles" / "rollout" / "fully_async_data_buffer.py").is_file():
        pytest.skip("SWE_RL_MILES_SRC does not name a miles checkout with its head's files")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, str(ROOT / "src"), str(ROOT)])}
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_miles_head_normalizes_per_group_and_rollout_as_reward_post_process_does():
    out = run_miles_head(
        """
        import miles, miles.ray.rollout.train_data_conversion as conv
        flat = [s for r in rollouts() for s in r]
        raw, theirs = conv._post_process_rewards(args(), flat, None)
        _, ours = reward_post_process(args(), flat)
        # with a removed sample: miles counts its 0.0 in the group's statistics, swe-rl's does not
        mixed = flat + [placeholder(0, 9)]
        _, theirs_mixed = conv._post_process_rewards(args(), mixed, None)
        _, ours_mixed = reward_post_process(args(), mixed)
        print(json.dumps({"file": miles.__file__, "raw": raw, "theirs": theirs, "ours": ours,
                          "theirs_mixed": theirs_mixed[:len(flat)], "ours_mixed": ours_mixed[:len(flat)]}))
        """
    )
    assert out["file"].startswith(os.environ["SWE_RL_MILES_SRC"])
    assert out["ours"] == pytest.approx(out["theirs"], abs=1e-5)  # miles head: by group_index, rollout once
    assert out["ours_mixed"] == pytest.approx(out["ours"], abs=1e-6)
    assert out["theirs_mixed"] != pytest.approx(out["theirs"], abs=1e-3)  # control: the failure counted


def test_miles_head_has_no_cispo_and_its_estimators_are_known():
    from swe_rl.integrations.slime import ESTIMATORS

    root = os.environ.get("SWE_RL_MILES_SRC")
    if not root:
        pytest.skip("SWE_RL_MILES_SRC does not name a miles checkout")
    text = (Path(root) / "miles" / "utils" / "arguments.py").read_text()
    start = text.index('"--advantage-estimator"')
    choices = text[text.index("choices=[", start) : text.index("]", text.index("choices=[", start))]
    names = set(json.loads("[" + choices.removeprefix("choices=[").strip().rstrip(",") + "]"))
    assert "cispo" not in names and names <= set(ESTIMATORS)


def test_miles_head_filter_and_fully_async_buffer_drop_only_infrastructure_failures():
    out = run_miles_head(
        """
        from miles.rollout.filter_hub.dynamic_sampling_filters import check_no_aborted
        from miles.rollout.fully_async_data_buffer import (
            DataBufferConstructorInput, DataBufferInput, DefaultDataBuffer,
        )
        a = SimpleNamespace(**vars(args()), dynamic_sampling_filter_path=None, async_data_buffer_capacity_factor=4)
        unused = []
        buffer = DefaultDataBuffer(DataBufferConstructorInput(args=a, unused_handler_fn=unused.append))
        r = rollouts()
        agents = [r[0], r[1]]                      # a resolved rollout and an agent's failure
        infra = [r[3], [placeholder(1, 9)]]        # a resolved rollout and an infrastructure failure
        keep = [check_no_aborted(a, agents).keep, check_no_aborted(a, infra).keep]
        asyncio.run(buffer.put(DataBufferInput(prompt_group=["p0"], group=agents)))
        asyncio.run(buffer.put(DataBufferInput(prompt_group=["p1"], group=infra)))
        buffered = len(buffer._buffer)
        # control: the agent's failure marked ABORTED, as swe-rl marked it before
        for s in r[1]:
            s.status = Sample.Status.ABORTED
        keep_old = check_no_aborted(a, agents).keep
        print(json.dumps({"keep": keep, "buffered": buffered, "unused": unused, "keep_old": keep_old}))
        """
    )
    assert out["keep"] == [True, False]  # the agent's group stays; the infra failure's is dropped
    assert out["buffered"] == 1 and out["unused"] == [["p1"]]  # the infra group recycled, never trained
    assert out["keep_old"] is False  # control: an ABORTED agent failure drops its whole group
