"""Scripted models: replay fixed replies, or compute them from the conversation. For tests and demos.

The scripts written from a task (the oracle that knows its gold patch, and the agents that misbehave on
purpose) are :mod:`swe_rl.llm.oracle`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from swe_rl.llm.base import Completion, LLMError, Message, SamplingParams

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
Policy = Callable[[Sequence[Message]], str]


class ScriptedLLM:
    """Replies from a list (in order) or from a function of the conversation."""

    def __init__(self, replies: Sequence[str] | Policy, name: str = "scripted") -> None:
        self.name = name
        self._policy: Policy = replies if callable(replies) else _from_list(list(replies))
        self.calls = 0

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        started = time.monotonic()
        self.calls += 1
        text = self._policy(messages)
        return Completion(
            text=text,
            latency_s=time.monotonic() - started,
            completion_tokens=max(1, len(text) // 4),
            prompt_tokens=sum(len(m.content) for m in messages) // 4,
        )

    async def close(self) -> None:
        return None


def _from_list(replies: list[str]) -> Policy:
    def policy(messages: Sequence[Message]) -> str:
        turn = sum(1 for m in messages if m.role == "assistant")
        if turn >= len(replies):
            raise LLMError(f"the scripted model has only {len(replies)} replies")
        return replies[turn]

    return policy


def bash_reply(thought: str, command: str) -> str:
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"
