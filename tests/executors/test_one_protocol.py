"""One executor protocol for eval and training: ``swe-rl eval`` runs through every executor, and the rollout
server runs only what its operator shipped.

Ray's eval through the CLI is in test_ray.py (three nodes, the oracle resolving every builtin task).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from tests.conftest import available_factory
from tests.service.servers import Server, free_port, post

from swe_rl.agent.config import load_agent_config
from swe_rl.episode.request import EpisodeRequest, NamedModel, Policy
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.executors.local import LocalExecutor
from swe_rl.executors.service import ServiceExecutor
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.cost import ModelPrice, PriceTable
from swe_rl.runs.evaluation import Attempts, EvalSettings
from swe_rl.sandbox.base import Limits

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


@pytest.fixture(scope="module")
def rollout_server():  # type: ignore[no-untyped-def]
    available_factory("ns")
    server = Server(["serve", "rollout", "--backend", "ns", "--capacity", "4"], free_port()).start()
    yield server
    server.stop()


def _eval(tmp_path: Path, *where: str) -> dict:
    out = subprocess.run(
        [
            *SWE_RL,
            "eval",
            "--llm",
            "scripted:oracle",
            "-j",
            "4",
            "--json",
            "-o",
            str(tmp_path / "run"),
            *where,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _artifacts(tmp_path: Path) -> None:
    """Every attempt's artifacts were written by the eval process, wherever the attempt ran."""
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    for r in results:
        names = {p.name for p in Path(r["artifacts"]).iterdir()}
        assert {"traj.json", "patch.diff", "meta.json"} <= names, (r["instance_id"], names)
        assert Path(r["artifacts"], "patch.diff").read_text().strip(), "the oracle's patch was kept"


@pytest.mark.ns
@pytest.mark.parametrize("kind", ["local", "pool", "service"])
def test_eval_resolves_every_builtin_task_through_each_executor(kind, tasks, tmp_path, request):
    where = {"local": ["--executor", "local", "--backend", "ns"]}.get(kind)
    if kind == "pool":
        where = ["--executor", f"pool:{request.getfixturevalue('remote_service').url}"]
    if kind == "service":
        where = ["--executor", f"service:{request.getfixturevalue('rollout_server').url}"]
    assert where is not None
    summary = _eval(tmp_path, *where)
    assert (summary["total"], summary["resolved"], summary["errors"]) == (len(tasks), len(tasks), 0)
    assert summary["args"]["executor"] == where[1]
    _artifacts(tmp_path)


@pytest.mark.ns
@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--agent-config", "shipped agent configs only"),
        ("--llm", "loads no local models (hf:)"),
    ],
)
def test_eval_through_a_rollout_server_refuses_what_would_run_on_it_unchosen(
    rollout_server, tmp_path, option, message
):
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump(load_agent_config(step_limit=3).model_dump()))
    given = {"--agent-config": ["--agent-config", str(config)], "--llm": ["--llm", "hf:/srv/any-model"]}
    llm = [] if option == "--llm" else ["--llm", "scripted:oracle"]
    where = [
        "--executor",
        f"service:{rollout_server.url}",
        "-o",
        str(tmp_path / "run"),
        "--max-instances",
        "1",
    ]
    out = subprocess.run(
        [*SWE_RL, "eval", *llm, *given[option], *where],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 2 and message in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "run" / "results.jsonl").exists()


def _template_attack(marker: Path) -> dict:
    """An agent config whose system template runs code where it is rendered (Jinja2 is not sandboxed)."""
    config = load_agent_config(step_limit=3).model_dump()
    config["system_template"] = (
        "{{ lipsum.__globals__['os'].makedirs('" + str(marker) + "') }} You are an agent."
    )
    return config


@pytest.mark.ns
async def test_a_rollout_server_runs_no_inline_agent_config(rollout_server, tasks, tmp_path):
    task = tasks[0].to_record()
    model = NamedModel(llm="scripted:oracle").model_dump()
    # positive control: in a trusted process, the inline config's template runs code as it is rendered
    here = tmp_path / "rendered-here"
    executor = LocalExecutor(available_factory("ns"))
    request = EpisodeRequest.model_validate(
        {"task": task, "model": model, "agent": _template_attack(here), "train": False}
    )
    result = await executor.run(request)
    await executor.close()
    assert here.is_dir() and result.resolved, "the attack works where inline configs are trusted"
    # the rollout server refuses it before rendering anything
    there = tmp_path / "rendered-on-the-server"
    status, body, _ = await post(
        rollout_server.url + "/run",
        {"task": task, "model": model, "agent": _template_attack(there), "train": False},
        timeout=120,
    )
    assert (
        status == 400
        and body["error"]["kind"] == "bad_request"
        and "shipped agent configs only" in body["error"]["message"]
    )
    assert not there.exists()
    # and runs the same episode with a shipped config named
    status, body, _ = await post(
        rollout_server.url + "/run",
        {"task": task, "model": model, "agent_config": "swebench", "train": False},
        timeout=300,
    )
    assert (
        status == 200 and body["resolved"] is True and body["record"]["instance_id"] == tasks[0].instance_id
    )


