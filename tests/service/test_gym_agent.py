"""Contract: swe-rl's rollout server stands in for NeMo-Gym's SWE agent server as miles' swe-agent example
(the seed's trainer) calls it.

The peer, read at fixed commits and restated here (the fork's server needs ray and a patched mini-swe-agent,
so it is not imported):
- the client: radixark/miles@c3889cd144b54709f6012263250314d8adc5256e, ``examples/swe-agent/``
  ``generate_with_swe_agent.py`` (``generate``, ``aggregate_agent_metrics``), ``download_and_process_data.py``
  (each record's metadata) and ``miles/utils/http_utils.py`` (``_post``: httpx ``json=``,
  ``raise_for_status``, ``.json()``); ``miles/rollout/sglang_rollout.py`` (``GenerateState.sampling_params``).
- the server it calls: yueming-yuan/Gym@4fce289f9bbee420ebc9a7ac2f8884437d3a93ea (the example's submodule),
  ``responses_api_agents/mini_swe_agent/app.py`` (``MiniSWEAgentRunRequest``, ``MiniSWEAgentVerifyResponse``)
  and ``utils.py`` (the output items with token ids).
Real rollout server (subprocess, ns sandboxes) and real SGLang-protocol policy (the fake server, scripted
oracle, real Qwen tokenizer) on loopback.

NeMo-Gym's own code, the ``nemo-gym`` package 0.7.0 from PyPI (./dev installs it without its deps or its
Requires-Python check), builds the request and judges the answer in the last tests: its
``NeMoGymResponseCreateParamsNonStreaming``, ``BaseVerifyResponse`` and ``NeMoGymResponse``, the class
statements of ``MiniSWEAgentRunRequest`` / ``MiniSWEAgentVerifyResponse`` from its installed
``responses_api_agents/mini_swe_agent/app.py`` and ``MiniSWEAgentUtils`` from the ``utils.py`` beside it.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import importlib.metadata
import itertools
import json
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from swe_rl.executors.base import EpisodeRequest
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy
from swe_rl.llm.scripted import SUBMIT, bash_reply
from tests.conftest import available_factory
from tests.service.servers import Server, free_port, serve_in_thread

pytestmark = pytest.mark.ns

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)

# GenerateState.sampling_params with run-qwen3-4b-instruct.sh's rollout settings (temperature 0.8,
# max response 8192); --rollout-stop / -stop-token-ids unset, so None.
MILES_SAMPLING_PARAMS = {
    "temperature": 0.8,
    "top_p": 1.0,
    "top_k": -1,
    "max_new_tokens": 8192,
    "stop": None,
    "stop_token_ids": None,
    "skip_special_tokens": True,
    "no_stop_trim": True,
    "spaces_between_special_tokens": False,
}

# What aggregate_agent_metrics logs when every rollout reports its keys (the seed's Metrics list, less
# agent/overhead_time_mean, which the seed's README names but miles@c3889cd1 never computes).
MILES_METRICS = {
    "agent/turns_mean",
    "agent/turns_sum",
    "agent/tool_calls_mean",
    "agent/tool_calls_sum",
    "agent/total_time_mean",
    "agent/total_time_max",
    "agent/total_time_min",
    "agent/model_query_time_sum_mean",
    "agent/env_execution_time_sum_mean",
    "agent/eval_time_mean",
    "agent/agent_run_time_mean",
    "agent/time_per_turn",
    "agent/model_query_time_avg",
    "agent/env_execution_time_avg",
    "agent/model_time_ratio",
    "agent/env_time_ratio",
    "agent/eval_time_ratio",
}


def miles_metadata(record: dict[str, Any], split: str = "train") -> dict[str, Any]:
    """download_and_process_data.convert_to_miles_format: the instance, plus subset and split."""
    return {**record, "subset": "gym", "split": split}


def miles_request(metadata: dict[str, Any], router: str) -> dict[str, Any]:
    """The body ``generate`` posts to ``$SWE_AGENT_GYM_URL/run`` (``router``: ip:port of SGLang's router)."""
    return {
        "responses_create_params": {"input": []},
        "sampling_params": MILES_SAMPLING_PARAMS,
        **metadata,
        "sglang_url": f"http://{router}/v1",
    }


async def miles_post(url: str, payload: dict[str, Any]) -> Any:
    """http_utils._post, one attempt: what it returns, or the HTTPStatusError it would retry on."""
    async with httpx.AsyncClient(timeout=None) as client:
        response = await client.post(url, json=payload or {})
        response.raise_for_status()
        return response.json()


def miles_reads(response: dict[str, Any], tokenizer: Any) -> SimpleNamespace:
    """What ``generate`` sets on the Sample from the answer (build_tokens_and_mask_from_messages inlined)."""
    exit_status = response.get("info", {}).get("exit_status", "")
    messages = response.get("messages", [])
    prompt_tokens, tokens, loss_mask = [], [], []
    for i, msg in enumerate(messages if len(messages) >= 2 else []):
        if not msg.get("content", ""):
            continue
        ids = tokenizer(msg["content"], add_special_tokens=False)["input_ids"]
        if i < 2:
            prompt_tokens += ids
        else:
            tokens += ids
            loss_mask += [1 if msg.get("role") == "assistant" else 0] * len(ids)
    if exit_status == "Submitted":
        status = "COMPLETED"
    elif exit_status in ("RolloutTruncated", "LimitsExceeded", "CollapseContinued"):
        status = "TRUNCATED"
    else:
        status = "ABORTED"
    return SimpleNamespace(
        status=status,
        reward=response.get("reward", 0.0),
        prompt=messages[:2] if len(messages) >= 2 else None,
        tokens=prompt_tokens + tokens,
        loss_mask=loss_mask,
        response_length=len(tokens),
        eval_report=response.get("metadata", {}),
        agent_metrics=response.get("info", {}).get("agent_metrics", {}),
    )


def miles_aggregate(all_metrics: list[dict[str, Any]]) -> dict[str, float]:
    """aggregate_agent_metrics over the samples' agent_metrics."""
    out: dict[str, float] = {}
    for key in ["turns", "tool_calls"]:
        values = [m.get(key, 0) for m in all_metrics]
        out[f"agent/{key}_mean"], out[f"agent/{key}_sum"] = sum(values) / len(values), sum(values)
    for key in ["model_query_time_sum", "env_execution_time_sum", "eval_time", "agent_run_time"]:
        out[f"agent/{key}_mean"] = sum(m.get(key, 0) for m in all_metrics) / len(all_metrics)
    for key in ["time_per_turn", "model_query_time_avg", "env_execution_time_avg"]:
        out[f"agent/{key}"] = sum(m.get(key, 0) for m in all_metrics) / len(all_metrics)
    for key in ["model_time_ratio", "env_time_ratio", "eval_time_ratio"]:
        out[f"agent/{key}"] = sum(m.get(key, 0) for m in all_metrics) / len(all_metrics)
    totals = [m.get("total_time", 0) for m in all_metrics]
    out["agent/total_time_mean"] = sum(totals) / len(totals)
    out["agent/total_time_max"], out["agent/total_time_min"] = max(totals), min(totals)
    return out


@pytest.fixture(scope="module")
def tok():
    return tokenizer_mod.qwen_tokenizer()


@pytest.fixture(scope="module")
def policy(tok, tasks):
    server = FakeLLMServer(oracle_policy(tasks), tokenizer=tok)
    thread, loop = serve_in_thread(server)
    yield server
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.fixture(scope="module")
def rollout_server():
    available_factory("ns")
    server = Server(["serve", "rollout", "--backend", "ns", "--capacity", "3"], free_port()).start()
    yield server
    server.stop()


def _router(policy: FakeLLMServer) -> str:
    return policy.url.removeprefix("http://")


async def test_miles_generate_gets_graded_samples_for_the_builtin_suite(rollout_server, policy, tasks, tok):
    """miles' body for every builtin task: each Submitted with reward 1.0, its messages tokenized by miles'
    own code, the agent metrics miles logs all present, and the turns' exact token ids in the output items."""
    bodies = [miles_request(miles_metadata(t.model_dump(mode="json")), _router(policy)) for t in tasks]
    answers = await asyncio.gather(*(miles_post(rollout_server.url + "/run", b) for b in bodies))
    for task, answer in zip(tasks, answers, strict=True):
        read = miles_reads(answer, tok)
        assert (read.status, read.reward) == ("COMPLETED", 1.0), (task.instance_id, answer["info"])
        assert [m["role"] for m in read.prompt] == ["system", "user"]
        assert task.problem_statement in read.prompt[1]["content"]
        assert read.response_length > 0 and len(read.loss_mask) == read.response_length
        assert 0 < sum(read.loss_mask) < read.response_length  # assistant turns trained, observations not
        assert read.eval_report["resolved"] is True and answer["instance_id"] == task.instance_id
        assert answer["responses_create_params"]["input"] == read.prompt  # as Gym rewrites it
        turns = [o for o in answer["response"]["output"] if o["role"] == "assistant"]
        assert len(turns) == read.agent_metrics["turns"] == 3
        for turn in turns:
            ids, logprobs = turn["generation_token_ids"], turn["generation_log_probs"]
            assert ids and len(logprobs) == len(ids) and turn["prompt_token_ids"]
            text = turn["content"][0]["text"]
            assert tok.decode(ids, skip_special_tokens=True) == text
        # token-in/token-out: each turn's prompt extends the previous prompt and what the model generated
        for before, after in itertools.pairwise(turns):
            seen = before["prompt_token_ids"] + before["generation_token_ids"]
            assert after["prompt_token_ids"][: len(seen)] == seen
    logged = miles_aggregate([miles_reads(a, tok).agent_metrics for a in answers])
    assert set(logged) == MILES_METRICS
    assert logged["agent/turns_sum"] == 3 * len(tasks) and logged["agent/eval_time_mean"] > 0


async def test_controls_the_peer_body_is_not_swe_rl_shape_nor_its_answer_miles_shape(
    rollout_server, policy, tasks, tok
):
    """Positive controls: without the Gym branch the body is a 400 (swe-rl's EpisodeRequest refuses it, and so
    does the server once the discriminating field is gone), and swe-rl's own answer gives miles nothing."""
    task = tasks[0]
    body = miles_request(miles_metadata(task.model_dump(mode="json")), _router(policy))
    with pytest.raises(ValidationError):
        EpisodeRequest.model_validate(body)
    stripped = {k: v for k, v in body.items() if k != "responses_create_params"}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await miles_post(rollout_server.url + "/run", stripped)
    assert refused.value.response.status_code == 400
    own = await miles_post(
        rollout_server.url + "/run",
        {"task": task.instance_id, "model": {"url": policy.url}, "sampling": {"max_tokens": 512}},
    )
    assert own["status"] == "completed" and own["reward"] == 1.0
    read = miles_reads(own, tok)
    assert (read.status, read.tokens, read.agent_metrics) == ("ABORTED", [], {})


async def test_a_dead_policy_is_aborted_for_miles_never_a_wrong_answer(rollout_server, tasks, tok):
    """An infra_error reaches miles as a non-Submitted exit status: ABORTED, and its group is filtered out."""
    dead = f"127.0.0.1:{free_port()}"
    answer = await miles_post(
        rollout_server.url + "/run", miles_request(miles_metadata(tasks[0].model_dump(mode="json")), dead)
    )
    read = miles_reads(answer, tok)
    assert (read.status, read.reward, answer["info"]["exit_status"]) == ("ABORTED", 0.0, "infra_error")
    assert answer["info"]["status"] == "infra_error" and answer["metadata"]["error"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sglang_url": None}, "sglang_url"),
        ({"sampling_params": {**MILES_SAMPLING_PARAMS, "temperature": -1}}, "temperature"),
        ({"instance_id": "nowhere__nothing-1", "repo": ""}, "repo"),
        ({"responses_create_params": {}}, "responses_create_params.input"),
    ],
)
async def test_a_bad_gym_body_is_a_400_before_it_queues(rollout_server, policy, tasks, change, message):
    body = miles_request(miles_metadata(tasks[0].model_dump(mode="json")), _router(policy))
    body = {k: v for k, v in {**body, **change}.items() if v is not None}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await miles_post(rollout_server.url + "/run", body)
    assert refused.value.response.status_code == 400
    error = refused.value.response.json()["error"]
    assert error["kind"] == "bad_request" and message in error["message"], error


