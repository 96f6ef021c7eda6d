"""ULMFiT/ELECTRA per-depth switches on BART/T5: the layer groups of an encoder-decoder
(head -> decoder top..bottom -> encoder top..bottom -> embeddings), exact per-depth rates,
the unfreezing order, and a few recipe steps with both switches on."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.encoders import build_encoder_decoder
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.recipe import finetune_seq2seq
from ptm_core.finetune.seq2seq import Seq2SeqClassifier
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.finetune.text_to_text import TextToTextModel
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.finetuning import (
    GradualUnfreezing,
    LayerGroups,
    discriminative_param_groups,
    encoder_decoder_depth,
    parameter_depths,
)

REPO = Path(__file__).resolve().parents[3]
VOCAB = REPO / "data_specs/text_corpus/sample-vocab.txt"
E, D = 2, 3  # encoder and decoder layers: different, so a swapped order is caught
TOP = E + D + 1


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)


def _model(tokenizer: WordPieceTokenizer, layout: str) -> EncoderDecoderModel:
    torch.manual_seed(0)
    vocab = tokenizer.vocab_info
    extra: dict[str, Any] = (
        dict(
            position_encoding="t5_buckets",
            norm_type="rmsnorm",
            norm_position="pre",
            position_offset=0,
            bias=False,
            attention_scale=False,
            embedding_layer_norm=False,
            scale_decoder_output=True,
            initialization="t5",
            tie_lm_head=False,
        )
        if layout == "t5"
        else {}
    )
    return build_encoder_decoder(
        tokenizer.vocab_size,
        hidden_size=16,
        encoder_layers=E,
        decoder_layers=D,
        num_heads=2,
        intermediate_size=32,
        max_positions=64,
        dropout=0.0,
        pad_token_id=vocab.pad_id,
        bos_token_id=vocab.cls_id,
        eos_token_id=vocab.sep_id,
        decoder_start_token_id=vocab.cls_id,
        **extra,
    )


def _expected_depth(name: str, *, lm_head: int) -> int:
    """The documented order, written out independently of encoder_decoder_depth."""
    if not name.startswith("model."):
        return TOP
    rest = name[len("model.") :]
    if rest.startswith("lm_head."):
        return lm_head
    side, part = rest.split(".", 1)
    if part.startswith("embeddings."):
        return 0
    if part.startswith("layers."):
        index = int(part.split(".")[1])
        return 1 + index if side == "encoder" else 1 + E + index
    if part.startswith("relative_position_bias."):
        return E if side == "encoder" else E + D
    assert part.startswith("final_norm."), name
    return E if side == "encoder" else TOP


@pytest.mark.parametrize("layout", ["bart", "t5"])
def test_classifier_depths_follow_the_documented_order(layout: str) -> None:
    classifier = Seq2SeqClassifier(_model(_tokenizer(), layout), "classification", 3)
    assert isinstance(classifier, LayerGroups)
    assert classifier.depth_top() == TOP
    seen = set()
    for name, _ in classifier.named_parameters(remove_duplicate=False):
        assert classifier.parameter_depth(name) == _expected_depth(name, lm_head=0), name
        seen.add(classifier.parameter_depth(name))
    assert seen == set(range(TOP + 1))  # every depth holds something
    # The shared token table (also BART's tied LM head) stays at the bottom.
    depths = {name: d for name, _, d in parameter_depths(classifier)}
    assert depths["model.encoder.embeddings.word.weight"] == 0
    assert "model.decoder.embeddings.word.weight" not in depths  # shared: yielded once
    assert depths["head.dense.weight"] == TOP


def test_text_to_text_puts_the_lm_head_on_top() -> None:
    tokenizer = _tokenizer()
    t2t = TextToTextModel(_model(tokenizer, "t5"), tokenizer, ["negative", "positive"])
    assert t2t.depth_top() == TOP
    for name, _ in t2t.named_parameters(remove_duplicate=False):
        assert t2t.parameter_depth(name) == _expected_depth(name, lm_head=TOP), name


def test_unknown_parts_under_the_prefix_are_errors() -> None:
    with pytest.raises(ValueError, match="encoder_decoder_depth"):
        encoder_decoder_depth("model.adapter.weight", encoder_layers=E, decoder_layers=D)
    assert encoder_decoder_depth("head.out_proj.bias", encoder_layers=E, decoder_layers=D) == TOP


@pytest.mark.parametrize("layout", ["bart", "t5"])
def test_groups_get_lr_times_decay_to_the_distance_from_the_head(layout: str) -> None:
    classifier = Seq2SeqClassifier(_model(_tokenizer(), layout), "classification", 3)
    groups = discriminative_param_groups(
        classifier, learning_rate=1e-3, weight_decay=0.01, layer_decay=0.5
    )
    by_param = {}
    for group in groups:
        assert group["lr"] == 1e-3 * 0.5 ** (TOP - group["depth"])  # exact
        for param in group["params"]:
            by_param[id(param)] = group
    for name, param in classifier.named_parameters():
        group = by_param[id(param)]
        assert group["depth"] == _expected_depth(name, lm_head=0), name
        assert group["weight_decay"] == (0.01 if param.ndim >= 2 else 0.0), name
    assert len(by_param) == len(list(classifier.parameters()))


def test_unfreezing_goes_head_then_decoder_then_encoder_then_embeddings() -> None:
    classifier = Seq2SeqClassifier(_model(_tokenizer(), "bart"), "classification", 3)
    names = dict(classifier.named_parameters())
    unfreeze = GradualUnfreezing(classifier, every_steps=2)
    assert unfreeze.top == TOP and unfreeze.fully_unfrozen_at == 2 * TOP

    def trainable(step: int) -> set[str]:
        unfreeze.on_step_begin(step)
        return {name for name, p in names.items() if p.requires_grad}

    assert trainable(0) == {n for n in names if n.startswith("head.")}
    assert trainable(1) == trainable(0)
    step2 = trainable(2)
    assert {n for n in step2 - trainable(0)} == {
        n for n in names if n.startswith(("model.decoder.layers.2.",))
    }
    # Decoder layers unfreeze top down, all before any encoder layer.
    order = [f"model.decoder.layers.{i}." for i in (2, 1, 0)] + [
        f"model.encoder.layers.{i}." for i in (1, 0)
    ]
    for k, prefix in enumerate(order):
        step = 2 * (k + 1)
        now = trainable(step)
        assert any(n.startswith(prefix) for n in now), (step, prefix)
        for later in order[k + 1 :]:
            assert not any(n.startswith(later) for n in now), (step, later)
        assert "model.encoder.embeddings.word.weight" not in now
    assert trainable(2 * TOP) == set(names)


def _task(tmp_path: Path) -> TaskSpec:
    rows = ["sentence\tlabel"]
    for person in ("alan turing", "marie curie"):
        for i, place in enumerate(["cambridge", "london", "oxford", "paris"]):
            rows.append(f"{person} worked at {place} .\t{'positive' if i % 2 else 'negative'}")
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return TaskSpec.from_mapping(
        {
            "name": "places",
            "kind": "classification",
            "format": "glue",
            "train": str(path),
            "dev": str(path),
            "label_field": "label",
            "max_length": 16,
            "batch_size": 4,
            "eval_batch_size": 8,
            "metric": "accuracy",
        }
    )


@pytest.mark.parametrize("text_to_text", [False, True])
def test_a_few_steps_run_with_both_switches(tmp_path: Path, text_to_text: bool) -> None:
    tokenizer = _tokenizer()
    model = _model(tokenizer, "t5")
    embeddings_before = model.encoder.embeddings.word.weight.detach().clone()
    top_before = model.decoder.layers[D - 1].ffn_norm.weight.detach().clone()
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=4,
        learning_rate=1e-2,
        warmup_ratio=0.0,
        layer_lr_decay=0.8,
        unfreeze_every=1,
        log_every=1,
        save_every=1000,
        device="cpu",
        precision="fp32",
        progress=False,
    )
    result = finetune_seq2seq(
        _task(tmp_path),
        model=model,
        tokenizer=tokenizer,
        trainer=trainer,
        text_to_text=text_to_text,
    )
    logged = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    assert any("loss" in row for row in logged)
    # 4 steps, one more depth each: the decoder's top layer trained, the table (depth 0)
    # was still frozen at the last step (depth TOP - 3 = 3).
    assert torch.equal(model.encoder.embeddings.word.weight.detach(), embeddings_before)
    assert not torch.equal(model.decoder.layers[D - 1].ffn_norm.weight.detach(), top_before)
    assert "dev/accuracy" in result.final_metrics


def test_the_trainer_config_switches_reach_the_optimizer(tmp_path: Path) -> None:
    from ptm_core.training.optim import build_optimizer

    classifier = Seq2SeqClassifier(_model(_tokenizer(), "bart"), "classification", 3)
    config = dataclasses.replace(
        TrainerConfig(output_dir=str(tmp_path), learning_rate=2e-3, progress=False),
        layer_lr_decay=0.9,
    )
    optimizer = build_optimizer(classifier, config)
    rates = sorted({group["lr"] for group in optimizer.param_groups}, reverse=True)
    assert rates == [2e-3 * 0.9**k for k in range(TOP + 1)]
