"""XNLG's XAE + DAE objective: the contract (tests/core/objectives/cases.py), its batches,
per-kind weights, and the stage-2 rows read from prepared shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.families import XNLG
from ptm_multilingual.model import XLMEncoder, xlm_text_encoder
from ptm_multilingual.xnlg import XNLGModel, XNLGObjective, XNLGRow

VOCAB = VocabInfo(vocab_size=120, cls_id=0, sep_id=1, pad_id=2, unk_id=3, mask_id=4)
ROWS = [
    XNLGRow([10, 11, 12, 13], [50, 51, 52], 0, 1, False),  # XAE xa -> xb
    XNLGRow([60, 61, 62, 63, 64], [60, 61, 62, 63, 64], 1, 1, True),  # DAE xb
    XNLGRow([20, 21], [70, 71, 72, 73], 1, 0, False),  # XAE xb -> xa
    XNLGRow([30, 31, 32], [30, 31, 32], 0, 0, True),  # DAE xa
]


def tiny_model() -> XNLGModel:
    text = xlm_text_encoder(
        vocab_size=VOCAB.vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_positions=32,
    )
    encoder = XLMEncoder(text, ["xa", "xb"])
    return XNLGModel.from_encoder(encoder, num_layers=1, start_id=0, end_id=1, pad_id=2)


class TestXNLGObjectiveContract(ObjectiveTestCase):
    objective_cls = XNLGObjective
    vocab = VOCAB

    def make_encoder(self) -> torch.nn.Module:
        return tiny_model()

    def make_objective(self, encoder: torch.nn.Module) -> Any:
        return XNLGObjective(VOCAB, max_length=16)

    def make_input(self) -> Any:
        return list(ROWS)

    def data_side(self, objective: Any, inputs: Any, generator: torch.Generator) -> Any:
        return objective.collate(inputs, generator)

    def loss(self, encoder: torch.nn.Module, objective: Any, batch: Any) -> torch.Tensor:
        mix = ObjectiveMix({objective.name: objective})
        return PretrainingModel(encoder, mix, input_keys=XNLG.input_keys)(batch).loss


def test_a_batch_holds_both_kinds_with_their_languages_and_weights() -> None:
    objective = XNLGObjective(VOCAB, max_length=16, word_shuffle=0, word_dropout=0, word_blank=0)
    batch = objective.collate(ROWS, torch.Generator().manual_seed(0))
    assert batch["input_ids"][0].tolist()[:6] == [0, 10, 11, 12, 13, 1]
    assert batch["decoder_input_ids"][0].tolist()[:4] == [0, 50, 51, 52]
    labels = batch["labels"][0].tolist()
    assert labels[:4] == [50, 51, 52, 1] and set(labels[4:]) <= {IGNORE_INDEX}
    assert batch["langs"][0].unique().tolist() == [0] and batch["langs"][1].unique().tolist() == [1]
    assert batch["decoder_langs"].tolist() == [1, 1, 0, 0]
    assert batch["xnlg_dae"].tolist() == [False, True, False, True]
    assert batch["xnlg_weight"].tolist() == [1.0, 0.5, 1.0, 0.5]
    # without noise, a DAE row's encoder input is its target
    assert batch["input_ids"][1].tolist() == [0, 60, 61, 62, 63, 64, 1]


def test_dae_rows_are_noised_and_xae_rows_are_not() -> None:
    objective = XNLGObjective(
        VOCAB, max_length=40, word_shuffle=3, word_dropout=0.3, word_blank=0.3
    )
    long = list(range(10, 40))
    rows = [XNLGRow(long, long, 0, 0, True), XNLGRow(long, long, 0, 1, False)]
    batch = objective.collate(rows, torch.Generator().manual_seed(0))
    clean = [0, *long, 1]
    assert batch["input_ids"][1].tolist() == clean
    noised = [t for t in batch["input_ids"][0].tolist() if t != VOCAB.pad_id]
    assert noised != clean and noised[0] == 0 and noised[-1] == 1
    assert batch["decoder_input_ids"][0].tolist() == clean[:-1]


def test_the_loss_weights_each_kind_per_token() -> None:
    objective = XNLGObjective(VOCAB, max_length=16, word_shuffle=0, word_dropout=0, word_blank=0)
    batch = objective.collate(ROWS, torch.Generator().manual_seed(0))
    logits = torch.randn(*batch["labels"].shape, VOCAB.vocab_size)
    out = objective(type("Out", (), {"logits": logits})(), batch)
    tokens = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="none"
    ).view_as(batch["labels"])
    real = batch["labels"] != IGNORE_INDEX
    dae = batch["xnlg_dae"][:, None] & real
    xae = ~batch["xnlg_dae"][:, None] & real
    expected = (tokens[xae].sum() + 0.5 * tokens[dae].sum()) / real.sum()
    assert torch.allclose(out.loss, expected)
    assert torch.allclose(out.metrics["dae_loss"], tokens[dae].mean())
    assert torch.allclose(out.metrics["xae_loss"], tokens[xae].mean())


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_length"):
        XNLGObjective(VOCAB, max_length=2)
    with pytest.raises(ValueError, match="xae_weight"):
        XNLGObjective(VOCAB, dae_weight=-1)


def test_stage2_rows_and_batches_from_prepared_corpora(tmp_path: Path) -> None:
    """Another language pair and vocabulary than the samples: xq/xz made-up words."""
    from ptm_multilingual.prepared_data import prepare_xlm
    from ptm_multilingual.prepared_reader import PreparedXLM
    from ptm_multilingual.xnlg.data import XNLGBatches, stage2_rows

    mono = tmp_path / "mono"
    mono.mkdir()
    (mono / "xq.txt").write_text("".join(f"qa{i} qb{i % 3} qc\n" for i in range(30)))
    par = tmp_path / "par"
    par.mkdir()
    (par / "xq-xz.tsv").write_text(
        "".join(f"qa{i} qb{i % 3}\tzo{i % 3} zu{i}\n" for i in range(20))
    )
    folder = prepare_xlm(mono, par, vocab_size=80, seed=0, cache_dir=tmp_path / "cache")
    prepared = PreparedXLM.open(folder)
    xae, dae = stage2_rows(prepared)
    assert sorted(xae) == ["xq-xz", "xz-xq"] and sorted(dae) == ["xq", "xz"]
    assert len(xae["xq-xz"]) == 20 and len(dae["xq"]) == 30 and len(dae["xz"]) == 20
    row = xae["xz-xq"][3]
    tok = prepared.tokenizer
    assert tok.decode(row.source).replace(" ", "") == "zo0zu3"
    assert tok.decode(row.target).replace(" ", "") == "qa3qb0"
    assert (row.source_lang, row.target_lang, row.denoise) == (
        tok.lang_id("xz"),
        tok.lang_id("xq"),
        False,
    )
    with pytest.raises(ValueError, match="xq-xy"):
        stage2_rows(prepared, ["xq-xy"])
    objective = XNLGObjective(tok.vocab_info, max_length=16)
    batches = XNLGBatches(xae, dae, objective, 8, 0.25, 5, seed=4)
    first = batches.batch(0, 1)
    assert first["xnlg_dae"].sum().item() == 2 and len(first["xnlg_dae"]) == 8
    again = XNLGBatches(xae, dae, objective, 8, 0.25, 5, seed=4).batch(0, 1)
    assert all(torch.equal(first[k], again[k]) for k in first)
    with pytest.raises(ValueError, match="no DAE sentences"):
        XNLGBatches(xae, {}, objective, 8, 0.5, 5)
