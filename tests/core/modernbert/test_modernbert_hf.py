"""ModernBERT folders against transformers: same weights, fp32, outputs within 1e-5.

A random ``ModernBertModel`` / ``ModernBertForMaskedLM`` of odd sizes (48 wide, 3 heads,
3 layers, a local window of 8, i.e. 4 positions to each side, on rows longer than that)
loads into ptm with the same hidden states and MLM logits on every real token, on the
padded and on the unpadded path; what ptm exports loads back into transformers with no
missing or unexpected tensor and the same outputs. Mismatched folders are refused naming
the file and the tensor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.encoder import save_encoder
from ptm_core.checkpoints.hf.pretraining_heads import load_hf_pretraining_heads
from ptm_core.encoders.modernbert import ModernBertConfig, ModernBertEncoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.modules.execution import ExecutionSettings
from ptm_core.objectives import MaskedLMObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo

TOL = 1e-5
VOCAB = 97
PAD = 0
LENGTH = 21


def tiny_config(**extra: Any) -> transformers.ModernBertConfig:
    values: dict[str, Any] = {
        "vocab_size": VOCAB,
        "hidden_size": 48,
        "num_hidden_layers": 3,
        "num_attention_heads": 3,
        "intermediate_size": 40,
        "max_position_embeddings": 64,
        "local_attention": 8,
        "global_attn_every_n_layers": 2,
        "global_rope_theta": 1000.0,
        "local_rope_theta": 77.0,
        "pad_token_id": PAD,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "cls_token_id": 1,
        "sep_token_id": 2,
        "attn_implementation": "sdpa",
    }
    values.update(extra)
    return transformers.ModernBertConfig(**values)


def saved(model: Any, directory: Path) -> Any:
    """``model`` with every tensor moved off its init (so each name is checked), saved."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=g))
    model.save_pretrained(directory)
    return model.eval()


