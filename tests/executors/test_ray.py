"""The Ray executor on a cluster of several raylets simulated here (``ray.cluster_utils``).

Each simulated node has its own env cache (``SWE_RL_CACHE``) and its own ``sandbox`` count, so placement by
warm cache and by capacity can visibly fail. Only the LLM is scripted; sandboxes are real (ns backend).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.request import NamedModel
from swe_rl.executors.ray import RayExecutor, connect, host_handle
from swe_rl.llm.base import SamplingParams
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

if os.environ.get("CI"):
    import ray  # the dev script installs it: in CI a missing ray is a failure, not a skip
else:
    ray = pytest.importorskip("ray")

SLOTS = (1, 2, 1)  # sandbox slots of the three worker nodes; the head has none (it drives, like a trainer)
PARAMS = SamplingParams(max_tokens=512)
SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, task_by_id):
    available_factory("ns")
    from ray.cluster_utils import Cluster

    root = tmp_path_factory.mktemp("ray-nodes")
    # node 0 already holds textkit's env (built by `swe-rl env build` there, say); the others hold nothing
    EnvCache(root / "node0" / "envs").ensure(task_by_id["swe-rl-builtin__textkit-1"])
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes = [
        c.add_node(
            num_cpus=1,
            resources={"sandbox": n, "sandbox_start_up": 1, "env_io": 1},
            env_vars={"SWE_RL_CACHE": str(root / f"node{i}")},
        )
        for i, n in enumerate(SLOTS)
    ]
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield SimpleNamespace(cluster=c, nodes=nodes, ids=[n.node_id for n in nodes], root=root)
    finally:
        ray.shutdown()
        c.shutdown()


def _executor(**kw):  # type: ignore[no-untyped-def]
    return RayExecutor(backend="ns", **kw)


async def _hosts(executor) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    return {n["node_id"]: n for n in (await executor.statistics())["nodes"]}


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.ns
async def test_rollouts_go_to_the_node_that_holds_their_env(cluster, tasks, tmp_path):
    textkit = [t for t in tasks if "textkit" in t.instance_id][:2]
    executor = _executor()
    summary = await run_eval(
        textkit,
        Attempts(executor, NamedModel(llm="scripted:oracle"), load_agent_config()),
        PARAMS,
        EvalSettings(output_dir=tmp_path / "run", max_concurrent=1),
        quiet=True,
    )
    assert (summary["resolved"], summary["errors"]) == (len(textkit), 0)
    hosts = await _hosts(executor)
    warm, *cold = cluster.ids
    assert hosts[warm]["completed"] == len(textkit) and hosts[warm]["builds"] == {}  # warm: nothing built
    assert all(hosts[n]["completed"] == 0 and not hosts[n]["builds"] for n in cold)


@pytest.mark.ns
def test_eval_cli_on_three_nodes_resolves_all_within_each_nodes_slots(cluster, tasks, tmp_path):
    where = ["--executor", f"ray:{cluster.cluster.address}", "--output-dir", str(tmp_path / "run")]
    out = subprocess.run(
        [*SWE_RL, "eval", "--llm", "scripted:oracle", "--backend", "ns", "-j", "8", "--json", *where],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert (summary["total"], summary["resolved"], summary["errors"]) == (len(tasks), len(tasks), 0)
    assert summary["args"]["executor"].startswith("ray:")
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    for r in results:  # artifacts written on the head, from attempts that ran on the nodes
        mini = f"{r['instance_id']}.traj.json"  # mini-swe-agent's format of the same episode
        assert {p.name for p in Path(r["artifacts"]).iterdir()} == {
            "traj.json",
            mini,
            "patch.diff",
            "meta.json",
        }

    executor = _executor()
    hosts = asyncio.run(_hosts(executor))
    assert sum(h["completed"] for h in hosts.values()) >= len(tasks)
    for node_id, slots in zip(cluster.ids, SLOTS, strict=True):
        host = hosts[node_id]
        assert host["resources"]["sandbox"] == slots
        assert 1 <= _max_overlap(host["spans"]) <= slots, (node_id, slots, host["spans"])
        assert all(n == 1 for n in host["builds"].values()), host["builds"]  # each env built once per node
    # 8 attempts at once on 4 slots: the limit was reached somewhere, so it was a real limit
    assert any(_max_overlap(hosts[n]["spans"]) == s for n, s in zip(cluster.ids, SLOTS, strict=True))

    status = subprocess.run(
        [*SWE_RL, "cluster", "status", "--address", cluster.cluster.address, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    shown = {n["node_id"]: n for n in json.loads(status.stdout)}
    for node_id, slots in zip(cluster.ids, SLOTS, strict=True):
        assert shown[node_id]["total"]["sandbox"] == slots and shown[node_id]["host"]["envs"]
        assert shown[node_id]["host"]["running"] == [] and shown[node_id]["free"]["sandbox"] == slots


@pytest.mark.ns
async def test_token_level_rollout_on_ray_equals_the_local_executor(cluster, task_by_id, envs):
    from swe_rl.executors.base import EpisodeRequest, Policy
    from swe_rl.executors.local import LocalExecutor
    from swe_rl.llm.fake_server import FakeLLMServer
    from swe_rl.llm.oracle import oracle_policy

    tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)
    task = task_by_id["swe-rl-builtin__statkit-2"]
    async with FakeLLMServer(oracle_policy([task]), tokenizer=tokenizer_mod.qwen_tokenizer()) as server:
        request = EpisodeRequest(
            task=task.to_record(),
            model=Policy(url=server.url, kind="sglang", tokenizer="qwen"),
            sampling=SamplingParams(max_tokens=256, temperature=1.0),
        )
        local = await LocalExecutor(available_factory("ns"), envs).run(request)
        remote = await _executor().run(request)
    assert remote.status == local.status == "completed" and remote.reward == local.reward == 1.0
    keep = {"tokens", "prompt_length", "loss_mask", "rollout_logprobs", "reward", "status", "step_indices"}
    assert [s.model_dump(include=keep) for s in remote.samples] == [
        s.model_dump(include=keep) for s in local.samples
    ]
    assert len(remote.samples) == 3


@pytest.mark.ns
async def test_a_task_object_of_this_process_is_refused_and_its_record_runs(cluster, task_by_id):
    from swe_rl.errors import InProcessObjectError
    from swe_rl.executors.base import EpisodeRequest

    task = task_by_id["swe-rl-builtin__textkit-1"]
    request = EpisodeRequest(task=task.instance_id, model=NamedModel(llm="scripted:oracle"), train=False)
    executor = _executor()
    with pytest.raises(InProcessObjectError, match="task object 'swe-rl-builtin__textkit-1'"):
        await executor.run(request, task=task)
    assert executor.counts["submitted"] == 0  # refused before anything went to a node
    sent = await executor.run(request.model_copy(update={"task": task.to_record()}))
    assert sent.record is not None and sent.record.resolved, sent.error


@pytest.mark.ns
async def test_killing_a_node_mid_run_loses_no_task_and_scores_no_failure(cluster, tasks, tmp_path):
    executor = _executor(retries=1)
    victim = cluster.nodes[1]  # the node with two slots
    host = host_handle(victim.node_id, create=False)
    killed = threading.Event()

    def kill_when_busy() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if ray.get(host.statistics.remote())["running"]:
                cluster.cluster.remove_node(victim, allow_graceful=False)
                killed.set()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    subset = tasks[:5]
    summary = await run_eval(
        subset,
        Attempts(executor, NamedModel(llm="scripted:oracle"), load_agent_config()),
        PARAMS,
        EvalSettings(output_dir=tmp_path / "run", max_concurrent=6),
        quiet=True,
    )
    killer.join(timeout=5)
    assert killed.is_set(), "the victim node never ran a rollout"
    counts = (await executor.statistics())["counts"]
    assert counts.get("lost", 0) >= 1, counts  # the victim's rollouts were lost, then retried elsewhere
    # nothing was scored as a wrong answer: every attempt resolved, or is an infra error for --resume
    assert summary["resolved"] + summary["errors"] == len(subset) and summary["resolved"] >= 1
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert all(r["resolved"] or r["exit_status"] == "infra_error" for r in results)
    assert victim.node_id not in {n["node_id"] for n in (await executor.statistics())["nodes"]}


def test_cluster_up_sizes_nodes_from_their_capacity():
    out = subprocess.run(
        [
            *SWE_RL,
            "cluster",
            "up",
            "--cpus",
            "64",
            "--memory-gb",
            "256",
            "--address",
            "10.0.0.1:6379",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    plan = json.loads(out.stdout)
    assert plan["resources"] == {"sandbox": 256, "sandbox_start_up": 64, "env_io": 4}
    assert plan["worker"].startswith("ray start --address=10.0.0.1:6379 --resources ")
    assert json.loads(plan["worker"].split("--resources ")[1].strip("'")) == plan["resources"]
    small = json.loads(
        subprocess.run(
            [*SWE_RL, "cluster", "up", "--cpus", "8", "--memory-gb", "4", "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert small["resources"]["sandbox"] == 4  # memory-bound: (4 GiB - 2 GiB reserved) / 512 MiB


@pytest.mark.parametrize(
    ("executor", "message"),
    [
        ("pool", "pool server's URL"),
        ("service:http://127.0.0.1:1", "no rollout server answers (http://127.0.0.1:1: "),
        ("kubernetes", "--executor kubernetes: unknown executor 'kubernetes'"),
        ("ray:127.0.0.1:1", "no Ray cluster at 127.0.0.1:1"),
    ],
)
def test_eval_rejects_an_executor_it_cannot_use(tmp_path, executor, message):
    out = subprocess.run(
        [*SWE_RL, "eval", "--llm", "scripted:oracle", "--executor", executor, "-o", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()


def test_missing_ray_names_the_extra():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from swe_rl.errors import MissingExtraError\n"
        "from swe_rl.executors import get_executor\n"
        "try:\n    get_executor('ray')\nexcept MissingExtraError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "swe-rl[ray]" in out.stdout


@pytest.mark.ns
def test_the_jobs_workers_import_the_grading_code_when_they_start(cluster):
    """swe-rl joins a cluster with a worker set-up hook: a worker that has graded nothing yet has swebench's
    grading imported already, so no rollout waits 2 s for it at its first verdict."""

    def grading_imported() -> bool:  # defined here: pickled by value (the test module is not on the workers)
        import sys

        return "swebench.harness.grading" in sys.modules

    probe = ray.remote(num_cpus=1)(grading_imported)
    address = cluster.cluster.address
    try:
        # the control: a new job joined as a plain driver does, whose fresh worker has not imported it
        ray.shutdown()
        ray.init(address=address, log_to_driver=False)
        assert ray.get(probe.remote(), timeout=120) is False
        ray.shutdown()
        assert connect(address) is False  # joined, not started
        assert ray.get(probe.remote(), timeout=120) is True
    finally:
        ray.shutdown()
        ray.init(address=address, log_to_driver=False)
