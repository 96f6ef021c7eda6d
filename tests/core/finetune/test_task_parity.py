"""Task heads against Hugging Face ``BertFor...``: same weights, fp32, logits and losses within 1e-5.

Both directions: an HF folder loaded by ptm, and a ptm model exported and loaded by
``transformers`` with no missing or unexpected keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import (
    BertConfig,
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    PreTrainedModel,
)

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.bert_tasks import (
    export_hf_task_model,
    is_hf_task_directory,
    load_hf_task_model,
)
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import TaskModel, build_task_model

TOL = 1e-5
VOCAB = 90
HF_CLASSES: dict[str, type[PreTrainedModel]] = {
    "classification": BertForSequenceClassification,
    "regression": BertForSequenceClassification,
    "tagging": BertForTokenClassification,
    "qa": BertForQuestionAnswering,
    "multiple_choice": BertForMultipleChoice,
}


def tiny_hf_config(**extra: object) -> BertConfig:
    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        **extra,
    )


def make_batch(kind: str, seed: int = 1) -> dict[str, torch.Tensor]:
    """Padded pair inputs; (B, C, L) for multiple choice."""
    gen = torch.Generator().manual_seed(seed)
    shape = (3, 4, 10) if kind == "multiple_choice" else (3, 10)
    ids = torch.randint(5, VOCAB, shape, generator=gen)
    mask = torch.ones_like(ids)
    mask[..., 0, 7:] = 0  # a padded row (the first choice of every example for MC)
    types = torch.zeros_like(ids)
    types[..., 5:] = 1
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types}


def hf_outputs(hf: PreTrainedModel, kind: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        out = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
        )
    if kind == "qa":
        return hf_qa_logits(out.start_logits, out.end_logits, batch["attention_mask"])
    return out.logits


def hf_qa_logits(start: torch.Tensor, end: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """transformers' QA logits with padding set to the lowest logit, as ptm's head does
    (transformers scores padding from the encoder's states there, so its loss depends on
    the batch; the logits at real positions are what must match)."""
    logits = torch.stack([start, end], dim=-1)
    return logits.masked_fill(~mask.bool()[..., None], torch.finfo(logits.dtype).min)


def ptm_logits(model: TaskModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(batch).logits


def hf_extra(kind: str) -> dict[str, object]:
    if kind == "classification":
        return {"id2label": {0: "neg", 1: "neu", 2: "pos"}}
    if kind == "regression":
        return {"num_labels": 1}
    if kind == "tagging":
        return {"id2label": {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}}
    return {}


def save_hf(kind: str, path: Path, seed: int = 0) -> PreTrainedModel:
    torch.manual_seed(seed)
    hf = HF_CLASSES[kind](tiny_hf_config(**hf_extra(kind))).eval()
    with torch.no_grad():  # non-zero biases, so a missed copy shows
        for name, param in hf.named_parameters():
            if name.endswith("bias"):
                param.normal_(std=0.1)
    hf.save_pretrained(path, safe_serialization=True)
    return hf


@pytest.mark.parametrize("kind", list(HF_CLASSES))
def test_hf_folder_loads_with_the_same_logits(kind: str, tmp_path: Path) -> None:
    hf = save_hf(kind, tmp_path)
    assert is_hf_task_directory(tmp_path)
    model = load_hf_task_model(tmp_path)
    assert model.kind == kind
    batch = make_batch(kind)
    ours, theirs = ptm_logits(model, batch), hf_outputs(hf, kind, batch)
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() <= TOL
    if kind == "classification":
        assert model.label_names == ["neg", "neu", "pos"]
    if kind == "tagging":
        assert model.num_labels == 5 and model.label_names is not None
        assert model.label_names[1] == "B-PER"


@pytest.mark.parametrize("kind", list(HF_CLASSES))
def test_exported_model_loads_in_transformers_with_the_same_logits(
    kind: str, tmp_path: Path
) -> None:
    torch.manual_seed(3)
    encoder = bert_encoder(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_positions=32,
    )
    num_labels = {"classification": 3, "regression": 1, "tagging": 5}.get(kind, 2)
    model = build_task_model(encoder, kind, num_labels)
    with torch.no_grad():
        for param in model.head.parameters():
            param.normal_(std=0.1)
    labels = ["a", "b", "c"] if kind == "classification" else None
    export_hf_task_model(model, tmp_path, label_names=labels)
    hf, info = HF_CLASSES[kind].from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() or info["missing_keys"] == []
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    hf.eval()
    batch = make_batch(kind, seed=2)
    assert (ptm_logits(model, batch) - hf_outputs(hf, kind, batch)).abs().max().item() <= TOL
    config = json.loads((tmp_path / "config.json").read_text())
    if kind == "classification":
        assert config["id2label"] == {"0": "a", "1": "b", "2": "c"}
        assert hf.config.label2id == {"a": 0, "b": 1, "c": 2}
    if kind == "regression":
        assert hf.config.problem_type == "regression" and hf.config.num_labels == 1
    # And back again: ptm reads its own export.
    again = load_hf_task_model(tmp_path)
    assert torch.equal(ptm_logits(again, batch), ptm_logits(model, batch))


def test_classification_and_regression_losses_match(tmp_path: Path) -> None:
    for kind, labels in (
        ("classification", torch.tensor([0, 2, 1])),
        ("regression", torch.tensor([0.5, -1.0, 2.0])),
    ):
        hf = save_hf(kind, tmp_path / kind)
        model = load_hf_task_model(tmp_path / kind).eval()
        batch = {**make_batch(kind), "labels": labels}
        with torch.no_grad():
            ours = model(batch).loss
            theirs = hf(**batch).loss
        assert ours is not None
        assert abs(ours.item() - theirs.item()) <= TOL, kind


def test_token_classification_loss_matches(tmp_path: Path) -> None:
    hf = save_hf("tagging", tmp_path)
    model = load_hf_task_model(tmp_path).eval()
    batch = make_batch("tagging")
    labels = torch.randint(0, 5, (3, 10), generator=torch.Generator().manual_seed(4))
    labels[:, 0] = -100
    labels[0, 7:] = -100
    batch["labels"] = labels
    with torch.no_grad():
        ours, theirs = model(batch).loss, hf(**batch).loss
    assert ours is not None and abs(ours.item() - theirs.item()) <= TOL


def test_qa_loss_matches_with_positions_outside_the_window(tmp_path: Path) -> None:
    hf = save_hf("qa", tmp_path)
    model = load_hf_task_model(tmp_path).eval()
    batch = make_batch("qa")
    # Row 2's end lies past the window (L = 10): clamped to L and ignored by both.
    batch["start_positions"] = torch.tensor([3, 0, 6])
    batch["end_positions"] = torch.tensor([5, 0, 25])
    with torch.no_grad():
        ours, out = model(batch).loss, hf(**batch)
    logits = hf_qa_logits(out.start_logits, out.end_logits, batch["attention_mask"])
    length = logits.shape[1]
    # transformers' loss (clamp to L, ignore L), without padding in the softmax.
    theirs = (
        sum(
            torch.nn.functional.cross_entropy(
                logits[..., i], batch[key].clamp(0, length), ignore_index=length
            )
            for i, key in enumerate(("start_positions", "end_positions"))
        )
        / 2
    )
    assert ours is not None and abs(ours.item() - float(theirs)) <= TOL


def test_multiple_choice_loss_matches(tmp_path: Path) -> None:
    hf = save_hf("multiple_choice", tmp_path)
    model = load_hf_task_model(tmp_path).eval()
    batch = {**make_batch("multiple_choice"), "labels": torch.tensor([1, 3, 0])}
    with torch.no_grad():
        ours, theirs = model(batch).loss, hf(**batch).loss
    assert ours is not None and abs(ours.item() - theirs.item()) <= TOL


def test_wrong_folders_are_refused_with_the_file_named(tmp_path: Path) -> None:
    hf = save_hf("qa", tmp_path / "qa")
    # A QA folder whose config claims token classification: the qa_outputs tensors are
    # unknown to it and the classifier is missing.
    config = json.loads((tmp_path / "qa" / "config.json").read_text())
    config["architectures"] = ["BertForTokenClassification"]
    (tmp_path / "qa" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: .*classifier.*qa_outputs"):
        load_hf_task_model(tmp_path / "qa")
    hf.bert.save_pretrained(tmp_path / "bare")
    with pytest.raises(CheckpointError, match=r"BertModel.*valid: BertForSequenceClassification"):
        load_hf_task_model(tmp_path / "bare")
    assert not is_hf_task_directory(tmp_path / "bare")
