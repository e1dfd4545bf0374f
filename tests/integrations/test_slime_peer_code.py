"""slime's own functions on the adapter's samples, from a slime checkout (slime is not on PyPI): set
``SWE_RL_SLIME_SRC`` to its repository root (read at THUDM/slime 624b824); every test skips without it.

What they run, as slime wrote it: ``Sample`` and ``get_reward_value`` (slime/utils/types.py), the
``--advantage-estimator`` choices and the reward arguments' defaults (slime/utils/arguments.py), the default
reward post-process ``RolloutManager._post_process_rewards`` and the conversion to train data
``_convert_samples_to_train_data`` (slime/ray/rollout.py; real rollouts through it, with
``validate_rollout_id_annotated`` of slime/observability/rollout_data_utils.py), the loss's response
slicing ``get_responses`` (slime/backends/megatron_utils/loss.py), the placeholder of slime's coding-agent
example (``_abort_result``, examples/coding_agent_rl/generate.py) and the fully-async worker's done
callback that requeues ABORTED groups (slime/rollout/fully_async_rollout.py). The same checks against miles'
installed code run in CI (test_slime_trainer_reward.py).
"""

from __future__ import annotations

import copy
import logging
import queue
from types import SimpleNamespace
from typing import Any

import pytest
from tests.integrations.peer_code import load_method, slime_argument, slime_default_post_process, slime_src

from swe_rl.episode.result import TrainingSample
from swe_rl.errors import ConfigError
from swe_rl.integrations.adapter_kit import infra_placeholder
from swe_rl.integrations.slime import ESTIMATORS, reward_post_process, to_trainer_sample

torch = pytest.importorskip("torch")

# trajectory, group, reward, steps: two prompts of four rollouts; a rollout fans out into `steps` samples
ROLLOUTS = [
    ("a0", 0, 1.0, 3),
    ("a1", 0, -1.0, 2),
    ("a2", 0, -1.0, 4),
    ("a3", 0, -1.0, 1),
    ("b0", 1, 1.0, 2),
    ("b1", 1, 1.0, 3),
    ("b2", 1, -1.0, 1),
    ("b3", 1, 1.0, 2),
]


def _samples(sample_cls: Any, *, fan_out: bool, kind: str = "float") -> list[Any]:
    """The adapter's samples (to_trainer_sample) of ROLLOUTS, one per step or one per rollout."""
    out = []
    for index, (trajectory, group, reward, steps) in enumerate(ROLLOUTS):
        for step in range(steps if fan_out else 1):
            ours = TrainingSample(
                tokens=[1, 2, 3, 4],
                prompt_length=2,
                loss_mask=[1, 1],
                rollout_logprobs=[-0.1, -0.2],
                reward=reward,
                resolved=reward > 0,
                status="completed" if reward > 0 else "aborted",
                instance_id=f"task-{group}",
                trajectory_id=trajectory,
                step_indices=[step],
            )
            template = sample_cls(index=index, group_index=group)
            out.append(to_trainer_sample(ours, template, sample_cls, kind=kind))
    return out


def _args(estimator: str = "grpo", **kw: Any) -> SimpleNamespace:
    base = dict(
        advantage_estimator=estimator,
        rewards_normalization=True,
        grpo_std_normalization=True,
        reward_key=None,
        n_samples_per_prompt=4,
        rollout_batch_size=2,
    )
    return SimpleNamespace(**{**base, **kw})


def test_the_estimators_and_reward_defaults_are_slimes(monkeypatch):
    root = slime_src(monkeypatch)
    estimator = slime_argument(root, "--advantage-estimator")
    assert set(estimator["choices"]) == set(ESTIMATORS) and estimator["default"] == "grpo"
    # the defaults test_slime_trainer_reward.slime_args assumes for the flags an invocation leaves out
    assert slime_argument(root, "--reward-key")["default"] is None
    assert slime_argument(root, "--eval-reward-key")["default"] is None
    assert slime_argument(root, "--custom-reward-post-process-path")["default"] is None
    for flag, dest in (
        ("--disable-rewards-normalization", "rewards_normalization"),
        ("--disable-grpo-std-normalization", "grpo_std_normalization"),
    ):
        declared = slime_argument(root, flag)
        assert (declared["action"], declared["dest"]) == ("store_false", dest)


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_reward_post_process_is_slimes_own_normalization_for_every_estimator(monkeypatch, estimator):
    root = slime_src(monkeypatch)
    from slime.utils.types import Sample

    slime_post = slime_default_post_process(root)
    # one sample per rollout, prompts x n of them: the layout slime's reshape groups right
    flat = _samples(Sample, fan_out=False)
    raw, theirs = slime_post(_args(estimator), flat)
    ours_raw, ours = reward_post_process(_args(estimator), flat)
    assert ours_raw == raw and ours == pytest.approx(theirs, abs=1e-5)
    if ESTIMATORS[estimator] is not None:
        assert theirs != raw  # normalized by slime: cispo too (swe-rl returned it raw before)
    # step samples: slime's count is not prompts x n and its default normalizes the batch as one group;
    # reward_post_process gives every step sample its rollout's advantage from the flat layout
    fanned = _samples(Sample, fan_out=True)
    by_rollout = dict(zip([s.metadata["trajectory_id"] for s in flat], theirs, strict=True))
    expected = [by_rollout[s.metadata["trajectory_id"]] for s in fanned]
    assert reward_post_process(_args(estimator), fanned)[1] == pytest.approx(expected, abs=1e-5)
    if ESTIMATORS[estimator] is not None:
        assert slime_post(_args(estimator), fanned)[1] != pytest.approx(expected, abs=1e-3)  # control


