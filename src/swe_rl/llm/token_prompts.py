"""Prompt ids that extend the previous turn exactly: token-in, token-out across a whole conversation.

Re-templating the conversation at every turn re-tokenizes the model's own earlier replies, and a reply's
text does not always tokenize back to the ids that were sampled; the prompt then no longer extends the
previous prompt + completion, and a multi-turn training sample has to be cut there. A
:class:`PromptExtender` remembers, per conversation, the ids of the last prompt + completion and builds
the next prompt as those ids + the template's ids between the turns + the new messages, encoded by the
fixed-base method (template of [history + new] past the template of [history]). Where the template does
not extend (a context manager dropped turns, a thinking template dropped an earlier ``<think>``), it
falls back to templating the whole conversation: a new sample starts there, as it must.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from swe_rl.llm.base import Message


def _key(messages: Sequence[Message]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for m in messages:
        h.update(m.role.encode())
        h.update(b"\x00")
        h.update(m.content.encode())
        h.update(b"\x01")
    return h.hexdigest()


class PromptExtender:
    """Chat-template prompts for a tokenizer, extended id for id from each conversation's last turn."""

    def __init__(self, tokenizer: Any, *, max_conversations: int = 4096, **template_kwargs: Any) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = template_kwargs
        self.eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        self._seen: OrderedDict[str, list[int]] = OrderedDict()
        self.max_conversations = max_conversations
        self.extended = 0
        self.templated = 0

    def template(self, messages: Sequence[Message], *, generation_prompt: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            [m.model_dump() for m in messages],
            tokenize=True,
            add_generation_prompt=generation_prompt,
            return_dict=False,
            **self.template_kwargs,
        )
        return list(ids)

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The ids to send for ``messages`` (the conversation so far, ending in the new user turn)."""
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        full = self.template(messages, generation_prompt=True)
        if last < 0:
            self.templated += 1
            return full
        sent = self._seen.pop(_key(messages[: last + 1]), None)
        base = self.template(messages[: last + 1], generation_prompt=False)
        if sent is None or full[: len(base)] != base or self.eos not in base:
            self.templated += 1
            return full
        end = len(base) - base[::-1].index(self.eos)  # past the end token of the last assistant turn
        between = base[end:]  # what the template puts after that end token (e.g. a newline)
        closing = [] if sent and sent[-1] == self.eos else [self.eos]  # a reply cut at max_tokens
        self.extended += 1
        return [*sent, *closing, *between, *full[len(base) :]]

    def record(self, messages: Sequence[Message], reply: str, ids: list[int]) -> None:
        """Remember prompt + completion ids of the reply to ``messages`` for the conversation's next turn."""
        self._seen[_key([*messages, Message(role="assistant", content=reply)])] = ids
        while len(self._seen) > self.max_conversations:
            self._seen.popitem(last=False)
