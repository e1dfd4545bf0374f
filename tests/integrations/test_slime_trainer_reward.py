"""The reward slime's and miles' own code trains on is swe-rl's reward (issue 58, item 9).

Real rollouts (ns sandboxes, grading, the adapter's ``generate`` against a token-level server on loopback;
only the model is scripted) go through the invocation docs/TRAINING.md documents and the one each launch
script submits (run with a stand-in ``ray`` that records its arguments), then through miles' own code from
the installed miles-rl package: ``Sample.get_reward_value``, the reward post-process the invocation names
(else miles' default ``RolloutManager._post_process_rewards``), the ``check_no_aborted`` filter of miles'
agent recipes, and the response slicing of its loss (``get_responses``). Each finding has its control: the
same samples as they were before (a dict reward, no post-process, an agent's failure marked ABORTED, a
placeholder of response length 0) fail in miles' code. slime's own functions are run by
test_slime_peer_code.py where a slime checkout is given (``SWE_RL_SLIME_SRC``).
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.integrations.peer_code import miles_default_post_process
from tests.integrations.test_launch_scripts import _resolve

from swe_rl.errors import ConfigError
from swe_rl.integrations.slime import generate, reward_func, reward_post_process, trainer_reward
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy

miles_types = pytest.importorskip("miles.utils.types")
filters = pytest.importorskip("miles.rollout.filter_hub.dynamic_sampling_filters")
tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "examples" / "launch"
SCRIPTS = sorted(p for p in LAUNCH.glob("*.sh") if p.name != "common.sh")
FORMAT_ERRORS = "I will think about it, without any command."  # no command, every turn: format_error_limit
TASK = "swe-rl-builtin__textkit-3"


@pytest.fixture(autouse=True)
def _settings(monkeypatch, shared_executors):
    monkeypatch.setenv("SWE_RL_TOKENIZER", "qwen")
    monkeypatch.setenv("SWE_RL_BACKEND", "ns")
    monkeypatch.delenv("SWE_RL_SLIME_REWARD", raising=False)


# --- the invocations, as documented and as the launch scripts submit them ---------------------------


def training_md_flags() -> list[str]:
    """The arguments of docs/TRAINING.md's slime invocation (its ``python train.py`` block)."""
    text = (ROOT / "docs" / "TRAINING.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "python train.py" in b)
    command = block[block.index("python train.py") :].replace("\\\n", " ")
    command = re.sub(r"#.*", "", command)
    return [w for w in shlex.split(command)[2:] if w != "..."]


def launch_flags(script: Path, tmp: Path) -> list[str]:
    """The arguments a launch script hands ``train.py``: the script run with a ``ray`` that records them."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    record = tmp / f"{script.stem}.args"
    ray = bindir / "ray"
    ray.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {record}\n')
    ray.chmod(0o755)
    models = tmp / "slime" / "scripts" / "models"
    models.mkdir(parents=True, exist_ok=True)
    for name in re.findall(r"^launch_slime \S+ \S+ (\S+)", script.read_text(), re.M):
        (models / name).write_text("MODEL_ARGS=(--num-layers 2)\n")
    env = {
        "PATH": f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp),
        "SLIME_DIR": str(tmp / "slime"),
        "HF_CKPT": str(tmp / "ckpt"),
        "PROMPT_DATA": str(tmp / "train.jsonl"),
        "EXPORT_ROOT": str(tmp / "out"),
        "SWE_RL_PRM_URL": "http://judge:8000/v1",
    }
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    words = record.read_text().splitlines()
    return words[words.index("--") + 3 :]  # after: -- python3 $SLIME_DIR/train.py


def slime_args(flags: list[str]) -> SimpleNamespace:
    """The arguments slime parses from ``flags`` that the reward path reads (slime's defaults otherwise;
    test_slime_peer_code.py checks these defaults against slime's arguments.py)."""
    args = SimpleNamespace(
        reward_key=None,
        eval_reward_key=None,
        advantage_estimator="grpo",
        rewards_normalization=True,
        grpo_std_normalization=True,
        custom_reward_post_process_path=None,
        n_samples_per_prompt=1,
        rollout_batch_size=1,
    )
    for i, word in enumerate(flags):
        if word == "--disable-rewards-normalization":
            args.rewards_normalization = False
        elif word == "--disable-grpo-std-normalization":
            args.grpo_std_normalization = False
        elif word.startswith("--") and word[2:].replace("-", "_") in vars(args):
            value: Any = flags[i + 1]
            if word in ("--n-samples-per-prompt", "--rollout-batch-size"):
                value = int(value)
            setattr(args, word[2:].replace("-", "_"), value)
    return args


def invocations(tmp: Path) -> dict[str, SimpleNamespace]:
    out = {"docs/TRAINING.md": slime_args(training_md_flags())}
    for script in SCRIPTS:
        out[script.name] = slime_args(launch_flags(script, tmp))
    return out


# --- real rollouts through the adapter --------------------------------------------------------------


async def rollout(task: Any, policy: Any, args: SimpleNamespace, *, index: int, group: int) -> list[Any]:
    """The adapter's samples of one rollout, with the trainer's arguments ``args``."""
    incoming = miles_types.Sample(
        index=index, group_index=group, prompt=task.problem_statement, metadata={"instance": task.to_record()}
    )
    if policy is None:  # nothing listens on port 1: the model is unreachable, an infrastructure failure
        run = SimpleNamespace(**vars(args), sglang_router_ip="127.0.0.1", sglang_router_port=1)
        return await generate(run, incoming, {"max_new_tokens": 8})
    async with FakeLLMServer(policy, tokenizer=tokenizer_mod.qwen_tokenizer()) as server:
        run = SimpleNamespace(**vars(args), sglang_router_ip="127.0.0.1", sglang_router_port=server.port)
        return await generate(run, incoming, {"max_new_tokens": 256})


def per_trajectory(samples: list[Any], values: list[float]) -> list[float]:
    """One value per trajectory (its first sample's), in order."""
    seen: dict[str, float] = {}
    for s, v in zip(samples, values, strict=True):
        seen.setdefault(s.metadata["trajectory_id"], v)
    return list(seen.values())


@pytest.mark.ns
async def test_the_documented_invocation_and_every_launch_script_train_on_swe_rls_reward(
    task_by_id, envs, tmp_path
):
    task = task_by_id[TASK]
    envs.ensure(task)
    runs = invocations(tmp_path)
    assert set(runs) == {"docs/TRAINING.md", *(s.name for s in SCRIPTS)} and len(runs) >= 5
    for name, args in runs.items():
        assert args.custom_reward_post_process_path == "swe_rl.integrations.slime.reward_post_process", name
    assert {(a.reward_key, a.eval_reward_key) for a in runs.values()} == {(None, None)}  # one reward shape
    args = runs["docs/TRAINING.md"]
    gold = oracle_policy([task])
    # group 0: a resolved rollout and an agent that never issues a command; group 1: two resolved ones
    groups = [
        [
            await rollout(task, gold, args, index=0, group=0),
            await rollout(task, lambda _: FORMAT_ERRORS, args, index=1, group=0),
        ],
        [
            await rollout(task, gold, args, index=2, group=1),
            await rollout(task, gold, args, index=3, group=1),
        ],
    ]
    samples = [s for group in groups for rollout_samples in group for s in rollout_samples]
    assert len(samples) > 4  # dynamic_history: the rollouts fanned out into step samples
    failure = groups[0][1]
    assert {s.metadata["swe_rl_status"] for s in failure} == {"aborted"}
    Status = miles_types.Sample.Status
    assert {s.status for s in samples} == {Status.COMPLETED}
    for name, args in runs.items():
        # miles' own reward read gives swe-rl's reward, a float
        raw = [s.get_reward_value(args) for s in samples]
        assert all(type(r) is float for r in raw), name
        assert per_trajectory(samples, raw) == [1.0, -1.0, 1.0, 1.0], name
        post = _resolve(args.custom_reward_post_process_path)
        got_raw, adv = post(args, samples)
        assert got_raw == raw
        # GRPO per group, each rollout once: group 0 is +-1/sqrt(2) (torch's unbiased std), group 1 all 0
        expected = [1 / math.sqrt(2), -1 / math.sqrt(2), 0.0, 0.0]
        assert per_trajectory(samples, adv) == pytest.approx(expected, abs=1e-5), name
        # miles' agent recipes filter groups with check_no_aborted: both groups stay, the failure scored
        for group in groups:
            assert filters.check_no_aborted(args, group).keep, name
    assert await reward_func(args, samples) == raw

    # control 1: the seed's dict reward, which the adapter gave without --reward-key before: miles'
    # get_reward_value hands the dict on, and miles' default post-process fails on it
    dict_samples = [copy.copy(s) for s in samples]
    for s in dict_samples:
        s.reward = trainer_reward(s.reward, s.reward > 0, "dict")
    assert isinstance(dict_samples[0].get_reward_value(args), dict)
    with pytest.raises(TypeError):
        miles_default_post_process()(args, dict_samples)
    with pytest.raises(ConfigError, match="--reward-key"):
        reward_post_process(args, dict_samples)
    # control 2: without the post-process, miles' default one sees a sample count that is not prompts x n
    # and normalizes the whole batch as one group: group 1's resolved rollouts get a nonzero advantage
    _, default_adv = miles_default_post_process()(args, samples)
    assert per_trajectory(samples, default_adv)[2] > 0.1
    # control 3: the agent's failure marked ABORTED, as before: check_no_aborted drops its whole group,
    # the resolved rollout and the failure with it (the failure is never scored)
    failure[0].status = Status.ABORTED
    assert not filters.check_no_aborted(args, groups[0]).keep


@pytest.mark.ns
async def test_an_infrastructure_failure_is_aborted_removed_and_sliceable_by_miles_loss(
    task_by_id, monkeypatch, tmp_path, request
):
    torch = pytest.importorskip("torch")
    loss = pytest.importorskip("miles.backends.training_utils.loss")
    parallel = pytest.importorskip("miles.backends.training_utils.parallel")
    task = task_by_id[TASK]
    monkeypatch.setenv("SWE_RL_STEP_LIMIT", "2")
    args = slime_args(training_md_flags())
    [placeholder] = await rollout(task, None, args, index=5, group=0)
    Status = miles_types.Sample.Status
    assert placeholder.status == Status.ABORTED and placeholder.remove_sample
    assert placeholder.metadata["swe_rl_status"] == "infra_error" and placeholder.index == 5
    assert (
        len(placeholder.loss_mask) == placeholder.response_length == len(placeholder.rollout_log_probs) == 1
    )
    assert placeholder.loss_mask == [0] and placeholder.get_reward_value(args) == 0.0
    # miles' agent recipes drop the group it is in (nothing of it scored)
    assert not filters.check_no_aborted(args, [[placeholder]]).keep

    dist = torch.distributed
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    request.addfinalizer(dist.destroy_process_group)
    group = parallel.GroupInfo(rank=0, size=1, group=dist.group.WORLD)
    monkeypatch.setattr(parallel, "_parallel_state", parallel.ParallelState(*[group] * 7))
    largs = SimpleNamespace(
        qkv_format="thd",
        true_on_policy_mode=False,
        rollout_temperature=1.0,
        allgather_cp=False,
        log_probs_chunk_size=-1,
    )

    def sliced(samples: list[Any]) -> list[tuple[int, int]]:
        tokens = [torch.tensor(s.tokens) for s in samples]
        total = [len(s.tokens) for s in samples]
        logits = torch.randn(1, sum(total), 16, dtype=torch.float32)
        return [
            (lg.size(0), tk.size(0))
            for lg, tk in loss.get_responses(
                logits,
                args=largs,
                unconcat_tokens=tokens,
                total_lengths=total,
                response_lengths=[s.response_length for s in samples],
            )
        ]

    assert sliced([placeholder]) == [(1, 1)]  # one logit row for its one response token
    out = loss.get_log_probs_and_entropy(
        torch.randn(1, len(placeholder.tokens), 16),
        args=largs,
        unconcat_tokens=[torch.tensor(placeholder.tokens)],
        total_lengths=[len(placeholder.tokens)],
        response_lengths=[placeholder.response_length],
    )
    assert out["log_probs"][0].shape == (1,)
    # control: the placeholder as it was (tokens [0], response length 0): tokens[-0:] is the whole
    # sequence, so the tokens handed on with the (empty) logits slice are not the response's
    before = miles_types.Sample(tokens=[0], response_length=0, loss_mask=[], rollout_log_probs=[])
    assert sliced([before]) == [(0, 1)]
    assert sliced([placeholder, before]) == [(1, 1), (0, 1)]


def _flat_samples(rewards: list[float]) -> list[Any]:
    """One sample per rollout, two prompts of len(rewards)/2 rollouts (the layout slime reshapes right)."""
    half = len(rewards) // 2
    return [
        miles_types.Sample(
            group_index=i // half,
            index=i,
            reward=r,
            metadata={"trajectory_id": f"t{i}", "instance_id": f"x{i // half}"},
        )
        for i, r in enumerate(rewards)
    ]


# slime 624b824's --advantage-estimator choices (test_slime_peer_code.py reads them from slime's arguments.py)
SLIME_ESTIMATORS = ["grpo", "gspo", "cispo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "ppo"]


@pytest.mark.parametrize("estimator", SLIME_ESTIMATORS)
def test_every_estimator_normalizes_as_miles_does_and_cispo_as_grpo(estimator):
    rewards = [1.0, -1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0]
    args = SimpleNamespace(
        advantage_estimator=estimator,
        rewards_normalization=True,
        grpo_std_normalization=True,
        reward_key=None,
        n_samples_per_prompt=4,
        rollout_batch_size=2,
    )
    raw, ours = reward_post_process(args, _flat_samples(rewards))
    assert raw == rewards
    if estimator == "cispo":  # slime normalizes cispo as grpo and gspo (slime/ray/rollout.py at 624b824)
        grpo = reward_post_process(
            SimpleNamespace(**{**vars(args), "advantage_estimator": "grpo"}), _flat_samples(rewards)
        )
        assert ours == pytest.approx(grpo[1]) and ours != raw  # before: returned raw
    else:  # miles-rl's own default post-process on a batch whose layout it reshapes right
        assert ours == pytest.approx(miles_default_post_process()(args, _flat_samples(rewards))[1], abs=1e-5)


def test_an_unknown_estimator_fails_loudly_instead_of_passing_rewards_raw():
    args = SimpleNamespace(advantage_estimator="grpo_next", rewards_normalization=True, reward_key=None)
    with pytest.raises(ConfigError, match="grpo_next"):
        reward_post_process(args, _flat_samples([1.0, -1.0]))


async def test_the_reward_shape_follows_the_trainers_reward_key(monkeypatch):
    samples = _flat_samples([1.0, -1.0])
    assert await reward_func(SimpleNamespace(reward_key=None), []) == []
    assert await reward_func(SimpleNamespace(reward_key=None), miles_types.Sample()) == 0.0
    assert await reward_func(SimpleNamespace(reward_key="score"), miles_types.Sample()) == {
        "score": 0.0,
        "acc": 0.0,
    }
    assert await reward_func(SimpleNamespace(reward_key=None), samples) == [1.0, -1.0]
    for args, match in (
        (SimpleNamespace(reward_key="acc"), "--reward-key 'acc'"),
        (SimpleNamespace(reward_key=None, eval_reward_key="acc"), "--eval-reward-key without"),
    ):
        with pytest.raises(ConfigError, match=match):
            await reward_func(args, miles_types.Sample())
    monkeypatch.setenv("SWE_RL_SLIME_REWARD", "dict")
    with pytest.raises(ConfigError, match="SWE_RL_SLIME_REWARD=dict"):
        await reward_func(SimpleNamespace(reward_key=None), miles_types.Sample())
    assert await reward_func(SimpleNamespace(reward_key="score"), miles_types.Sample()) == {
        "score": 0.0,
        "acc": 0.0,
    }
    monkeypatch.setenv("SWE_RL_SLIME_REWARD", "float")
    with pytest.raises(ConfigError, match="SWE_RL_SLIME_REWARD=float"):
        await reward_func(SimpleNamespace(reward_key="score"), miles_types.Sample())
