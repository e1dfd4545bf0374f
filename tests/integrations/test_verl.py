"""The verl agent loop against verl's real AgentLoopBase, registry and AgentLoopOutput (verl 0.9.1 imports on
CPU), real sandboxes and a token-level SGLang server on loopback (the scripted oracle plays the policy)."""

from __future__ import annotations

import pytest

from swe_rl.executors import get_executor
from swe_rl.executors.base import EpisodeRequest, Policy
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy

verl_adapter = pytest.importorskip(
    "swe_rl.integrations.verl", exc_type=ImportError
)  # MissingExtraError: an ImportError, not a ModuleNotFoundError
tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)
agent_loop = pytest.importorskip("verl.experimental.agent_loop.agent_loop")
hydra_utils = pytest.importorskip("hydra.utils")
omegaconf = pytest.importorskip("omegaconf")


@pytest.fixture(autouse=True)
def _settings(monkeypatch, shared_executors):
    monkeypatch.setenv("SWE_RL_TOKENIZER", "qwen")
    monkeypatch.setenv("SWE_RL_EXECUTOR", "local:ns")


@pytest.fixture(scope="module")
def tok():
    return tokenizer_mod.qwen_tokenizer()


def _instantiate(tok, prompt_length: int = 4096, response_length: int = 8192):
    """The agent loop as verl's AgentLoopWorker makes it: looked up by name, built by hydra."""
    config = omegaconf.OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"prompt_length": prompt_length, "response_length": response_length}
            },
            "data": {},
        }
    )
    return hydra_utils.instantiate(
        config=agent_loop._agent_loop_registry[verl_adapter.AGENT_NAME],
        trainer_config=agent_loop.DictConfigWrap(config),
        server_manager=None,
        tokenizer=tok,
        processor=None,
        hf_model_type=None,
        dataset_cls=None,
        data_config=agent_loop.DictConfigWrap(config.data),
        tools=agent_loop.ToolListWrap([]),
    )


@pytest.mark.ns
async def test_registered_loop_returns_exact_agent_loop_output(task_by_id, envs, tok, monkeypatch):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    loop = _instantiate(tok)
    assert isinstance(loop, verl_adapter.SweRlAgentLoop) and isinstance(loop, agent_loop.AgentLoopBase)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    async with FakeLLMServer(oracle_policy([task]), tokenizer=tok) as server:
        monkeypatch.setenv("SWE_RL_POLICY_URL", server.url)
        # what verl's worker passes: its sampling params, and the dataset row's fields as keywords
        out = await loop.run(
            {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True},
            raw_prompt=[{"role": "user", "content": task.problem_statement}],
            extra_info={"instance": task.to_record()},
            index=0,
        )
    assert isinstance(out, agent_loop.AgentLoopOutput)
    sent = [r["input_ids"] for r in server.requests]
    assert out.prompt_ids == sent[0] and out.reward_score == 1.0
    full = [*out.prompt_ids, *out.response_ids]
    assert all(full[: len(s)] == s for s in sent)  # every step's prompt is inside the sample, id for id
    p = len(out.prompt_ids)
    # generated ids: from where each request ended up to and including the end token; nothing else
    expected = [0] * len(out.response_ids)
    for s in sent:
        end = full.index(eos, len(s)) + 1
        expected[len(s) - p : end - p] = [1] * (end - len(s))
    assert out.response_mask == expected and 0 in expected
    assert len(out.response_logprobs) == len(out.response_ids)
    assert out.extra_fields["swe_rl_status"] == "completed" and out.extra_fields["swe_rl_resolved"] is True
    # verl's own conversion to its batch tensors; the reward sits on the last response token
    batch = out.as_dict()
    assert batch["prompts"].tolist() == out.prompt_ids
    assert batch["response_mask"].tolist() == expected
    assert batch["rm_scores"].tolist()[-1] == 1.0 and sum(batch["rm_scores"].tolist()) == 1.0


@pytest.mark.ns
async def test_limits_and_infra_failures(task_by_id, envs, tok):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    executor = get_executor("local:ns")

    def request(url: str) -> EpisodeRequest:
        return EpisodeRequest(
            task=task.to_record(),
            model=Policy(url=url, tokenizer="qwen"),
            sampling=SamplingParams(max_tokens=256, temperature=1.0),
            dynamic_history=False,
        )

    async with FakeLLMServer(oracle_policy([task]), tokenizer=tok) as server:
        result = await executor.run(request(server.url))
    full = verl_adapter.to_agent_loop_output(result, prompt_length=4096, response_length=8192)
    cut = verl_adapter.to_agent_loop_output(result, prompt_length=4096, response_length=40)
    assert cut.response_ids == full.response_ids[:40] and cut.response_mask == full.response_mask[:40]
    assert cut.extra_fields["swe_rl_truncated_response"] and cut.reward_score == 1.0
    # a first prompt verl would left-truncate is not trained on (mask 0), though the rollout counted
    long = verl_adapter.to_agent_loop_output(result, prompt_length=10, response_length=8192, filler_id=5)
    assert long.response_mask == [0] and long.prompt_ids == [5]
    assert long.extra_fields["swe_rl_status"] == "prompt_too_long"

    failed = await executor.run(request("http://127.0.0.1:1"))  # nothing listens there
    assert failed.status == "infra_error"
    out = verl_adapter.to_agent_loop_output(failed, prompt_length=4096, response_length=8192)
    assert out.response_mask == [0] and out.reward_score == 0.0
    assert out.extra_fields["swe_rl_status"] == "infra_error"
    assert out.as_dict()["response_mask"].sum().item() == 0  # no token of it is trained on


def test_agent_loop_config_file_form_resolves():
    """The YAML form verl's agent_loop_config_path takes names the same class."""
    entry = omegaconf.OmegaConf.create(
        {"name": "swe_rl", "_target_": "swe_rl.integrations.verl.SweRlAgentLoop"}
    )
    assert hydra_utils.get_class(entry["_target_"]) is verl_adapter.SweRlAgentLoop
    assert agent_loop._agent_loop_registry["swe_rl"] == {"_target_": entry["_target_"]}
