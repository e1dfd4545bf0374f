"""The plain LM head for TRL on CPU gives what TRL's tiled head gives: log-probs, loss, entropy, gradients."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("trl")


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_plain_head_matches_trls_tiled_head(temperature):
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from swe_rl.train.lm_head import plain_lm_head
    from swe_rl.train.models import tiny_qwen_dir

    base = AutoModelForCausalLM.from_pretrained(str(tiny_qwen_dir()), dtype=torch.float32)
    with torch.no_grad():  # a random model's logits are flat: sharpen them so the check can tell heads apart
        base.get_output_embeddings().weight.mul_(40.0)
    tiled, plain = base, copy.deepcopy(base)
    outputs = ("log_probs", "entropy", "is_top1")
    add_fused_lm_head(tiled, temperature=temperature, outputs=outputs)
    add_fused_lm_head(plain, temperature=temperature, outputs=outputs)
    assert plain_lm_head(plain, temperature)

    torch.manual_seed(0)
    ids = torch.randint(0, 151000, (2, 12))
    labels = ids.clone()
    labels[0, :5] = -100  # a prompt
    labels[1, 9:] = -100  # padding
    with torch.no_grad():  # a few labels are the model's top-1 next token
        labels[1, 1:4] = base(input_ids=ids).logits[1, 0:3].argmax(-1)
    mask = torch.ones_like(ids)
    got, want = (
        m(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True) for m in (plain, tiled)
    )
    assert got.log_probs.shape == want.log_probs.shape == (2, 11)
    torch.testing.assert_close(got.log_probs, want.log_probs, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.entropy, want.entropy, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.loss, want.loss, atol=1e-5, rtol=1e-5)
    assert torch.equal(got.label_mask, want.label_mask)
    assert torch.equal(got.is_top1.bool(), want.is_top1.bool()) and int(got.is_top1.sum()) == 3
    assert float(got.log_probs[0, :4].abs().sum()) == 0.0  # masked positions carry nothing
    got.loss.backward()
    want.loss.backward()
    for (name, a), b in zip(plain.named_parameters(), tiled.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-3, msg=name)
    with torch.no_grad():  # generation's plain forward is untouched
        torch.testing.assert_close(plain(input_ids=ids).logits, tiled(input_ids=ids).logits)