def test_slimes_reward_read_gets_the_float_and_the_dict_only_with_its_key(monkeypatch):
    root = slime_src(monkeypatch)
    from slime.utils.types import Sample

    floats = _samples(Sample, fan_out=True)
    assert {type(s.get_reward_value(_args())) for s in floats} == {float}
    dicts = _samples(Sample, fan_out=True, kind="dict")
    assert [s.get_reward_value(_args(reward_key="score")) for s in dicts] == [s.reward for s in floats]
    # control: the dict without --reward-key, the adapter's default before: slime hands the dict on and
    # its own default post-process cannot normalize it
    assert isinstance(dicts[0].get_reward_value(_args()), dict)
    with pytest.raises(TypeError):
        slime_default_post_process(root)(_args(), dicts)
    with pytest.raises(ConfigError, match="--reward-key"):
        reward_post_process(_args(), dicts)


def test_slimes_loss_slicing_takes_the_placeholder_and_not_a_zero_length_one(monkeypatch):
    root = slime_src(monkeypatch)
    loss = pytest.importorskip("slime.backends.megatron_utils.loss")
    from slime.utils.types import Sample

    monkeypatch.setattr(loss.mpu, "get_context_parallel_world_size", lambda: 1)
    placeholder = to_trainer_sample(infra_placeholder("x"), Sample(index=3), Sample)
    assert placeholder.status == Sample.Status.ABORTED and placeholder.remove_sample
    assert len(placeholder.loss_mask) == placeholder.response_length == 1

    def sliced(samples: list[Any]) -> list[tuple[int, int]]:
        total = [len(s.tokens) for s in samples]
        return [
            (lg.size(0), tk.size(0))
            for lg, tk in loss.get_responses(
                torch.randn(1, sum(total), 8),
                args=SimpleNamespace(rollout_temperature=1.0),
                unconcat_tokens=[torch.tensor(s.tokens) for s in samples],
                total_lengths=total,
                response_lengths=[s.response_length for s in samples],
            )
        ]

    assert sliced([placeholder]) == [(1, 1)]
    # the shape of slime's own coding-agent example's placeholder (examples/coding_agent_rl/generate.py)
    abort_result = load_method(
        root / "examples" / "coding_agent_rl" / "generate.py",
        None,
        "_abort_result",
        {"Sample": Sample, "logger": logging.getLogger("slime-test")},
    )
    [theirs] = abort_result(Sample(index=3), "exception:X", "x")
    shape = (
        "tokens",
        "response_length",
        "loss_mask",
        "rollout_log_probs",
        "reward",
        "remove_sample",
        "status",
    )
    assert [getattr(placeholder, f) for f in shape] == [getattr(theirs, f) for f in shape]
    # control: tokens [0] with response length 0 (the placeholder before): tokens[-0:] is all of it
    assert sliced([Sample(tokens=[0], response_length=0)]) == [(0, 1)]


def test_slimes_fully_async_requeue_never_takes_an_agents_failure(monkeypatch):
    root = slime_src(monkeypatch)
    from slime.utils.types import Sample

    make_done_cb = load_method(
        root / "slime" / "rollout" / "fully_async_rollout.py",
        "AsyncRolloutWorker",
        "_make_done_cb",
        {"Sample": Sample, "logger": logging.getLogger("slime-test")},
    )

    class Buffer:
        def __init__(self) -> None:
            self.requeued: list[Any] = []

        def add_samples(self, groups: list[Any]) -> None:
            self.requeued.extend(groups)

    def route(group: list[Any]) -> str:
        worker = SimpleNamespace(data_buffer=Buffer(), output_queue=queue.Queue())
        task = SimpleNamespace(result=lambda: group)
        make_done_cb(worker, 0)(task)
        return (
            "requeued"
            if worker.data_buffer.requeued
            else ("trained" if worker.output_queue.qsize() else "lost")
        )

    samples = _samples(Sample, fan_out=True)
    failure = [s for s in samples if s.metadata["trajectory_id"] == "a1"]
    resolved = [s for s in samples if s.metadata["trajectory_id"] == "a0"]
    assert {s.status for s in failure} == {Sample.Status.COMPLETED}
    # the adapter's group (one list per rollout) and a flat one (a generate returning single samples)
    assert route([resolved, failure]) == "trained"
    assert route([resolved[0], failure[0]]) == "trained"
    # control: the agent's failure marked ABORTED, as before: slime requeues the flat group, so the
    # failure is never trained on (the resolved rollout beside it is run again)
    failure[0].status = Sample.Status.ABORTED
    assert route([resolved[0], failure[0]]) == "requeued"


