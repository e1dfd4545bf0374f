"""A plain LM head for TRL's trainers on CPU. Needs ``trl`` (the ``train`` extra).

TRL's SFT and GRPO trainers patch the model with a tiled LM head: ``model(..., fused_lm_head=True)`` returns
per-token log-probabilities folded over vocabulary tiles with an online log-sum-exp, never holding the logits.
Off CUDA the tiles are folded in torch and every position is scored; for a small model with the 151k-token
Qwen vocabulary that is several times the cost of one projection (a 450-token step of tiny-qwen-m on a shared
2-core CPU: ~15 s against ~4.5 s). On CPU a small batch's logits fit in memory, so :func:`plain_lm_head`
answers those calls from the logits of the scored positions only, with the same outputs (entropy and top-1
without gradient).
"""

from __future__ import annotations

import types
from typing import Any


def plain_lm_head(model: Any, temperature: float = 1.0) -> bool:
    """Answer ``fused_lm_head=True`` calls of ``model`` (patched by TRL) from plain logits; False if unsupported.

    Models whose head scales or soft-caps its logits, and MoE models, keep TRL's head.
    """
    config = model.config.get_text_config()
    if any(
        getattr(config, name, None) is not None
        for name in ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier")
    ) or getattr(config, "logits_scaling", None) not in (None, 1, 1.0):
        return False
    tiled = model.forward

    def forward(
        self: Any,
        *args: Any,
        fused_lm_head: bool = False,
        labels: Any = None,
        shift_labels: Any = None,
        num_items_in_batch: Any = None,
        **kwargs: Any,
    ) -> Any:
        if not fused_lm_head or kwargs.get("output_router_logits") or getattr(config, "num_experts", None):
            return tiled(
                *args,
                fused_lm_head=fused_lm_head,
                labels=labels,
                shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        return _scored(self, hidden, labels, num_items_in_batch, temperature)

    model.forward = types.MethodType(forward, model)
    return True


def _scored(model: Any, hidden: Any, labels: Any, num_items_in_batch: Any, temperature: float) -> Any:
    """TRL's fused output (log-probabilities, entropy, top-1) from the logits of the labelled positions."""
    import torch
    from trl.trainer.utils import FusedCausalLMOutput

    mask = labels != -100
    target = labels[mask]
    logits = model.get_output_embeddings()(hidden[mask]).float() / temperature  # scored positions only
    picked = -torch.nn.functional.cross_entropy(logits, target, reduction="none")
    with torch.no_grad():
        logp = torch.log_softmax(logits, dim=-1)
        entropy = mask.new_zeros(mask.shape, dtype=logits.dtype)
        entropy[mask] = -(logp.exp() * logp).sum(-1)
        is_top1 = mask.clone()
        is_top1[mask] = logits.argmax(-1) == target
    # masked_scatter keeps the gradient and gives a zero (still connected) where no label is scored
    log_probs = picked.new_zeros(mask.shape).masked_scatter(mask, picked)
    count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(
        loss=-log_probs.sum() / count,
        log_probs=log_probs,
        entropy=entropy,
        is_top1=is_top1,
        label_mask=mask,
    )