# NeMo-Gym's own code: the nemo-gym package (see the module docstring).

APP_SKIPPED_IMPORTS = {"ray", "minisweagent"}
"""What app.py imports that cannot run here: ray is for its runner only, and ``minisweagent.run.extra.
swegym_runner`` exists only in NVIDIA's mini-swe-agent fork (PyPI's mini-swe-agent has no such module, so
``import responses_api_agents.mini_swe_agent.app`` fails)."""

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


@contextlib.contextmanager
def process_state_kept() -> Iterator[None]:
    """Importing ``nemo_gym`` (its ``__init__.py``) reorders ``sys.path`` (site-packages after the working
    directory), sets ``HF_HOME`` and ``HF_DATASETS_CACHE`` under ``./cache``, replaces ``builtins.print``
    and may configure the root logger, and scipy adds warning filters: none of it may reach the rest of
    the session (servers started later inherit the environment)."""
    path, env = list(sys.path), dict(os.environ)
    printer, handlers = builtins.print, list(logging.root.handlers)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # omegaconf's deprecation notices to nemo-gym, not ours
            yield
    finally:
        sys.path[:] = path
        for key in set(os.environ) - set(env):
            del os.environ[key]
        os.environ.update(env)
        builtins.print = printer
        logging.root.handlers[:] = handlers


