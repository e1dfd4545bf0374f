"""The SkyRL generator against SkyRL's GeneratorOutput contract, real sandboxes and a token-level SGLang
server on loopback (the scripted oracle plays the policy).

SkyRL (PyPI ``skyrl``, which defines GeneratorOutput) needs Python >= 3.12 and pulls a CUDA torch there, so it
is not in the test venv (bench/skyrl_advantages.py runs its own validation and estimators on the adapter's
outputs by hand); its contract is restated below from its source, not imported: the TypedDict ``GeneratorOutput`` and
dataclass ``TrajectoryID`` in NovaSky-AI/SkyRL ``skyrl/train/generators/base.py`` (commit a9564572eb8e;
``skyrl-train/skyrl_train/generators/base.py`` in older trees), and the invariants its trainer asserts in
``validate_generator_output`` / ``_validate_step_wise_fields`` (``skyrl/train/utils/trainer_utils.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from swe_rl.errors import ConfigError, InfraError
from swe_rl.executors import get_executor
from swe_rl.executors.base import Policy
from swe_rl.integrations.skyrl import SkyRLGenerator
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer, Fault
from swe_rl.llm.oracle import oracle_policy

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)

Check = Callable[[Any], bool]


def list_of(item: Check) -> Check:
    return lambda v: isinstance(v, list) and all(item(x) for x in v)


def optional(check: Check) -> Check:
    return lambda v: v is None or check(v)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_float(v: Any) -> bool:
    return isinstance(v, float | int) and not isinstance(v, bool)


# GeneratorOutput's keys and their annotated types (List[List[int]], Union[List[float], List[List[float]]],
# Optional[...]), one line each as SkyRL writes them.
GENERATOR_OUTPUT: dict[str, Check] = {
    "prompt_token_ids": list_of(list_of(is_int)),
    "response_ids": list_of(list_of(is_int)),
    "rewards": lambda v: list_of(is_float)(v) or list_of(list_of(is_float))(v),
    "loss_masks": list_of(list_of(is_int)),
    "stop_reasons": optional(list_of(lambda x: isinstance(x, str))),
    "rollout_metrics": optional(lambda v: isinstance(v, dict)),
    "rollout_logprobs": optional(list_of(list_of(is_float))),
    "trajectory_ids": optional(lambda v: isinstance(v, list)),
    "trajectory_generation_times": optional(list_of(is_float)),
    "trajectory_time_splits": optional(lambda v: isinstance(v, dict)),
    "rollout_expert_indices": optional(lambda v: isinstance(v, list)),
    "is_last_step": optional(list_of(lambda x: isinstance(x, bool))),
    "env_metrics": optional(list_of(lambda x: isinstance(x, dict))),
    "pixel_values": optional(lambda v: isinstance(v, list)),
    "image_grid_thw": optional(lambda v: isinstance(v, list)),
}
# keys the trainer indexes directly (generator_output[key]) rather than with .get()
READ_DIRECTLY = {
    "prompt_token_ids",
    "response_ids",
    "rewards",
    "loss_masks",
    "rollout_metrics",
    "rollout_logprobs",
}


@dataclass(frozen=True)
class TrajectoryID:
    """SkyRL's TrajectoryID: instance_id, repetition_id, to_string() -> f"{instance_id}_{repetition_id}"."""

    instance_id: str
    repetition_id: int

    def to_string(self) -> str:
        return f"{self.instance_id}_{self.repetition_id}"


def check_generator_output(out: dict[str, Any], num_prompts: int, *, step_wise: bool) -> None:
    """The schema and the trainer's own checks on a generator's output."""
    assert set(out) <= set(GENERATOR_OUTPUT), set(out) - set(GENERATOR_OUTPUT)
    assert set(out) >= READ_DIRECTLY
    for key, check in GENERATOR_OUTPUT.items():
        if key in out:
            assert check(out[key]), key
    n = len(out["response_ids"])
    assert n > 0 and len(out["prompt_token_ids"]) == n
    if not step_wise:
        assert n == num_prompts
    for key in (
        "loss_masks",
        "rewards",
        "rollout_logprobs",
        "stop_reasons",
        "trajectory_ids",
        "is_last_step",
    ):
        if isinstance(out.get(key), list):
            assert len(out[key]) == n, key
    for i, (resp, mask) in enumerate(zip(out["response_ids"], out["loss_masks"], strict=True)):
        assert len(resp) == len(mask) and set(mask) <= {0, 1}
        if out["rollout_logprobs"]:
            assert len(out["rollout_logprobs"][i]) == len(resp)
    if step_wise:
        last = out["is_last_step"]
        tids = [t.to_string() if hasattr(t, "to_string") else str(t) for t in out["trajectory_ids"]]
        assert last[-1] is True
        finished: set[str] = set()
        for i in range(n - 1):
            assert last[i] == (tids[i] != tids[i + 1])  # boundaries only where the trajectory changes
            if last[i]:
                finished.add(tids[i])
                assert tids[i + 1] not in finished  # each trajectory's steps are contiguous


