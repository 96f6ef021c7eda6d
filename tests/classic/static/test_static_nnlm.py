"""Bengio's NNLM: shapes, direct connections, n-gram windows, training on the core Trainer."""

from __future__ import annotations

from pathlib import Path

import torch
from static_planted import planted_corpus

from ptm_classic.static.corpus import encode_corpus
from ptm_classic.static.nnlm import BOS_ID, NNLM, UNK_ID, NGramBatches, train_nnlm
from ptm_classic.static.vectors import VectorTable
from ptm_core.training import TrainerConfig


def test_forward_shapes_and_loss() -> None:
    model = NNLM(vocab_size=30, context_size=3, embedding_dim=8, hidden_size=12)
    batch = {"input_ids": torch.randint(0, 30, (5, 3)), "labels": torch.randint(0, 30, (5,))}
    output = model(batch)
    assert output.logits.shape == (5, 30)
    assert output.loss.dim() == 0
    assert torch.allclose(output.metrics["perplexity"], output.loss.exp())
    assert model.hidden.in_features == 3 * 8 and model.direct is not None
    assert model.direct.weight.shape == (30, 24)


def test_direct_connections_change_the_output() -> None:
    torch.manual_seed(0)
    with_direct = NNLM(20, 2, 4, 6, direct_connections=True)
    torch.manual_seed(0)
    without = NNLM(20, 2, 4, 6, direct_connections=False)
    context = torch.randint(0, 20, (3, 2))
    # Same C, H, U, b: y differs by exactly W x.
    x = with_direct.embeddings(context).flatten(1)
    assert torch.allclose(
        with_direct.logits(context) - without.logits(context), with_direct.direct(x)
    )  # type: ignore[misc]
    assert not torch.allclose(with_direct.logits(context), without.logits(context))
    assert (
        sum(p.numel() for p in with_direct.parameters())
        - sum(p.numel() for p in without.parameters())
        == 20 * 8
    )


def test_ngram_windows_stop_at_sentence_starts(tmp_path: Path) -> None:
    ids = {"a": 2, "b": 3, "c": 4}
    corpus = encode_corpus([["a", "b", "c"], ["c", "x"]], ids, UNK_ID, tmp_path / "enc")
    batches = NGramBatches(corpus, context_size=2, batch_size=5, seed=0)
    batches.shuffle = False
    batch = batches.batch(0, 0)
    assert batch["labels"].tolist() == [2, 3, 4, 4, UNK_ID]
    assert batch["input_ids"].tolist() == [
        [BOS_ID, BOS_ID],
        [BOS_ID, 2],
        [2, 3],
        [BOS_ID, BOS_ID],  # a new sentence does not see the last one
        [BOS_ID, 4],
    ]


def test_loss_falls_through_the_trainer_and_exports_a_table(tmp_path: Path) -> None:
    config = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=60,
        learning_rate=1e-2,
        warmup_ratio=0.0,
        weight_decay=0.0,
        log_every=10,
        save_every=60,
        progress=False,
        device="cpu",
    )
    run = train_nnlm(
        planted_corpus(sentences=120),
        config,
        context_size=2,
        embedding_dim=8,
        hidden_size=16,
        batch_size=32,
    )
    losses = [record["loss"] for record in run.training.result.history]
    assert losses[-1] < losses[0] - 0.3
    table = VectorTable.load(tmp_path / "run" / "final")
    assert table.method == "nnlm" and table.dim == 8 and len(table) == 20
    assert torch.equal(table.vector("apple"), run.table.vector("apple"))
    assert "<unk>" not in table and "<s>" not in table
