"""The agents' sandboxes, reused through a reset in place (sandbox/pool.py, the pool a Grader grades from):
nothing one agent's commands leave reaches the next agent, and no agent gets a sandbox a grading had (its
warm runner). Real ns sandboxes, a scripted model, episode/run.py's own path."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.episode.run import run_episode
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.errors import SandboxError
from swe_rl.harness.grade_many import Grader, Slot
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.scripted import SUBMIT, ScriptedLLM, bash_reply
from swe_rl.sandbox.pool import SandboxPool

pytestmark = pytest.mark.ns

# Leftovers of every kind a command can make: files in /tmp, /dev/shm and the repository, a commit, and
# a daemon of its own session that keeps writing into the repository.
PLANT = """echo planted > /tmp/plant && echo planted > /dev/shm/plant && echo junk >> README.md
echo planted > newfile.txt
git -c user.name=a -c user.email=a@b commit -qam planted
setsid sh -c 'while :; do date > /testbed/late.txt; sleep 0.1; done' planted-daemon >/dev/null 2>&1 &
echo planted"""
PROBE = """sleep 0.5
for f in /tmp/plant /dev/shm/plant newfile.txt late.txt; do [ -e "$f" ] && echo "SEEN $f"; done
grep -q junk README.md && echo "SEEN readme"
git log --format=%s | grep -qx planted && echo "SEEN commit"
for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q planted-daemon && echo "SEEN daemon"; done
echo probed"""
EVERY = {f"SEEN {what}" for what in ("/tmp/plant", "/dev/shm/plant", "newfile.txt", "late.txt", "readme")}
EVERY |= {"SEEN commit", "SEEN daemon"}


def _seen(observation: str) -> set[str]:
    return {line.strip() for line in observation.splitlines() if line.strip().startswith("SEEN")}


async def test_one_agent_cannot_reach_the_next_through_a_reused_sandbox(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    grader = Grader(SandboxPool(available_factory("ns"), idle=2))
    agent, params, spec = load_agent_config(), SamplingParams(), EpisodeSpec.for_eval()
    # the first agent plants, then probes in the same sandbox: the positive control, every leftover seen
    planter = ScriptedLLM([bash_reply("plant", PLANT), bash_reply("probe", PROBE), bash_reply("go", SUBMIT)])
    prober = ScriptedLLM([bash_reply("probe", PROBE), bash_reply("go", SUBMIT)])
    try:
        first = await run_episode(task, planter, cache=envs, factory=grader.factory, agent=agent, params=params, spec=spec, grader=grader)  # fmt: skip
        assert first.trajectory is not None and first.verdict is not None, first.error
        assert _seen(first.trajectory.steps[1].observation) == EVERY, first.trajectory.steps[1].observation
        assert first.patch and "late.txt" in first.patch  # graded, in a sandbox of the grading shelf

        second = await run_episode(task, prober, cache=envs, factory=grader.factory, agent=agent, params=params, spec=spec, grader=grader)  # fmt: skip
        assert second.trajectory is not None, second.error
        probed = second.trajectory.steps[0].observation
        assert "probed" in probed and _seen(probed) == set(), probed
        agent_counts = grader.pool.counts("agent")
        assert agent_counts["created"] == 1 and agent_counts["reused"] == 1, agent_counts

        # the agents' sandbox is not one a grading had, and has no runner
        shelves = {use: shelf.free for use, shelf in grader.pool._shelves.items()}
        agents = [slot for slots in shelves["agent"].values() for slot in slots]
        graders = [slot for slots in shelves["grading"].values() for slot in slots]
        assert len(agents) == 1 and len(graders) == 1 and agents[0].box is not graders[0].box
        assert agents[0].tenant is None and isinstance(graders[0].tenant, Slot)
    finally:
        await grader.close()


async def test_without_reuse_every_agent_gets_a_fresh_sandbox(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    pool = SandboxPool(available_factory("ns"), reuse=False)
    seen = []
    try:
        for _ in range(2):
            async with pool.sandbox(envs.ensure(task)) as box:
                seen.append(box)
                assert (await box.exec("true", timeout=30)).returncode == 0
        with pytest.raises(SandboxError):
            await seen[0].exec("true", timeout=30)  # closed after its lease
    finally:
        await pool.close()
    assert seen[0] is not seen[1] and pool.counts("agent") == {"created": 0, "reused": 0, "switched": 0}