def generated_runs(mask: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each run of 1s."""
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


@pytest.fixture(autouse=True)
def _settings(monkeypatch):
    monkeypatch.setenv("SWE_RL_BACKEND", "ns")
    monkeypatch.delenv("SWE_RL_POLICY_URL", raising=False)


@pytest.fixture(scope="module")
def tok():
    return tokenizer_mod.qwen_tokenizer()


def _batch(tasks, groups: list[str]) -> dict[str, Any]:
    return {
        "prompts": [[{"role": "user", "content": t.problem_statement}] for t in tasks],
        "env_classes": ["swe_rl"] * len(tasks),
        "env_extras": [{"instance": t.to_record()} for t in tasks],
        "sampling_params": {"max_tokens": 256, "temperature": 1.0, "top_p": 1.0},
        "trajectory_ids": [TrajectoryID(g, i) for i, g in enumerate(groups)],
        "batch_metadata": None,
    }


@pytest.mark.ns
async def test_one_exact_multi_turn_output_per_prompt(task_by_id, envs, tok):
    tasks = [task_by_id["swe-rl-builtin__textkit-1"], task_by_id["swe-rl-builtin__textkit-3"]]
    for t in tasks:
        envs.ensure(t)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    async with FakeLLMServer(oracle_policy(tasks), tokenizer=tok) as server:
        gen = SkyRLGenerator(
            Policy(url=server.url, kind="sglang", tokenizer="qwen"), executor=get_executor("local:ns")
        )
        out = await gen.generate(_batch(tasks, ["a", "b"]))
    check_generator_output(out, 2, step_wise=False)
    assert out["rewards"] == [1.0, 1.0] and out["stop_reasons"] == ["stop", "stop"]
    assert out["rollout_metrics"]["swe_rl/resolve_rate"] == 1.0
    sent = [r["input_ids"] for r in server.requests]
    for prompt, response, mask in zip(
        out["prompt_token_ids"], out["response_ids"], out["loss_masks"], strict=True
    ):
        full = [*prompt, *response]
        mine = sorted((s for s in sent if full[: len(s)] == s), key=len)  # this trajectory's requests
        assert mine[0] == prompt  # the prompt is exactly the first request
        # one run of generated ids per request, starting where the request ended, ending at the end token
        runs = generated_runs(mask)
        assert [start for start, _ in runs] == [len(s) - len(prompt) for s in mine]
        for start, end in runs:
            assert response[end - 1] == eos and eos not in response[start : end - 1]
        assert len(mine) >= 2 and sum(mask) < len(mask)  # observations in between are masked out


@pytest.mark.ns
async def test_step_wise_outputs_are_the_exact_steps(task_by_id, envs, tok):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    async with FakeLLMServer(oracle_policy([task]), tokenizer=tok) as server:
        gen = SkyRLGenerator(
            Policy(url=server.url, tokenizer="qwen"), step_wise=True, executor=get_executor("local:ns")
        )
        out = await gen.generate(_batch([task], ["t"]))
    check_generator_output(out, 1, step_wise=True)
    sent = [r["input_ids"] for r in server.requests]
    assert out["prompt_token_ids"] == sent
    assert out["is_last_step"] == [False] * (len(sent) - 1) + [True]
    assert all(t == TrajectoryID("t", 0) for t in out["trajectory_ids"])
    assert all(set(m) == {1} for m in out["loss_masks"]) and set(out["rewards"]) == {1.0}


@pytest.mark.ns
async def test_infra_failures_are_never_scored(task_by_id, envs, tok):
    good, bad = task_by_id["swe-rl-builtin__textkit-1"], task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(good)
    oracle = oracle_policy([good])

    def policy(messages):  # the server refuses every request about the second task
        about_bad = any(bad.problem_statement.strip() in m.get("content", "") for m in messages)
        return Fault(status=400) if about_bad else oracle(messages)

    async with FakeLLMServer(policy, tokenizer=tok) as server:
        executor = get_executor("local:ns")
        per_traj = SkyRLGenerator(Policy(url=server.url), executor=executor, filler_id=7)
        out = await per_traj.generate(_batch([good, bad], ["g", "g"]))
        check_generator_output(out, 2, step_wise=False)
        assert out["stop_reasons"] == ["stop", "infra_error"]
        # the failed one carries no loss and the group's healthy mean: GRPO's group mean is unchanged
        assert out["loss_masks"][1] == [0] and out["response_ids"][1] == [7]
        assert out["rewards"] == [1.0, 1.0] and out["rollout_metrics"]["swe_rl/infra_errors"] == 1.0
        assert out["rollout_metrics"]["swe_rl/infra_retries"] == 2.0  # run again twice, failed each time

        step_wise = SkyRLGenerator(Policy(url=server.url), step_wise=True, executor=executor)
        out = await step_wise.generate(_batch([good, bad], ["g", "g"]))
        check_generator_output(out, 2, step_wise=True)
        assert {t.repetition_id for t in out["trajectory_ids"]} == {0}  # the failed trajectory is left out

        # a group whose every trajectory failed keeps one placeholder step: SkyRL's trainer asserts that
        # every prompt of the batch is there (compute_prompt_mini_batch_boundaries: one uid per prompt)
        out = await step_wise.generate(_batch([good, bad, bad], ["g", "h", "h"]))
        check_generator_output(out, 3, step_wise=True)
        assert [t.instance_id for t in out["trajectory_ids"]][-1] == "h"
        assert {t.instance_id for t in out["trajectory_ids"]} == {"g", "h"}
        assert (out["loss_masks"][-1], out["rewards"][-1], out["stop_reasons"][-1]) == (
            [0],
            0.0,
            "infra_error",
        )
        assert out["is_last_step"][-1] is True and out["rollout_metrics"]["swe_rl/infra_errors"] == 2.0

        with pytest.raises(InfraError, match="infrastructure"):
            await step_wise.generate(_batch([bad], ["g"]))


@pytest.mark.ns
async def test_a_rollout_failed_by_infrastructure_is_run_again_per_trajectory(task_by_id, envs, tok):
    """Per trajectory every output counts in its group's statistics (a placeholder moves the std and RLOO's
    baselines: bench/skyrl_advantages.py), so a rollout that failed on infrastructure is run again first."""
    good, flaky = task_by_id["swe-rl-builtin__textkit-1"], task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(good)
    envs.ensure(flaky)
    oracle = oracle_policy([good, flaky])
    refused: list[int] = []

    def policy(messages):  # the server refuses the first request about the second task only
        about_flaky = any(flaky.problem_statement.strip() in m.get("content", "") for m in messages)
        if about_flaky and not refused:
            refused.append(1)
            return Fault(status=400)
        return oracle(messages)

    async with FakeLLMServer(policy, tokenizer=tok) as server:
        executor = get_executor("local:ns")
        no_retry = SkyRLGenerator(Policy(url=server.url), executor=executor, infra_retries=0)
        out = await no_retry.generate(_batch([good, flaky], ["g", "g"]))
        assert out["stop_reasons"] == ["stop", "infra_error"]  # the control: without a retry, a placeholder
        refused.clear()
        gen = SkyRLGenerator(Policy(url=server.url), executor=executor)
        out = await gen.generate(_batch([good, flaky], ["g", "g"]))
        check_generator_output(out, 2, step_wise=False)
        assert refused and out["stop_reasons"] == ["stop", "stop"] and out["rewards"] == [1.0, 1.0]
        assert 1 in out["loss_masks"][1] and out["rollout_metrics"]["swe_rl/infra_retries"] == 1.0
        assert out["rollout_metrics"]["swe_rl/infra_errors"] == 0.0
    with pytest.raises(ConfigError, match="infra_retries"):
        SkyRLGenerator(Policy(url="http://127.0.0.1:1"), infra_retries=-1)


def test_sampling_and_policy_from_skyrl_objects(monkeypatch):
    from types import SimpleNamespace as NS

    cfg = NS(
        generator=NS(
            sampling_params=NS(max_generate_length=1024, temperature=0.6, top_p=0.95),
            step_wise_trajectories=True,
        ),
        trainer=NS(policy=NS(model=NS(path="Qwen/Qwen3-8B"))),
    )
    client = NS(get_endpoint_url=lambda: "http://10.0.0.5:8000/")
    tokenizer = NS(name_or_path="qwen", pad_token_id=151643)
    gen = SkyRLGenerator.from_skyrl(cfg, tokenizer, client)
    assert gen.policy.url == "http://10.0.0.5:8000/v1" and gen.policy.kind == "openai"
    assert gen.policy.model == "Qwen/Qwen3-8B" and gen.step_wise and gen.filler_id == 151643
    assert gen.sampling == SamplingParams(max_tokens=1024, temperature=0.6, top_p=0.95)
    monkeypatch.setenv("SWE_RL_POLICY_URL", "http://10.0.0.6:30000")  # an SGLang server unless told otherwise
    gen = SkyRLGenerator.from_skyrl(cfg, tokenizer, client)
    assert gen.policy.url == "http://10.0.0.6:30000" and gen.policy.kind == "sglang"
    monkeypatch.setenv("SWE_RL_POLICY_KIND", "vllm")
    with pytest.raises(ConfigError, match="SWE_RL_POLICY_KIND"):
        SkyRLGenerator.from_skyrl(cfg, tokenizer, client)


@pytest.mark.ns
async def test_a_row_without_a_task_is_a_clear_error():
    gen = SkyRLGenerator(Policy(url="http://127.0.0.1:1"), executor=get_executor("local:ns"))
    with pytest.raises(ConfigError, match="instance"):
        await gen.generate({"prompts": [[]], "env_extras": [{"data_source": "x"}]})


def test_the_generator_is_skyrls_generator_interface_where_skyrl_is_installed():
    """SkyRL's trainer takes a GeneratorInterface; where skyrl is importable the generator is one (by subclass).
    SkyRL needs Python >= 3.12: not the test venv's, so this runs where it installs (checked by hand with skyrl
    0.3.0 on Python 3.12, see bench/skyrl_advantages.py)."""
    base = pytest.importorskip("skyrl.train.generators.base", exc_type=ImportError)
    assert issubclass(SkyRLGenerator, base.GeneratorInterface)
