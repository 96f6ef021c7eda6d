"""XLNet permutation-LM training step: ptm vs ``transformers.XLNetLMHeadModel``.

Same random-init weights (loaded through ptm's XLNet import), the same batch, the same
factorisation orders (``perm_mask`` for transformers, the same ranks' masks for ptm) and
the same targets (``target_mapping`` / ``query_positions``: the last 1/6 of each order);
the two losses are checked equal in eval mode before timing. Both use fused AdamW.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.paired import time_paired
from ptm_core.objectives.inputs import build_objective

SIZES = {
    "mini": dict(d_model=256, n_layer=4, n_head=4, d_inner=1024),
    "base": dict(d_model=768, n_layer=12, n_head=12, d_inner=3072),
}
VOCAB_SIZE = 32000


def _batch(batch: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    from ptm_core.modules.attention_masks import permutation_masks

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, VOCAB_SIZE, (batch, length), generator=gen)
    ranks = torch.stack(
        [torch.randperm(length, generator=gen).argsort() for _ in range(batch)]
    )  # (B, L) place of each token in its order
    content, query = permutation_masks(ranks, torch.ones(batch, length, dtype=torch.bool))
    count = max(1, round(length / 6))
    positions = ranks.argsort(dim=1)[:, length - count :]  # (B, P) the last 1/6
    rows = query.gather(1, positions[:, :, None].expand(-1, -1, length))
    mapping = torch.zeros(batch, count, length).scatter_(2, positions[:, :, None], 1.0)
    return {
        "input_ids": ids,
        "content": content,
        "query": query,
        "positions": positions,
        "query_rows": rows,
        "mapping": mapping,
        "labels": ids.gather(1, positions),
    }


def bench_xlnet_train(
    size: str, device: torch.device, batch: int, length: int, pairs: int
) -> dict[str, Any]:
    """Forward + backward + fused AdamW of a permutation-LM step, tokens/s."""
    from transformers import XLNetConfig, XLNetLMHeadModel

    from ptm_core import TransformerEncoder
    from ptm_core.checkpoints.hf.xlnet import load_lm_head
    from ptm_core.objectives import PermutationLMObjective
    from ptm_core.tokenization import VocabInfo

    torch.manual_seed(0)
    theirs = XLNetLMHeadModel(
        XLNetConfig(vocab_size=VOCAB_SIZE, dropout=0.1, **SIZES[size])  # type: ignore[arg-type]
    )
    with tempfile.TemporaryDirectory() as directory:
        theirs.save_pretrained(directory)
        encoder = TransformerEncoder.from_pretrained(directory)
        objective = build_objective(
            PermutationLMObjective, encoder, VocabInfo(VOCAB_SIZE, 5, 0, 3, 4, 6)
        )
        load_lm_head(directory, objective)
    theirs, encoder, objective = theirs.to(device), encoder.to(device), objective.to(device)
    data = {k: v.to(device) for k, v in _batch(batch, length).items()}

    def loss_ours() -> torch.Tensor:
        out = encoder(
            data["input_ids"],
            attention_mask=data["content"],
            query_positions=data["positions"],
            query_attention_mask=data["query_rows"],
        )
        assert out.query_hidden_state is not None
        logits = objective.logits(out.query_hidden_state)
        return F.cross_entropy(logits.flatten(0, 1).float(), data["labels"].flatten())

    def loss_theirs() -> torch.Tensor:
        out = theirs(
            data["input_ids"],
            perm_mask=(~data["query"]).float(),
            target_mapping=data["mapping"],
            labels=data["labels"],
        )
        return out.loss

    encoder.eval(), theirs.eval()
    with torch.no_grad():
        first_ours, first_theirs = loss_ours().item(), loss_theirs().item()
    if abs(first_ours - first_theirs) > 1e-4:
        raise RuntimeError(
            f"ptm and transformers XLNet disagree before timing ({size}): eval-mode loss "
            f"{first_ours:.6f} vs {first_theirs:.6f}"
        )
    encoder.train(), theirs.train()
    params_ours = list(dict.fromkeys([*encoder.parameters(), *objective.parameters()]))
    opt_ours = torch.optim.AdamW(params_ours, lr=1e-5, fused=True)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=1e-5, fused=True)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")

    def step(loss_fn: Any, optimizer: torch.optim.Optimizer) -> None:
        with autocast:
            loss = loss_fn()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    timing = time_paired(
        lambda: step(loss_ours, opt_ours),
        lambda: step(loss_theirs, opt_theirs),
        pairs=pairs,
        sync=sync,
    )
    return {
        "loss_ptm": first_ours,
        "loss_transformers": first_theirs,
        **timing.summary(batch * length),
    }
