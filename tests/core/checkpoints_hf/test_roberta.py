"""RoBERTa and XLM-R folders against transformers: same weights, fp32, logits within 1e-5.

Both ways, for the encoder and every head (MLM, sequence and token classification, QA,
multiple choice): a random transformers model of odd sizes loads into ptm with the same
outputs on every real token, and what ptm exports loads back into transformers' auto
classes with no missing or unexpected tensor and the same outputs. RoBERTa's positions
start at ``padding_idx + 1``; the batch is right-padded as ptm pads.
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
from ptm_core.encoders.config import HFEncoderConfig
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives import MaskedLMObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo

TOL = 1e-5
VOCAB = 97
PAD = 1
PREFIX = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta"}
CONFIGS = {"roberta": transformers.RobertaConfig, "xlm-roberta": transformers.XLMRobertaConfig}
TASKS = {
    "SequenceClassification": "AutoModelForSequenceClassification",
    "TokenClassification": "AutoModelForTokenClassification",
    "QuestionAnswering": "AutoModelForQuestionAnswering",
    "MultipleChoice": "AutoModelForMultipleChoice",
}


def tiny_config(model_type: str, **extra: Any) -> Any:
    return CONFIGS[model_type](
        vocab_size=VOCAB,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=37,
        max_position_embeddings=23,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=PAD,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **extra,
    )


def batch(choices: int = 0) -> dict[str, torch.Tensor]:
    """Right-padded rows of 9 tokens (the second row has 5 real ones); (B, C, L) for MC."""
    g = torch.Generator().manual_seed(0)
    shape = (2, choices, 9) if choices else (2, 9)
    ids = torch.randint(3, VOCAB, shape, generator=g)
    mask = torch.ones_like(ids)
    mask[1, ..., 5:] = 0
    return {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask}


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_encoder_and_mlm_head_match_and_export_back(model_type: str, tmp_path: Path) -> None:
    prefix = PREFIX[model_type]
    theirs = saved(getattr(transformers, f"{prefix}ForMaskedLM")(tiny_config(model_type)), tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path).eval()
    assert isinstance(encoder.config, HFEncoderConfig)
    assert encoder.config.hf_model_type == model_type
    assert encoder.config.max_positions == 23 - (PAD + 1)
    vocab = VocabInfo(VOCAB, PAD, 3, 0, 2, 4)
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, vocab)})
    assert load_hf_pretraining_heads(mix, tmp_path) == (["mlm"], [])
    inputs = batch()
    mask = inputs["attention_mask"]
    with torch.no_grad():
        hidden = encoder(**inputs).last_hidden_state
        logits = dict(mix)["mlm"].head(hidden)
        base = theirs.roberta(**inputs).last_hidden_state
    assert_close_on_tokens(hidden, base, mask)
    assert_close_on_tokens(logits, hf_logits(theirs, inputs), mask)

    out = tmp_path / "export"
    save_encoder(encoder, out, format="hf", heads=mix)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [f"{prefix}ForMaskedLM"]
    assert config["model_type"] == model_type and config["max_position_embeddings"] == 23
    back, info = transformers.AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert type(back).__name__ == f"{prefix}ForMaskedLM"
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert_close_on_tokens(hf_logits(back.eval(), inputs), hf_logits(theirs, inputs), mask)


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_task_heads_match_and_export_back(model_type: str, task: str, tmp_path: Path) -> None:
    cls = getattr(transformers, f"{PREFIX[model_type]}For{task}")
    labels = {} if task in ("QuestionAnswering", "MultipleChoice") else {"num_labels": 3}
    theirs = saved(cls(tiny_config(model_type, **labels)), tmp_path / "hf")
    ours = load_hf_task_model(tmp_path / "hf").eval()
    inputs = batch(choices=4 if task == "MultipleChoice" else 0)
    with torch.no_grad():
        logits = ours(inputs).logits
    expected = hf_logits(theirs, inputs)
    assert_close_on_tokens(logits, expected, inputs["attention_mask"])

    out = export_hf_task_model(ours, tmp_path / "export")
    auto = getattr(transformers, TASKS[task])
    back, info = auto.from_pretrained(out, output_loading_info=True)
    assert type(back) is cls
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert_close_on_tokens(hf_logits(back.eval(), inputs), expected, inputs["attention_mask"])


def _first_line(exc: pytest.ExceptionInfo[CheckpointError]) -> str:
    """The line that names the file (check_state lists the tensors under it)."""
    return str(exc.value).splitlines()[0]


def test_mismatched_folders_are_refused_naming_the_file_and_the_tensor(tmp_path: Path) -> None:
    good = tmp_path / "good"
    saved(transformers.RobertaForSequenceClassification(tiny_config("roberta")), good)
    weights = load_file(str(good / "model.safetensors"))

    def variant(name: str, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        save_file(tensors, str(folder / "model.safetensors"))
        return folder

    raw = json.loads((good / "config.json").read_text())
    wrong_type = variant("type", {**raw, "model_type": "camembert"}, weights)
    with pytest.raises(CheckpointError) as exc:
        TransformerEncoder.from_pretrained(wrong_type)
    assert str(exc.value) == _first_line(exc)
    assert f"{wrong_type / 'config.json'}: model_type 'camembert'" in str(exc.value)

    bert_named = variant("bert", {**raw, "model_type": "bert"}, weights)
    with pytest.raises(CheckpointError) as exc:
        load_hf_task_model(bert_named)
    assert str(exc.value) == _first_line(exc)
    assert str(bert_named / "config.json") in str(exc.value)
    assert "RobertaForSequenceClassification" in str(exc.value)

    gone = "roberta.encoder.layer.1.output.dense.weight"
    missing = variant("missing", raw, {k: v for k, v in weights.items() if k != gone})
    # The task loader names the tensor as the file spells it; the encoder loader lists them.
    for load, named in (
        (load_hf_task_model, f"tensor '{gone}' is missing"),
        (TransformerEncoder.from_pretrained, "missing tensors:\n  encoder.layer.1.output.dense"),
    ):
        with pytest.raises(CheckpointError) as exc:
            load(missing)
        assert _first_line(exc).startswith(str(missing / "model.safetensors"))
        assert named in str(exc.value)

    other_vocab = variant("vocab", {**raw, "vocab_size": VOCAB + 3}, weights)
    with pytest.raises(CheckpointError) as exc:
        load_hf_task_model(other_vocab)
    assert _first_line(exc).startswith(str(other_vocab / "model.safetensors"))
    assert (
        f"tensor 'roberta.embeddings.word_embeddings.weight' has shape ({VOCAB}, 24) but "
        f"{other_vocab / 'config.json'} describes ({VOCAB + 3}, 24)"
    ) in str(exc.value)
