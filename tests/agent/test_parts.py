"""Action parsing and the context manager."""

from __future__ import annotations

import re

from swe_rl.agent.actions import bash_blocks, head_tail, submission
from swe_rl.agent.context import TEMPLATE_OVERHEAD, ContextManager
from swe_rl.llm.base import Message


def test_exactly_the_bash_blocks_are_found():
    assert bash_blocks("THOUGHT: x\n```bash\nls -la\n```") == ["ls -la"]
    assert bash_blocks("```bash\na\n```\ntext\n```bash\nb\n```") == ["a", "b"]
    assert bash_blocks("```python\nprint(1)\n```") == []
    assert bash_blocks("no block at all") == []


def test_submission_marker_must_lead_the_output():
    assert submission("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a b\n") == "diff --git a b\n"
    assert submission("noise\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n") is None


def test_mini_swe_agent_2x_blocks_are_actions_too():
    reply = "THOUGHT: look\n\n```mswea_bash_command\nls -la\n```"
    assert bash_blocks(reply) == ["ls -la"]
    assert bash_blocks("```sh\npwd\n```\n```mswea_bash_command\nls\n```") == ["pwd", "ls"]
    # control: the bash-only pattern this replaced finds no action in a 2.x reply
    assert re.findall(r"```(?:bash|sh)[ \t]*\n(.*?)```", reply, re.DOTALL) == []


def test_a_configs_action_regex_replaces_the_blocks():
    xml = r"<mswea_bash_command>(.*?)</mswea_bash_command>"  # mini-swe-agent's swebench_xml.yaml
    reply = "THOUGHT: x\n<mswea_bash_command>git status\n</mswea_bash_command>\n```bash\nls\n```"
    assert bash_blocks(reply, xml) == ["git status"]
    assert bash_blocks(reply) == ["ls"]


def test_mini_swe_agent_1x_marker_submits_too():
    assert submission("MINI_SWE_AGENT_FINAL_OUTPUT\ndiff --git a b\n") == "diff --git a b\n"
    assert submission("  \nMINI_SWE_AGENT_FINAL_OUTPUT\n") == ""
    assert submission("echo MINI_SWE_AGENT_FINAL_OUTPUT\n") is None


def test_head_tail():
    head, tail, elided = head_tail("a" * 50 + "b" * 50, 20)
    assert (head, tail, elided) == ("a" * 10, "b" * 10, 80)


def _history(turns: int, size: int = 400) -> list[Message]:
    history = [Message(role="system", content="s" * 40), Message(role="user", content="p" * 40)]
    for i in range(turns):
        history += [
            Message(role="assistant", content=f"a{i} " + "x" * size),
            Message(role="user", content=f"o{i} " + "y" * size),
        ]
    return history


def test_everything_is_sent_while_it_fits():
    cm = ContextManager(max_context=100_000, max_new_tokens=1000)
    history = _history(5)
    assert cm.select(history) == history and cm.omitted_last == 0


def test_head_30_tail_70_with_a_marker():
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    history = _history(40, size=96)  # each turn = 2 * (100 + overhead) tokens
    cm = ContextManager(max_context=3000, max_new_tokens=500, count=count)
    kept = cm.select(history)
    assert kept[:2] == history[:2]
    markers = [m for m in kept if "earlier turns omitted" in m.content]
    assert len(markers) == 1 and cm.omitted_last > 0
    assert f"[{cm.omitted_last} earlier turns" in markers[0].content
    turn = 2 * (100 + TEMPLATE_OVERHEAD)
    head_turns = kept.index(markers[0]) - 2
    tail_turns = len(kept) - kept.index(markers[0]) - 1
    remaining = 2500 - (40 + 40 + 2 * TEMPLATE_OVERHEAD) - 32
    assert head_turns // 2 == int(0.3 * remaining // turn)
    assert tail_turns // 2 == int(0.7 * remaining // turn)
    assert kept[-1] is history[-1] and kept[2] is history[2]
    # counts are cached per message: a second step counts only the new messages
    before = len(calls)
    history += [Message(role="assistant", content="new"), Message(role="user", content="obs")]
    cm.select(history)
    assert len(calls) - before <= 3  # the two new messages (+ a marker when the omitted count changed)
