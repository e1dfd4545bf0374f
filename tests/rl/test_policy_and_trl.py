"""Prompts that extend id for id, the batched in-process policy, and GRPO with TRL on real sandboxes."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.conftest import available_factory, tiny_grpo_settings

from swe_rl.agent.config import load_agent_config
from swe_rl.episode.result import RolloutResult
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.llm.base import Message, SamplingParams
from swe_rl.llm.oracle import oracle_replies
from swe_rl.llm.token_prompts import PromptExtender
from swe_rl.rl.rollout import run_rollout

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)
torch = pytest.importorskip("torch")
trl_mod = pytest.importorskip("swe_rl.integrations.trl", exc_type=ImportError)
grpo_mod = pytest.importorskip("swe_rl.train.grpo", exc_type=ImportError)
models_mod = pytest.importorskip("swe_rl.train.models", exc_type=ImportError)


@pytest.fixture(scope="module")
def tok():
    return tokenizer_mod.qwen_tokenizer()


def _odd_ids(tok, text: str) -> list[int]:
    """Ids a sampler may produce that the text does not tokenize back to: one id per character."""
    return [i for ch in text for i in tok.encode(ch, add_special_tokens=False)]


def test_prompts_extend_the_exact_ids_over_twenty_turns(tok):
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ext = PromptExtender(tok)
    messages = [Message(role="system", content="sys"), Message(role="user", content="task")]
    sent: list[int] = []
    for turn in range(22):
        prompt = ext.prompt_ids(messages)
        assert prompt[: len(sent)] == sent  # every prompt extends the previous prompt + completion
        reply = f"THOUGHT: turn {turn}\n\n```bash\necho {turn}\n```"
        completion = [*_odd_ids(tok, reply), eos]
        assert completion != [*tok.encode(reply, add_special_tokens=False), eos]  # re-encoding would drift
        ext.record(messages, reply, [*prompt, *completion])
        sent = [*prompt, *completion]
        messages = [
            *messages,
            Message(role="assistant", content=reply),
            Message(role="user", content=f"<output>{turn}</output>"),
        ]
    assert ext.extended == 21 and ext.templated == 1
    # what sits between the turns is exactly what the template puts there
    final = ext.prompt_ids(messages)
    templated = tokenizer_mod.qwen_tokenizer().apply_chat_template(
        [m.model_dump() for m in messages], tokenize=True, add_generation_prompt=True, return_dict=False
    )
    assert tok.decode(final) == tok.decode(templated)


def test_a_template_that_rewrites_history_starts_afresh(tok):
    ext = PromptExtender(tok, enable_thinking=True)
    messages = [Message(role="user", content="task")]
    reply = "<think>\nhmm\n</think>\n\n```bash\nls\n```"
    prompt = ext.prompt_ids(messages)
    ext.record(messages, reply, [*prompt, *tok.encode(reply, add_special_tokens=False)])
    nxt = [*messages, Message(role="assistant", content=reply), Message(role="user", content="out")]
    again = ext.prompt_ids(nxt)  # the template drops the earlier <think>: no exact extension exists
    assert ext.templated == 2 and ext.extended == 0
    assert "<think>" not in tok.decode(again)


@pytest.fixture(scope="module")
def tiny():
    from swe_rl.llm.hf import load_model

    model, tok = load_model(str(models_mod.tiny_qwen_dir()))
    return model, tok


@pytest.mark.heavy
@pytest.mark.parametrize("temperature", [1.0, 0.7])
async def test_batched_policy_batches_turns_and_its_logprobs_are_the_models(tiny, temperature):
    from swe_rl.llm.hf import BatchedHFPolicy

    model, tok = tiny
    policy = BatchedHFPolicy(model, tok, window_s=0.05)
    params = SamplingParams(max_tokens=6, temperature=temperature, seed=3)
    convs = [[Message(role="user", content="x" * (i + 1))] for i in range(4)]
    first = await asyncio.gather(*(policy.complete(c, params) for c in convs))
    assert policy.batches == [4]
    second = await asyncio.gather(
        *(
            policy.complete(
                [*c, Message(role="assistant", content=r.text), Message(role="user", content="o")], params
            )
            for c, r in zip(convs, first, strict=True)
        )
    )
    for a, b in zip(first, second, strict=True):
        assert b.prompt_ids[: len(a.prompt_ids) + len(a.completion_ids)] == [*a.prompt_ids, *a.completion_ids]
        assert len(b.logprobs) == len(b.completion_ids)
        # teacher-forced logprobs of the same ids, unpadded, agree with what generation reported: those of
        # the distribution sampled from (logits / temperature), as the trainer scores them
        ids = torch.tensor([[*b.prompt_ids, *b.completion_ids]])
        with torch.no_grad():
            logits = model(ids).logits[0, len(b.prompt_ids) - 1 : -1].float() / temperature
        expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(b.completion_ids)[:, None])[:, 0]
        assert torch.allclose(expected, torch.tensor(b.logprobs), atol=1e-3)


@pytest.mark.ns
async def test_rollout_output_for_trl_masks_observations_and_failures(task_by_id, envs, tok):
    from swe_rl.executors.local import LocalExecutor
    from swe_rl.llm.scripted import ScriptedLLM

    task = task_by_id["swe-rl-builtin__textkit-3"]
    factory = available_factory("ns")
    ok = await run_rollout(
        task,
        ScriptedLLM(oracle_replies(task)),
        factory,
        envs,
        load_agent_config(),
        SamplingParams(),
        spec=EpisodeSpec.for_training(dynamic_history=False),
        tokenizer=tok,
    )
    assert ok.status == "completed" and ok.resolved and len(ok.samples) == 1
    failed = RolloutResult(status="infra_error", exit_status="infra_error", error="node died")
    func = trl_mod.SweRolloutFunc(
        [task], load_agent_config(), SamplingParams(), executor=LocalExecutor(factory, envs)
    )
    ids = [task.instance_id, task.instance_id]
    out = func.to_trl(ids, [ok, failed], tok)
    sample = ok.samples[0]
    assert out["prompt_ids"][0] + out["completion_ids"][0] == sample.tokens
    assert out["env_mask"][0] == sample.loss_mask and 0 in sample.loss_mask and 1 in sample.loss_mask
    assert out["swe_reward"] == [1.0, None]  # unscorable for TRL: out of its group's mean and std
    assert out["env_mask"][1] == [0] and out["swe_status"][1] == "infra_error"


@pytest.mark.ns
def test_grpo_run_with_trl_writes_curve_metrics_and_a_loadable_model(tasks, envs, tmp_path):
    from transformers import AutoModelForCausalLM

    settings = tiny_grpo_settings(tmp_path / "run", steps=1, top_p=0.9, trl={"top_entropy_quantile": 0.5})
    from swe_rl.executors.local import LocalExecutor

    executor = LocalExecutor(available_factory("ns"), envs, capacity=2)
    agent = load_agent_config(step_limit=2)
    summary = grpo_mod.train_grpo(tasks[:1], settings, envs, agent, executor=executor, quiet=True)
    rows = [json.loads(line) for line in (tmp_path / "run/rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {r["instance_id"] for r in rows} == {tasks[0].instance_id}
    assert all(r["status"] != "infra_error" and r["resolved"] is False for r in rows)
    assert summary["curve"][0]["resolve_rate"] == 0.0 and summary["steps"] == 1
    assert json.loads((tmp_path / "run/config.json").read_text())["settings"]["top_p"] == 0.9
    metrics = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert any("rl/resolve_rate" in m for m in metrics) and any("trl/loss" in m for m in metrics)
    (rollout,) = [m for m in metrics if "rl/rollout_time_s" in m]
    assert 0 < rollout["rl/generate_time_s"] < rollout["rl/rollout_time_s"]
    AutoModelForCausalLM.from_pretrained(tmp_path / "run/final")
    from swe_rl.report.html import render_report
    from swe_rl.report.training import step_times

    split = step_times(metrics)  # the step's time: rollout, its generation, forward and backward
    assert set(split) == {"rollout", "generation", "forward + backward"}, split
    assert split["forward + backward"][0][0] == 0 and split["forward + backward"][0][1] > 0, split
    page = render_report(tmp_path / "run").read_text()  # a training run gets its curves
    assert "resolve rate per step" in page and page.count("<svg") == 4 and tasks[0].instance_id in page
    assert "time per step (s)" in page and "mean time per step: rollout " in page
    assert "resolve rate 0% at the first step, 0% over the last 1, best 0% (step 0)" in page
    with pytest.raises(Exception, match="already holds a training run"):
        grpo_mod.train_grpo(tasks[:1], settings, envs, load_agent_config())


@pytest.mark.ns
def test_eval_with_a_local_model_batches_concurrent_agents(tasks, envs, tmp_path):
    from swe_rl.llm.select import choose_model
    from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

    choice = choose_model(f"hf:{models_mod.tiny_qwen_dir()}", None, None)
    summary = asyncio.run(
        run_eval(
            tasks[:3],
            Attempts.here(choice.factory, envs, available_factory("ns"), load_agent_config(step_limit=2)),
            SamplingParams(max_tokens=4, temperature=1.0),
            EvalSettings(output_dir=tmp_path / "ev", max_concurrent=3),
            quiet=True,
        )
    )
    assert summary["total"] == 3 and summary["errors"] == 0 and summary["resolved"] == 0
    assert max(choice.shared._ensure().batches) > 1  # turns of different agents shared a generate call
    for traj in (tmp_path / "ev").glob("*/traj.json"):
        step = json.loads(traj.read_text())["steps"][0]["completion"]
        assert len(step["completion_ids"]) == len(step["logprobs"]) > 0


class _CharIdsServerTokenizer:
    """The fake server's sampler: one id per character, ids the reply's text never tokenizes back to."""

    def __init__(self, tok) -> None:
        self.tok, self.eos_token = tok, tok.eos_token

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [i for ch in text for i in self.tok.encode(ch, add_special_tokens=False)]

    def decode(self, ids, **kwargs) -> str:
        return self.tok.decode(ids, **kwargs)

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.tok.convert_tokens_to_ids(token)


@pytest.mark.ns
async def test_sglang_rollout_is_one_exact_sample_even_when_sampled_ids_are_not_canonical(
    task_by_id, envs, tok
):
    """The next prompt holds the ids the model generated, so the multi-turn sample never has to be cut."""
    from swe_rl.executors.base import EpisodeRequest, Policy
    from swe_rl.executors.local import LocalExecutor
    from swe_rl.llm.fake_server import FakeLLMServer
    from swe_rl.llm.oracle import oracle_policy

    task = task_by_id["swe-rl-builtin__textkit-3"]
    async with FakeLLMServer(oracle_policy([task]), tokenizer=_CharIdsServerTokenizer(tok)) as server:
        result = await LocalExecutor(available_factory("ns"), envs).run(
            EpisodeRequest(task=task.to_record(), model=Policy(url=server.url), dynamic_history=False)
        )
    assert result.resolved and len(result.trajectory.steps) == 3
    assert len(result.samples) == 1  # re-templating the replies' text would have broken the prefix
    sample = result.samples[0]
    sent = [r["input_ids"] for r in server.requests]
    for step, prompt in zip(result.trajectory.steps, sent, strict=True):
        generated = step.completion.completion_ids
        assert generated != [*tok.encode(step.completion.text, add_special_tokens=False), tok.eos_token_id]
        start = len(prompt)
        assert sample.tokens[:start] == prompt and sample.tokens[start : start + len(generated)] == generated
        assert sample.loss_mask[
            start - sample.prompt_length : start - sample.prompt_length + len(generated)
        ] == [1] * len(generated)
    assert sum(sample.loss_mask) == sum(len(s.completion.completion_ids) for s in result.trajectory.steps)


def test_frozen_token_embeddings_get_no_gradient_and_the_layers_do():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(models_mod.tiny_qwen_dir())
    embedding = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is embedding  # tied: one matrix, counted once
    assert grpo_mod.freeze_token_embeddings(model) == embedding.numel()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    model(input_ids=ids, labels=ids).loss.backward()
    assert embedding.grad is None and not embedding.requires_grad
    layer = model.model.layers[0].self_attn.q_proj.weight
    assert layer.grad is not None and layer.grad.abs().sum() > 0


@pytest.mark.heavy
def test_micro_batches_make_the_update_the_whole_step_makes(tmp_path):
    """`--micro-batch`: the TRL config a run with micro-batches gets (grpo._grpo_config) generates a step's
    episodes once and sums their micro-batches' gradients into one update, the update of all at once. Real
    TRL, a tiny Qwen3, a reward that differs between samples (swe-rl's own rollouts need a model that
    sometimes resolves a task: a random one never does, and a group with one reward has no gradient). The
    control: another seed samples other completions and makes another update."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    def trained(micro_batch: int, seed: int) -> dict[str, torch.Tensor]:
        settings = grpo_mod.GRPOSettings(
            output_dir=tmp_path / f"m{micro_batch}-s{seed}",
            model="tiny-qwen",
            steps=1,
            tasks_per_step=2,
            num_generations=2,
            micro_batch=micro_batch,
            learning_rate=1e-3,
            seed=seed,
        )
        config = grpo_mod._grpo_config(settings, cuda=False, bf16=False, quiet=True)
        config.update(max_completion_length=6, save_strategy="no")  # TRL generates here, not swe-rl
        model = AutoModelForCausalLM.from_pretrained(models_mod.tiny_qwen_dir())
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[lambda completions, **_: [float(len(c)) for c in completions]],
            args=GRPOConfig(**config),
            train_dataset=Dataset.from_dict({"prompt": ["fix the bug", "run the tests"]}),
            processing_class=AutoTokenizer.from_pretrained(models_mod.tiny_qwen_dir()),
        )
        trainer.train()
        assert trainer.state.global_step == 1
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    start = AutoModelForCausalLM.from_pretrained(models_mod.tiny_qwen_dir()).state_dict()
    whole, micro, other = trained(0, 0), trained(1, 0), trained(0, 1)
    assert any(not torch.equal(whole[k], start[k]) for k in start), "the step updated the model"
    assert all(torch.allclose(micro[k], whole[k], rtol=0, atol=1e-5) for k in whole)
    assert any(not torch.allclose(other[k], whole[k], rtol=0, atol=1e-5) for k in whole)
