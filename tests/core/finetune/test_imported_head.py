"""``keep_imported_head``: an ALBERT or XLNet task folder's head is kept for a task of the
same kind and labels (rows reordered to the task's label order), and replaced by a fresh
head of the same variant otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from ptm_core.checkpoints.hf.bert_tasks import load_hf_task_model
from ptm_core.finetune.imported_head import keep_imported_head
from ptm_core.finetune.model import head_settings

LABELS = {0: "pos", 1: "neg", 2: "neu"}


def _folder(family: str, path: Path) -> None:
    torch.manual_seed(0)
    if family == "albert":
        config = transformers.AlbertConfig(
            vocab_size=97,
            embedding_size=16,
            hidden_size=24,
            num_hidden_layers=2,
            num_attention_heads=3,
            intermediate_size=40,
            id2label=LABELS,
        )
        transformers.AlbertForSequenceClassification(config).save_pretrained(path)
    else:
        config = transformers.XLNetConfig(
            vocab_size=97, d_model=24, n_layer=2, n_head=3, d_inner=40, id2label=LABELS
        )
        transformers.XLNetForSequenceClassification(config).save_pretrained(path)


@pytest.mark.parametrize("family", ["albert", "xlnet"])
def test_the_head_is_kept_with_rows_in_the_tasks_order(family: str, tmp_path: Path) -> None:
    _folder(family, tmp_path)
    imported = load_hf_task_model(tmp_path)
    before = imported.head.classifier.weight.detach().clone()
    model, note = keep_imported_head(imported, "classification", 3, ["neg", "neu", "pos"], 0.2)
    assert note.startswith("task head kept from the folder")
    assert model.head is imported.head and model.label_names == ["neg", "neu", "pos"]
    assert torch.equal(model.head.classifier.weight, before[[1, 2, 0]])
    assert model.head.dropout.p == 0.2


@pytest.mark.parametrize("family", ["albert", "xlnet"])
def test_other_labels_or_kind_get_a_fresh_head_of_the_same_variant(
    family: str, tmp_path: Path
) -> None:
    _folder(family, tmp_path)
    imported = load_hf_task_model(tmp_path)
    model, note = keep_imported_head(imported, "classification", 2, ["a", "b"], 0.1)
    assert note.startswith("task head initialised fresh") and "3 labels" in note
    assert model.head is not imported.head and model.encoder is imported.encoder
    assert head_settings(model.head)["pool"] == ("last" if family == "xlnet" else "first")
    model, note = keep_imported_head(imported, "multiple_choice", 4, None, 0.1)
    assert "the folder's is classification" in note and model.kind == "multiple_choice"
