"""transformers' BartForSequenceClassification <-> ptm's Seq2SeqClassifier: import a
tiny random HF folder with logits parity (fp32, 1e-5), export it back and load it in
transformers with no missing or unexpected keys and the same logits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.bart_tasks import (
    export_hf_bart_classifier,
    load_hf_bart_classifier,
)

transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _hf(num_labels: int = 3, **extra: object) -> object:
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=97,
        d_model=32,
        encoder_layers=2,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=40,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        num_labels=num_labels,
        **extra,
    )
    model = transformers.BartForSequenceClassification(config).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # norms start at 1, biases at 0: perturb all so the map is checked
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=g))
    return model


def _rows(eos: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three right-padded rows with two end tokens each (a sentence pair)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 97, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    for row, length in enumerate((12, 9, 6)):
        ids[row, 2] = eos
        ids[row, length - 1] = eos
        ids[row, length:] = pad
        mask[row, length:] = 0
    return ids, mask


def test_import_matches_transformers_logits_and_export_loads_back(tmp_path: Path) -> None:
    hf = _hf(
        id2label={0: "neg", 1: "neutral", 2: "pos"}, label2id={"neg": 0, "neutral": 1, "pos": 2}
    )
    hf.save_pretrained(tmp_path / "hf")
    ours = load_hf_bart_classifier(tmp_path / "hf").eval()
    assert ours.kind == "classification" and ours.num_labels == 3
    assert ours.label_names == ["neg", "neutral", "pos"]
    ids, mask = _rows(hf.config.eos_token_id, hf.config.pad_token_id)
    labels = torch.tensor([2, 0, 1])
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours({"input_ids": ids, "attention_mask": mask, "labels": labels})
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=0)
    assert got.loss is not None
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=0)
    assert expected.logits.std() > 1e-3  # not a degenerate all-equal output

    export_hf_bart_classifier(ours, tmp_path / "back")
    again, info = transformers.BartForSequenceClassification.from_pretrained(
        tmp_path / "back", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert again.config.id2label == {0: "neg", 1: "neutral", 2: "pos"}
    with torch.no_grad():
        round_trip = again.eval()(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(round_trip, expected.logits, atol=1e-5, rtol=0)
    # And ptm reads its own export.
    with torch.no_grad():
        reread = load_hf_bart_classifier(tmp_path / "back").eval()(
            {"input_ids": ids, "attention_mask": mask}
        )
    torch.testing.assert_close(reread.logits, expected.logits, atol=1e-5, rtol=0)


def test_regression_folders_import_as_a_regressor(tmp_path: Path) -> None:
    hf = _hf(num_labels=1, problem_type="regression")
    hf.save_pretrained(tmp_path / "hf")
    ours = load_hf_bart_classifier(tmp_path / "hf").eval()
    assert ours.kind == "regression" and ours.num_labels == 1
    ids, mask = _rows(hf.config.eos_token_id, hf.config.pad_token_id)
    with torch.no_grad():
        torch.testing.assert_close(
            ours({"input_ids": ids, "attention_mask": mask}).logits,
            hf(input_ids=ids, attention_mask=mask).logits,
            atol=1e-5,
            rtol=0,
        )
    export_hf_bart_classifier(ours, tmp_path / "back")
    config = json.loads((tmp_path / "back/config.json").read_text())
    assert config["problem_type"] == "regression" and config["num_labels"] == 1


def test_other_folders_are_refused_with_the_field(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=97,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=20,
    )
    transformers.BartForConditionalGeneration(config).save_pretrained(tmp_path / "lm")
    with pytest.raises(CheckpointError, match="field 'architectures'"):
        load_hf_bart_classifier(tmp_path / "lm")