def batch() -> dict[str, torch.Tensor]:
    """Right-padded rows of 21 tokens (16, 9 and 21 real ones): longer than the window."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (3, LENGTH), generator=g)
    mask = torch.ones_like(ids)
    mask[0, 16:] = 0
    mask[1, 9:] = 0
    return {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask}


def close_on_tokens(ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor) -> float:
    real = mask.bool()
    return (ours[real] - theirs[real]).abs().max().item()


@pytest.mark.parametrize("unpadding", ["off", "on"])
def test_encoder_and_mlm_head_match_and_export_back(unpadding: str, tmp_path: Path) -> None:
    theirs = saved(transformers.ModernBertForMaskedLM(tiny_config()), tmp_path / "hf")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    assert isinstance(encoder, ModernBertEncoder)
    config = encoder.config
    assert isinstance(config, ModernBertConfig)
    assert (config.global_rope_theta, config.local_rope_theta) == (1000.0, 77.0)
    assert (config.window, config.global_attn_every_n_layers) == (4, 2)
    encoder.apply_execution_settings(ExecutionSettings(unpadding=unpadding))
    vocab = VocabInfo(VOCAB, PAD, 3, 1, 2, 4)
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, vocab)})
    assert load_hf_pretraining_heads(mix, tmp_path / "hf") == (["mlm"], [])
    inputs = batch()
    mask = inputs["attention_mask"]
    with torch.no_grad():
        hidden = encoder(**inputs).last_hidden_state
        logits = dict(mix)["mlm"].head(hidden)
        base = theirs.model(**inputs).last_hidden_state
        expected = theirs(**inputs).logits
    assert close_on_tokens(hidden, base, mask) <= TOL
    assert close_on_tokens(logits, expected, mask) <= TOL

    out = tmp_path / "export"
    save_encoder(encoder, out, format="hf", heads=mix)
    written = json.loads((out / "config.json").read_text())
    assert written["architectures"] == ["ModernBertForMaskedLM"]
    assert written["model_type"] == "modernbert"
    back, info = transformers.AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert type(back).__name__ == "ModernBertForMaskedLM"
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        again = back.eval()(**inputs).logits
    assert close_on_tokens(again, expected, mask) <= TOL


def test_trained_head_biases_export_exactly(tmp_path: Path) -> None:
    """ptm's MLM head has a dense and a norm bias; ModernBERT's norms have none. The export
    sets classifier_bias and folds the norm bias into the decoder bias: same logits."""
    theirs = saved(transformers.ModernBertForMaskedLM(tiny_config()), tmp_path / "hf")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    mix = ObjectiveMix(
        {"mlm": build_objective(MaskedLMObjective, encoder, VocabInfo(VOCAB, PAD, 3, 1, 2, 4))}
    )
    load_hf_pretraining_heads(mix, tmp_path / "hf")
    head = dict(mix)["mlm"].head
    with torch.no_grad():
        head.dense.bias.normal_(0.0, 0.3)
        head.norm.bias.normal_(0.0, 0.3)
    inputs = batch()
    with torch.no_grad():
        ours = head(encoder(**inputs).last_hidden_state)
    save_encoder(encoder, tmp_path / "export", format="hf", heads=mix)
    back = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "export").eval()
    with torch.no_grad():
        again = back(**inputs).logits
    assert close_on_tokens(again, ours, inputs["attention_mask"]) <= TOL
    del theirs


def test_bare_model_with_biases_round_trips(tmp_path: Path) -> None:
    """norm_bias / attention_bias / mlp_bias true: every bias is mapped both ways."""
    config = tiny_config(norm_bias=True, attention_bias=True, mlp_bias=True)
    theirs = saved(transformers.ModernBertModel(config), tmp_path / "hf")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    inputs = batch()
    with torch.no_grad():
        expected = theirs(**inputs).last_hidden_state
        hidden = encoder(**inputs).last_hidden_state
    assert close_on_tokens(hidden, expected, inputs["attention_mask"]) <= TOL
    save_encoder(encoder, tmp_path / "export", format="hf-modernbert")
    back, info = transformers.AutoModel.from_pretrained(
        tmp_path / "export", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        again = back.eval()(**inputs).last_hidden_state
    assert close_on_tokens(again, expected, inputs["attention_mask"]) <= TOL


def test_ptm_folder_round_trips_with_its_kind(tmp_path: Path) -> None:
    encoder = ModernBertEncoder(
        ModernBertConfig(
            vocab_size=VOCAB,
            hidden_size=48,
            num_heads=3,
            num_layers=3,
            intermediate_size=40,
            local_attention=8,
        )
    ).eval()
    encoder.save_pretrained(tmp_path / "ptm")
    raw = json.loads((tmp_path / "ptm" / "config.json").read_text())
    assert raw["ptm_model"] == "modernbert" and raw["position_encoding"] == "rotary"
    back = TransformerEncoder.from_pretrained(tmp_path / "ptm").eval()
    assert isinstance(back, ModernBertEncoder)
    inputs = batch()
    with torch.no_grad():
        a = encoder(**inputs).last_hidden_state
        b = back(**inputs).last_hidden_state
    assert torch.equal(a, b)


def _first_line(exc: pytest.ExceptionInfo[CheckpointError]) -> str:
    return str(exc.value).splitlines()[0]


def test_mismatched_folders_are_refused_naming_the_file_and_the_tensor(tmp_path: Path) -> None:
    good = tmp_path / "good"
    saved(transformers.ModernBertForMaskedLM(tiny_config()), good)
    weights = load_file(str(good / "model.safetensors"))
    raw = json.loads((good / "config.json").read_text())

    def variant(name: str, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        save_file(tensors, str(folder / "model.safetensors"))
        return folder

    # A ModernBERT file under another model type: BERT's converter names what it misses.
    wrong_type = variant("type", {**raw, "model_type": "modernbertx"}, weights)
    with pytest.raises(CheckpointError) as exc:
        TransformerEncoder.from_pretrained(wrong_type)
    assert str(exc.value) == _first_line(exc)
    assert str(wrong_type / "config.json") in str(exc.value)
    assert "'modernbertx'" in str(exc.value)

    gone = "model.layers.1.mlp.Wi.weight"
    missing = variant("missing", raw, {k: v for k, v in weights.items() if k != gone})
    with pytest.raises(CheckpointError) as exc:
        TransformerEncoder.from_pretrained(missing)
    assert _first_line(exc).startswith(str(missing / "model.safetensors"))
    assert "layers.1.mlp.Wi.weight" in str(exc.value)

    other_vocab = variant("vocab", {**raw, "vocab_size": VOCAB + 3}, weights)
    with pytest.raises(CheckpointError) as exc:
        TransformerEncoder.from_pretrained(other_vocab)
    assert _first_line(exc).startswith(str(other_vocab / "model.safetensors"))
    assert f"embeddings.word.weight: checkpoint ({VOCAB}, 48) vs model ({VOCAB + 3}, 48)" in str(
        exc.value
    )

    pattern = variant(
        "pattern",
        {**raw, "layer_types": ["sliding_attention", "full_attention", "full_attention"]},
        weights,
    )
    with pytest.raises(CheckpointError) as exc:
        TransformerEncoder.from_pretrained(pattern)
    assert str(exc.value) == _first_line(exc)
    assert str(pattern / "config.json") in str(exc.value) and "layer_types" in str(exc.value)


TASKS = {
    "SequenceClassification": "AutoModelForSequenceClassification",
    "TokenClassification": "AutoModelForTokenClassification",
    "QuestionAnswering": "AutoModelForQuestionAnswering",
    "MultipleChoice": "AutoModelForMultipleChoice",
}


def _hf_logits(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        out = model(**inputs)
    if hasattr(out, "start_logits"):
        return torch.stack([out.start_logits, out.end_logits], dim=-1)
    return out.logits


def _task_batch(task: str) -> dict[str, torch.Tensor]:
    inputs = batch()
    if task != "MultipleChoice":
        return inputs
    return {k: v.view(1, 3, LENGTH) for k, v in inputs.items()}  # 1 question, 3 choices


def _compare(task: str, ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor) -> float:
    if task in ("TokenClassification", "QuestionAnswering"):
        return close_on_tokens(ours, theirs, mask)
    return (ours - theirs).abs().max().item()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("task", list(TASKS))
def test_task_heads_match_and_export_back(task: str, pooling: str, tmp_path: Path) -> None:
    from ptm_core.checkpoints.hf.bert_tasks import export_hf_task_model, load_hf_task_model

    if pooling == "mean" and task in ("TokenClassification", "QuestionAnswering"):
        pytest.skip("classifier_pooling only changes the pooled heads")
    cls = getattr(transformers, f"ModernBertFor{task}")
    labels = {} if task in ("QuestionAnswering", "MultipleChoice") else {"num_labels": 3}
    config = tiny_config(classifier_pooling=pooling, **labels)
    theirs = saved(cls(config), tmp_path / "hf")
    ours = load_hf_task_model(tmp_path / "hf").eval()
    inputs = _task_batch(task)
    mask = batch()["attention_mask"]
    with torch.no_grad():
        logits = ours(inputs).logits
    expected = _hf_logits(theirs, inputs)
    assert _compare(task, logits, expected, mask) <= TOL

    with torch.no_grad():  # a trained head: both biases off zero
        ours.head.dense.bias.normal_(0.0, 0.2)
        ours.head.norm.bias.normal_(0.0, 0.2)
        trained = ours(inputs).logits
    out = export_hf_task_model(ours, tmp_path / "export")
    back, info = getattr(transformers, TASKS[task]).from_pretrained(out, output_loading_info=True)
    assert type(back) is cls
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert _compare(task, _hf_logits(back.eval(), inputs), trained, mask) <= TOL
