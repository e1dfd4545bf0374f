"""A minimal REINFORCE loop outside TRL and outside the sandboxes: is a GRPO failure the plumbing or the optimizer?

It takes the warm-started model of a ``bench/learning_cpu.sh`` work dir and, per step, samples GENS replies to
each of TASKS prompts (plain ``generate``, T 1.0), rewards a reply +1 when its text equals that task's golden
reply and -1 otherwise (no sandbox, no grading: for one-line sed fixes the two agree), normalizes rewards per
group as GRPO does, and takes one AdamW step on -advantage x log-prob of the sampled tokens (token embeddings
frozen, as ``train rl --freeze-embeddings``). If this loop does not learn either, the reward plumbing of
``swe-rl train rl`` is not what stops learning.

    python bench/reinforce_check.py /tmp/learning-cpu --lr 1e-4 --steps 20

Prints one line per step: successes out of TASKS x GENS samples and the mean token entropy of the sampled
replies. Needs the ``train`` extra (torch, transformers). OMP_NUM_THREADS=1 on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workdir", type=Path, help="learning_cpu.sh's W: sft/final and gold-data/chat.jsonl")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=4, help="Prompts per step.")
    parser.add_argument("--gens", type=int, default=8, help="Samples per prompt (the group).")
    parser.add_argument("--max-tokens", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="Nucleus sampling for the rollouts (1.0: the full distribution).",
    )
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = args.workdir / "sft" / "final"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    gold = [json.loads(line)["messages"] for line in (args.workdir / "gold-data" / "chat.jsonl").open()]
    prompts = [
        tok(
            tok.apply_chat_template(m[:2], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )
        for m in gold
    ]
    answers = [m[2]["content"].strip() for m in gold]
    model.get_input_embeddings().weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    for step in range(args.steps):
        chosen = random.sample(range(len(prompts)), args.tasks)
        samples: list[tuple[list[int], list[int]]] = []
        rewards: list[float] = []
        model.eval()
        with torch.no_grad():
            for i in chosen:
                ids = prompts[i].input_ids
                out = model.generate(
                    torch.tensor([ids] * args.gens),
                    attention_mask=torch.ones(args.gens, len(ids), dtype=torch.long),
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    top_p=args.top_p,
                    max_new_tokens=args.max_tokens,
                    eos_token_id=eos,
                    pad_token_id=eos,
                )
                for row in out:
                    reply = row[len(ids) :].tolist()
                    if eos in reply:
                        reply = reply[: reply.index(eos) + 1]
                    samples.append((ids, reply))
                    rewards.append(
                        1.0 if tok.decode(reply, skip_special_tokens=True).strip() == answers[i] else -1.0
                    )
        r = torch.tensor(rewards).view(args.tasks, args.gens)
        adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)
        model.train()
        opt.zero_grad()
        n_tokens = sum(len(reply) for _, reply in samples)
        entropies = []
        for (ids, reply), a in zip(samples, adv, strict=True):
            logp = model(torch.tensor([ids + reply])).logits[0, len(ids) - 1 : -1].log_softmax(-1)
            entropies.append(float(-(logp.exp() * logp).sum(-1).mean().detach()))
            if a != 0:
                (-(a * logp.gather(1, torch.tensor(reply)[:, None])).sum() / n_tokens).backward()
        opt.step()
        solved = int((r > 0).sum())
        print(
            f"step {step}: {solved}/{r.numel()} solved, entropy {sum(entropies) / len(entropies):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