@pytest.mark.ns
async def test_slimes_train_data_holds_swe_rls_reward_for_real_rollouts(
    monkeypatch, task_by_id, envs, shared_executors
):
    """Real rollouts (ns sandboxes, grading, a token-level server; only the model is scripted) with slime's
    ``Sample`` as the template, through slime's ``validate_rollout_id_annotated`` and its
    ``_convert_samples_to_train_data`` with the post-process the invocation names."""
    root = slime_src(monkeypatch)
    from slime.observability.rollout_data_utils import (
        validate_rollout_id_annotated,
        validate_rollout_routed_experts_for_replay,
    )
    from slime.utils.data import get_source
    from slime.utils.types import Sample

    from swe_rl.integrations.slime import generate
    from swe_rl.llm.fake_server import FakeLLMServer
    from swe_rl.llm.oracle import oracle_policy
    from swe_rl.rl.tokenizer import qwen_tokenizer

    monkeypatch.setenv("SWE_RL_TOKENIZER", "qwen")
    monkeypatch.setenv("SWE_RL_BACKEND", "ns")
    monkeypatch.setenv("SWE_RL_STEP_LIMIT", "4")
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    args = _args(
        n_samples_per_prompt=3, rollout_batch_size=1, rollout_top_p=1.0, use_rollout_routing_replay=False
    )

    async def one(policy: Any, index: int) -> list[Any]:
        incoming = Sample(
            index=index, group_index=0, prompt=task.problem_statement, metadata={"instance": task.to_record()}
        )
        if policy is None:  # nothing listens on port 1: an infrastructure failure
            run = SimpleNamespace(**vars(args), sglang_router_ip="127.0.0.1", sglang_router_port=1)
            return await generate(run, incoming, {"max_new_tokens": 8})
        async with FakeLLMServer(policy, tokenizer=qwen_tokenizer()) as server:
            run = SimpleNamespace(**vars(args), sglang_router_ip="127.0.0.1", sglang_router_port=server.port)
            return await generate(run, incoming, {"max_new_tokens": 256})

    group = [
        await one(oracle_policy([task]), 0),
        await one(lambda _: "I will think about it, without any command.", 1),
        await one(None, 2),
    ]
    validate_rollout_id_annotated([group])  # prompts x rollouts x samples, as slime's rollout returns it
    samples = [s for rollout in group for s in rollout]
    convert = load_method(
        root / "slime" / "ray" / "rollout.py",
        "RolloutManager",
        "_convert_samples_to_train_data",
        {
            "torch": torch,
            "Sample": Sample,
            "get_source": get_source,
            "validate_rollout_routed_experts_for_replay": validate_rollout_routed_experts_for_replay,
        },
    )
    slime_post = slime_default_post_process(root)

    def train_data(post: Any) -> dict[str, Any]:
        manager = SimpleNamespace(args=args, custom_convert_samples_to_train_data_func=None)
        manager._post_process_rewards = lambda batch: post(args, batch)
        return convert(manager, [copy.deepcopy(s) for s in samples])  # type: ignore[no-any-return]

    data = train_data(reward_post_process)
    firsts = [samples.index(rollout[0]) for rollout in group]
    assert [data["raw_reward"][i] for i in firsts] == [1.0, -1.0, 0.0]
    # GRPO over the two healthy rollouts (+-1/sqrt(2)); the infrastructure failure 0, its loss mask 0
    assert [data["rewards"][i] for i in firsts] == pytest.approx([2**-0.5, -(2**-0.5), 0.0], abs=1e-5)
    assert data["loss_masks"][firsts[2]] == [0] and len(set(data["rollout_ids"])) == 3
    for rollout in group:  # every step sample of a rollout carries its rollout's advantage
        first = samples.index(rollout[0])
        assert {data["rewards"][samples.index(s)] for s in rollout} == {data["rewards"][first]}
    # control: slime's default post-process on the same batch counts the placeholder's 0.0 and, the
    # count not being prompts x n, normalizes the whole batch as one group: other advantages
    default = train_data(slime_post)
    assert [default["rewards"][i] for i in firsts] != pytest.approx([2**-0.5, -(2**-0.5), 0.0], abs=1e-3)
