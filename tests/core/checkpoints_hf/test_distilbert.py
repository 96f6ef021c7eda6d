"""DistilBERT folders against transformers: same weights, fp32, logits within 1e-5.

The encoder, the MLM head and the task heads (sequence classification with its
``pre_classifier`` -> ReLU, token classification, QA, multiple choice) load into ptm with
transformers' outputs on every real token, export back with no missing or unexpected
tensor, and a mismatched folder is refused naming the file and the tensor or key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from hf_folders import assert_close_on_tokens, hf_logits, saved
from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.encoder import save_encoder
from ptm_core.checkpoints.hf.bert_tasks import export_hf_task_model, load_hf_task_model
from ptm_core.checkpoints.hf.pretraining_heads import load_hf_pretraining_heads
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import build_task_model, load_task_model, save_task_model
from ptm_core.objectives import MaskedLMObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo

TOL = 1e-5
VOCAB = 97
TASKS = {
    "SequenceClassification": "AutoModelForSequenceClassification",
    "TokenClassification": "AutoModelForTokenClassification",
    "QuestionAnswering": "AutoModelForQuestionAnswering",
    "MultipleChoice": "AutoModelForMultipleChoice",
}


def tiny_config(**extra: Any) -> transformers.DistilBertConfig:
    return transformers.DistilBertConfig(
        vocab_size=VOCAB,
        dim=24,
        n_layers=2,
        n_heads=3,
        hidden_dim=37,
        max_position_embeddings=19,
        dropout=0.0,
        attention_dropout=0.0,
        **extra,
    )


def batch(choices: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shape = (2, choices, 9) if choices else (2, 9)
    ids = torch.randint(1, VOCAB, shape, generator=g)
    mask = torch.ones_like(ids)
    mask[1, ..., 6:] = 0
    return {"input_ids": ids * mask, "attention_mask": mask}


def test_encoder_and_mlm_head_match_and_export_back(tmp_path: Path) -> None:
    theirs = saved(transformers.DistilBertForMaskedLM(tiny_config()), tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path).eval()
    assert encoder.config.type_vocab_size == 0
    mix = ObjectiveMix(
        {
            "mlm": build_objective(
                MaskedLMObjective, encoder, VocabInfo(VOCAB, 0, 100, 101, 102, 103)
            )
        }
    )
    assert load_hf_pretraining_heads(mix, tmp_path) == (["mlm"], [])
    inputs = batch()
    with torch.no_grad():
        hidden = encoder(**inputs).last_hidden_state
        assert_close_on_tokens(
            hidden, theirs.distilbert(**inputs).last_hidden_state, inputs["attention_mask"]
        )
        assert_close_on_tokens(
            dict(mix)["mlm"].head(hidden), hf_logits(theirs, inputs), inputs["attention_mask"]
        )

    out = tmp_path / "export"
    save_encoder(encoder, out, format="hf", heads=mix)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["DistilBertForMaskedLM"]
    back, info = transformers.AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert type(back) is transformers.DistilBertForMaskedLM
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert_close_on_tokens(
        hf_logits(back.eval(), inputs), hf_logits(theirs, inputs), inputs["attention_mask"]
    )


@pytest.mark.parametrize("task", list(TASKS))
def test_task_heads_match_and_export_back(task: str, tmp_path: Path) -> None:
    cls = getattr(transformers, f"DistilBertFor{task}")
    labels = {} if task in ("QuestionAnswering", "MultipleChoice") else {"num_labels": 3}
    theirs = saved(cls(tiny_config(**labels)), tmp_path / "hf")
    ours = load_hf_task_model(tmp_path / "hf").eval()
    inputs = batch(choices=3 if task == "MultipleChoice" else 0)
    with torch.no_grad():
        logits = ours(inputs).logits
    expected = hf_logits(theirs, inputs)
    assert_close_on_tokens(logits, expected, inputs["attention_mask"])

    # Through ptm's own format too: task.json keeps the ReLU pooler.
    save_task_model(ours, tmp_path / "ptm", task_config={})
    reloaded, _ = load_task_model(tmp_path / "ptm")
    out = export_hf_task_model(reloaded, tmp_path / "export")
    back, info = getattr(transformers, TASKS[task]).from_pretrained(out, output_loading_info=True)
    assert type(back) is cls
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert_close_on_tokens(hf_logits(back.eval(), inputs), expected, inputs["attention_mask"])


def test_a_fresh_head_on_a_distilbert_encoder_uses_its_relu_pooler(tmp_path: Path) -> None:
    transformers.DistilBertModel(tiny_config()).save_pretrained(tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path)
    model = build_task_model(encoder, "classification", 2)
    assert model.head.pooler.activation == "relu"
    bert_head = build_task_model(encoder, "classification", 2, activation="tanh")
    with pytest.raises(
        CheckpointError,
        match=r"pooler activation 'tanh'.*DistilBertForSequenceClassification has pre_classifier",
    ):
        export_hf_task_model(bert_head, tmp_path / "out")


def test_mismatched_folders_are_refused_naming_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good"
    saved(transformers.DistilBertForSequenceClassification(tiny_config()), good)
    raw = json.loads((good / "config.json").read_text())
    weights = load_file(str(good / "model.safetensors"))

    def variant(name: str, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        save_file(tensors, str(folder / "model.safetensors"))
        return folder

    roberta_named = variant("type", {**raw, "model_type": "roberta"}, weights)
    with pytest.raises(CheckpointError) as exc:
        load_hf_task_model(roberta_named)
    assert "\n" not in str(exc.value)
    assert str(roberta_named / "config.json") in str(exc.value) and "'roberta'" in str(exc.value)

    gone = "distilbert.transformer.layer.0.ffn.lin2.weight"
    missing = variant("missing", raw, {k: v for k, v in weights.items() if k != gone})
    with pytest.raises(CheckpointError) as exc:
        load_hf_task_model(missing)
    assert str(exc.value).startswith(str(missing / "model.safetensors"))
    assert "transformer.layer.0.ffn.lin2.weight" in str(exc.value)

    other_vocab = variant("vocab", {**raw, "vocab_size": VOCAB - 2}, weights)
    with pytest.raises(CheckpointError) as exc:
        TransformerEncoder.from_pretrained(other_vocab)
    assert str(exc.value).startswith(str(other_vocab / "model.safetensors"))
    assert f"embeddings.word.weight: checkpoint ({VOCAB}, 24) vs model ({VOCAB - 2}, 24)" in str(
        exc.value
    )