@pytest.mark.ns
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"model": {"kind": "named", "llm": "hf:/etc"}}, "loads no local models"),
        ({"limits": Limits(network=True).model_dump()}, "operator's limits"),
        ({"agent_config": "../../etc/passwd"}, "a shipped config name"),
        ({"model": {"kind": "held", "name": "trl-policy"}}, "runs only in the process that holds it"),
        ({"policy": {"url": "http://127.0.0.1:1"}}, "policy: Extra inputs are not permitted"),
    ],
)
async def test_a_rollout_server_refuses_what_its_operator_did_not_choose(
    rollout_server, tasks, extra, message
):
    body = {
        "task": tasks[0].instance_id,
        "model": {"kind": "named", "llm": "scripted:oracle"},
        "train": False,
    }
    status, reply, _ = await post(rollout_server.url + "/run", {**body, **extra}, timeout=120)
    assert status == 400 and message in reply["error"]["message"], reply


def test_a_training_requests_model_without_kind_is_the_policy_and_other_names_are_refused():
    """The rollout server's wire body: ``model`` without ``kind`` is the policy being trained; a field the
    request has not (``policy``, the name before models were typed, never released) is refused by name."""
    policy_body = {
        "task": "x",
        "model": {"url": "http://127.0.0.1:1", "tokenizer": "qwen"},
        "sampling": {"max_tokens": 64},
    }
    request = EpisodeRequest.model_validate(policy_body)
    assert isinstance(request.model, Policy) and request.model.kind == "sglang" and request.train
    assert request.policy == request.model
    body = {"task": "x", "model": {"kind": "named", "llm": "scripted:oracle"}, "train": False}
    named = EpisodeRequest.model_validate(body)
    assert isinstance(named.model, NamedModel) and named.policy is None
    for wrong, where in (
        ({"task": "x", "policy": policy_body["model"]}, ("policy",)),
        ({**policy_body, "stepp_limit": 3}, ("stepp_limit",)),
        (
            {**policy_body, "model": {**policy_body["model"], "tokeniser": "qwen"}},
            ("model", "policy", "tokeniser"),
        ),
    ):
        with pytest.raises(ValidationError) as refused:
            EpisodeRequest.model_validate(wrong)
        assert [e["loc"] for e in refused.value.errors() if e["type"] == "extra_forbidden"] == [where]
    with pytest.raises(
        ValueError, match="needs the policy's token ids"
    ):  # samples need ids a named model lacks
        EpisodeRequest.model_validate({**body, "train": True})
    with pytest.raises(ValueError, match="not both"):
        EpisodeRequest(
            task="x", model=named.model, train=False, agent_config="swebench", agent=load_agent_config()
        )


def test_an_attempt_sent_elsewhere_carries_its_models_price_not_the_whole_map(tasks, tmp_path):
    prices = PriceTable(
        prices={
            f"model-{i}": ModelPrice(input_cost_per_token=i * 1e-9, output_cost_per_token=0.0)
            for i in range(5000)
        }
    )
    settings = EvalSettings(output_dir=tmp_path, episode=EpisodeSpec.for_eval(prices=prices))
    remote = Attempts(
        ServiceExecutor("http://127.0.0.1:1"), NamedModel(model="model-7", api_base="x"), load_agent_config()
    )
    sent = remote.request(tasks[0], 0, SamplingParams(), settings)
    assert sent.prices is not None and list(sent.prices.prices) == ["model-7"]
    assert sent.prices.prices["model-7"] == prices.lookup("model-7")
    here = Attempts.here(lambda t: None, None, None, load_agent_config())  # type: ignore[arg-type]
    assert (
        here.request(tasks[0], 0, SamplingParams(), settings).prices == prices
    )  # in process: the table as is