def mini_swe_agent_app() -> SimpleNamespace:
    """nemo-gym's SWE agent server's models from its installed ``app.py``: the module's imports (less
    APP_SKIPPED_IMPORTS) and the class statements of its run request and verify response, run as written."""
    dist = importlib.metadata.distribution("nemo-gym")
    path = Path(str(dist.locate_file("responses_api_agents/mini_swe_agent/app.py")))
    classes = {"MiniSWEAgentRunRequest", "MiniSWEAgentVerifyResponse"}
    body = [node for node in ast.parse(path.read_text(), str(path)).body if _runnable(node, classes)]
    namespace: dict[str, Any] = {"__name__": "responses_api_agents.mini_swe_agent.app"}
    # dont_inherit: without this module's `from __future__ import annotations`, as the file itself runs
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec", dont_inherit=True), namespace)
    return SimpleNamespace(**{name: namespace[name] for name in [*classes, "MiniSWEAgentUtils"]})


def _runnable(node: ast.stmt, classes: set[str]) -> bool:
    if isinstance(node, ast.Import):
        return not any(alias.name.split(".")[0] in APP_SKIPPED_IMPORTS for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] not in APP_SKIPPED_IMPORTS
    return isinstance(node, ast.ClassDef) and node.name in classes


@pytest.fixture(scope="module")
def gym():
    with process_state_kept():
        pytest.importorskip("nemo_gym")  # ./dev installs it (CI); without it there is no peer code to run
        from nemo_gym import base_resources_server, openai_utils

        return SimpleNamespace(app=mini_swe_agent_app(), server=base_resources_server, openai=openai_utils)


