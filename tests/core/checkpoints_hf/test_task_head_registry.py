"""One registry of Hugging Face task classes for every model type ptm reads.

Every ``model_type`` a family registers lists the four ``...For<Task>`` classes (class
names unique across model types); RoBERTa's and DistilBERT's heads are pooler variants
that ``task.json`` keeps under the same keys as ELECTRA's (``pooler_activation``,
``pooler_input_dropout``), and a ``task.json`` without them (every folder written before
#33) is BERT's tanh head.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers

from ptm_core.checkpoints import registry
from ptm_core.checkpoints.hf.bert_tasks import load_hf_task_model
from ptm_core.finetune.model import load_task_model, save_task_model

TASK_KINDS = {"classification", "tagging", "qa", "multiple_choice"}


def test_every_hf_model_type_lists_its_four_task_classes() -> None:
    seen: dict[str, str] = {}
    for model_type in registry.hf_encoder_families():
        module = registry.hf_encoder_family(model_type)
        assert module is not None
        rows = module.task_heads(model_type)
        assert {row.kind for row in rows} == TASK_KINDS, model_type
        for row in rows:
            assert row.architecture not in seen, (row.architecture, seen.get(row.architecture))
            seen[row.architecture] = model_type
    assert seen["XLMRobertaForSequenceClassification"] == "xlm-roberta"
    assert seen["DistilBertForMultipleChoice"] == "distilbert"


def _tiny(model_class: type, config: object, directory: Path) -> None:
    torch.manual_seed(0)
    model_class(config).save_pretrained(directory)


def test_roberta_and_distilbert_heads_are_recorded_as_pooler_variants(tmp_path: Path) -> None:
    sizes = dict(vocab_size=50, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    _tiny(
        transformers.RobertaForSequenceClassification,
        transformers.RobertaConfig(hidden_size=8, max_position_embeddings=20, **sizes),
        tmp_path / "roberta",
    )
    _tiny(
        transformers.DistilBertForSequenceClassification,
        transformers.DistilBertConfig(
            vocab_size=50, dim=8, n_layers=1, n_heads=2, hidden_dim=16, seq_classif_dropout=0.3
        ),
        tmp_path / "distilbert",
    )
    expected = {
        "roberta": {"pooler_input_dropout": True},
        "distilbert": {"pooler_activation": "relu"},
    }
    for name, keys in expected.items():
        model = load_hf_task_model(tmp_path / name)
        save_task_model(model, tmp_path / f"{name}-ptm", task_config={})
        record = json.loads((tmp_path / f"{name}-ptm" / "task.json").read_text())
        variant = {k: v for k, v in record.items() if k.startswith("pooler_")}
        assert variant == keys, name
        assert "activation" not in record
        reloaded, _ = load_task_model(tmp_path / f"{name}-ptm")
        pooler = reloaded.head.pooler
        assert pooler.activation == keys.get("pooler_activation", "tanh")
        assert reloaded.head.input_dropout is keys.get("pooler_input_dropout", False)
    assert json.loads((tmp_path / "distilbert-ptm" / "task.json").read_text())["dropout"] == 0.3


def test_a_task_json_without_pooler_keys_is_berts_tanh_head(tmp_path: Path) -> None:
    _tiny(
        transformers.DistilBertForSequenceClassification,
        transformers.DistilBertConfig(vocab_size=50, dim=8, n_layers=1, n_heads=2, hidden_dim=16),
        tmp_path / "hf",
    )
    save_task_model(load_hf_task_model(tmp_path / "hf"), tmp_path / "ptm", task_config={})
    path = tmp_path / "ptm" / "task.json"
    record = json.loads(path.read_text())
    del record["pooler_activation"]  # as main wrote task.json: no pooler keys
    path.write_text(json.dumps(record))
    model, _ = load_task_model(tmp_path / "ptm")
    # Even on an encoder imported from DistilBERT: the record, not the encoder, decides.
    assert model.head.pooler.activation == "tanh"
    assert model.head.input_dropout is False
