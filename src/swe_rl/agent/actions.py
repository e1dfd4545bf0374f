"""Reading the action out of a model reply: exactly one fenced bash block; spotting a submission."""

from __future__ import annotations

import re

# mini-swe-agent 1.x asked for ```bash blocks, 2.x asks for ```mswea_bash_command: both protocols parse.
_BLOCK = re.compile(r"```(?:bash|sh|mswea_bash_command)[ \t]*\n(.*?)```", re.DOTALL)
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# mini-swe-agent 1.x also took its older marker; a 1.x config may still tell the model to print it.
SUBMIT_MARKERS = (SUBMIT_MARKER, "MINI_SWE_AGENT_FINAL_OUTPUT")


def bash_blocks(reply: str, action_regex: str | None = None) -> list[str]:
    """The commands in ``reply``: its fenced bash blocks, or what ``action_regex`` finds (a config's own
    protocol, as mini-swe-agent's ``model.action_regex``: its one group is the command)."""
    pattern = _BLOCK if action_regex is None else re.compile(action_regex, re.DOTALL)
    return [m.strip() for m in pattern.findall(reply)]


def submission(output: str) -> str | None:
    """The submitted patch when the command's output starts with a marker line, else None."""
    lines = output.lstrip().splitlines(keepends=True)
    if lines and lines[0].strip() in SUBMIT_MARKERS:
        return "".join(lines[1:])
    return None


def head_tail(text: str, limit: int) -> tuple[str, str, int]:
    """(head, tail, number of characters elided) of a text longer than ``limit``."""
    half = limit // 2
    return text[:half], text[-half:], max(0, len(text) - 2 * half)