def gym_request(gym, metadata: dict[str, Any], router: str) -> dict[str, Any]:
    """A run request built by nemo-gym's models: the create params as the agent's ``client.py`` sends them,
    the record and ``sglang_url`` (the fork's field, which miles sends) as ``MiniSWEAgentRunRequest``'s
    allowed extras; ``model_dump`` as Gym's clients post it (every create param, defaults included)."""
    params = gym.openai.NeMoGymResponseCreateParamsNonStreaming(input=[], temperature=0.0, top_p=1.0)
    request = gym.app.MiniSWEAgentRunRequest(
        responses_create_params=params, **metadata, sglang_url=f"http://{router}/v1"
    )
    return request.model_dump(mode="json")


async def test_nemo_gym_builds_the_request_and_validates_the_answer(rollout_server, policy, tasks, gym):
    """Each answer is nemo-gym's MiniSWEAgentVerifyResponse (a BaseVerifyResponse, its response a
    NeMoGymResponse): the prompt as Gym's input items, each assistant turn its training output message with
    the turn's token ids, the output items those Gym's own MiniSWEAgentUtils builds from the same messages;
    an infra_error answer is that shape too, with no output."""
    chosen = tasks[:3]
    bodies = [gym_request(gym, miles_metadata(t.model_dump(mode="json")), _router(policy)) for t in chosen]
    dead = gym_request(gym, miles_metadata(chosen[0].model_dump(mode="json")), f"127.0.0.1:{free_port()}")
    *answers, dead_answer = await asyncio.gather(
        *(miles_post(rollout_server.url + "/run", b) for b in [*bodies, dead])
    )
    oa = gym.openai
    for task, answer in zip(chosen, answers, strict=True):
        verified = gym.app.MiniSWEAgentVerifyResponse.model_validate(answer)
        assert isinstance(verified, gym.server.BaseVerifyResponse)
        assert isinstance(verified.response, oa.NeMoGymResponse)
        assert (verified.reward, verified.mask_sample, verified.instance_id) == (1.0, False, task.instance_id)
        assert verified.failure_kind is None
        prompt = verified.responses_create_params.input
        assert [type(m) for m in prompt] == [oa.NeMoGymEasyInputMessage] * 2
        assert [m.role for m in prompt] == ["system", "user"] and task.problem_statement in prompt[1].content
        output = verified.response.output
        assert {type(o) for o in output} == {oa.NeMoGymResponseOutputMessageForTraining, oa.NeMoGymMessage}
        turns = [o for o in output if o.role == "assistant"]
        sent_turns = [o for o in answer["response"]["output"] if o["role"] == "assistant"]
        assert len(turns) == 3
        for turn, sent in zip(turns, sent_turns, strict=True):
            assert [getattr(turn, f) for f in TOKEN_FIELDS] == [sent[f] for f in TOKEN_FIELDS]
            ids = turn.generation_token_ids
            assert ids and len(turn.generation_log_probs) == len(ids)
        tokens = [{"provider_specific_fields": {f: getattr(t, f) for f in TOKEN_FIELDS}} for t in turns]
        built = gym.app.MiniSWEAgentUtils.chat_cmp_to_responses(answer["messages"][2:], tokens)
        assert _without_ids([o.model_dump() for o in output]) == _without_ids(built)
    verified = gym.app.MiniSWEAgentVerifyResponse.model_validate(dead_answer)
    assert (verified.reward, verified.response.output) == (0.0, [])
    assert dead_answer["info"]["exit_status"] == "infra_error"
    # an infrastructure failure is never a measured 0: nemo-gym's scoring leaves a masked sample out
    assert (verified.mask_sample, verified.failure_kind) == (True, "swe_rl:infra_error")
    assert verified.failure_reason


def _without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k != "id"} for item in items]


async def _gym_and_own_answers(rollout_server, gym, task, policy) -> tuple[dict[str, Any], dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The rollout server's answers for one run of ``task`` with ``policy``: the Gym request's and swe-rl's own."""
    url = rollout_server.url + "/run"
    answer = await miles_post(
        url, gym_request(gym, miles_metadata(task.model_dump(mode="json")), _router(policy))
    )
    own = await miles_post(
        url, {"task": task.instance_id, "model": {"url": policy.url}, "sampling": {"max_tokens": 512}}
    )
    return answer, own


async def test_controls_nemo_gym_models_refuse_a_wrong_answer(rollout_server, policy, tasks, gym):
    """Positive controls for the test above: the same nemo-gym models that accept the answer refuse swe-rl's
    own answer, a response without a field the Responses API requires, a turn with part of its token
    metadata, an output item without its type, and create params with a field the Responses API lacks."""
    answer, own = await _gym_and_own_answers(rollout_server, gym, tasks[0], policy)
    assert own["status"] == "completed" and own["reward"] == 1.0
    verify = gym.app.MiniSWEAgentVerifyResponse.model_validate
    verify(answer)  # unchanged, it passes

    def changed(change) -> dict[str, Any]:
        copy = json.loads(json.dumps(answer))
        change(copy)
        return copy

    def first_turn(a: dict[str, Any]) -> dict[str, Any]:
        return next(o for o in a["response"]["output"] if o["role"] == "assistant")

    wrong = {
        "responses_create_params": own,
        "created_at": changed(lambda a: a["response"].pop("created_at")),
        "missing: generation_log_probs": changed(lambda a: first_turn(a).pop("generation_log_probs")),
        "type discriminator": changed(lambda a: first_turn(a).pop("type")),
        "sampling_params": changed(lambda a: a["responses_create_params"].update(sampling_params={})),
    }
    for reason, body in wrong.items():
        with pytest.raises(ValidationError, match=reason):
            verify(body)


async def test_an_unresolved_patch_is_rewarded_as_nemo_gyms_swe_agents_reward_it(
    rollout_server, tok, tasks, gym
):
    """NeMo-Gym's own SWE agents reward 1.0 resolved, 0.0 otherwise (``responses_api_agents/swe_agents/app.py``:
    ``reward=1.0 if metrics.resolved else 0.0``; ``mini_swe_agent/app.py`` likewise): an agent that submits
    without fixing anything gets 0.0 in the Gym answer, as docs/SERVICE.md says, never swe-rl's own -1.0
    (which swe-rl's own answer still carries: the control)."""
    give_up = FakeLLMServer(lambda _messages: bash_reply("Nothing to do.", SUBMIT), tokenizer=tok)
    async with give_up:
        answer, own = await _gym_and_own_answers(rollout_server, gym, tasks[0], give_up)
    verified = gym.app.MiniSWEAgentVerifyResponse.model_validate(answer)
    assert answer["info"]["exit_status"] == "Submitted" and answer["metadata"]["resolved"] is False
    assert (verified.reward, verified.mask_sample, verified.failure_kind) == (0.0, False, None)
    assert (own["status"], own["resolved"], own["reward"]) == ("completed", False, -1.0)


async def test_upstream_nemo_gyms_request_names_its_policy_policy_base_url(
    rollout_server, policy, tasks, gym
):
    """Upstream NeMo-Gym (0.7.0) names the per-request policy ``policy_base_url``, an OpenAI-compatible
    endpoint; its own MiniSWEAgentRunRequest without the fork's ``sglang_url`` gets a graded answer that its
    MiniSWEAgentVerifyResponse accepts. A per-request ``policy_api_key`` is refused, typed, before it queues."""
    task = tasks[0]
    params = gym.openai.NeMoGymResponseCreateParamsNonStreaming(input=[], temperature=0.0, top_p=1.0)
    upstream = gym.app.MiniSWEAgentRunRequest(
        responses_create_params=params,
        **miles_metadata(task.model_dump(mode="json")),
        policy_base_url=f"{policy.url}/v1",
    )
    body = upstream.model_dump(mode="json")
    assert "sglang_url" not in body and body["policy_base_url"].endswith("/v1")
    answer = await miles_post(rollout_server.url + "/run", body)
    verified = gym.app.MiniSWEAgentVerifyResponse.model_validate(answer)
    assert (verified.reward, verified.mask_sample, answer["info"]["exit_status"]) == (1.0, False, "Submitted")
    turns = [o for o in verified.response.output if o.role == "assistant"]
    assert turns and all(t.generation_token_ids for t in turns)

    keyed = {**body, "policy_api_key": "sk-not-to-be-carried"}
    async with httpx.AsyncClient(timeout=30) as client:
        refused = await client.post(rollout_server.url + "/run", json=keyed)
    assert refused.status_code == 400 and "policy_api_key" in refused.text, refused.text
    assert "sk-not-to-be-carried" not in refused.text
