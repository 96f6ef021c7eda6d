"""ULMFiT/ELECTRA per-depth switches on XLM: the language table sits with the embeddings
(depth 0), layer i at i + 1, the head on top; exact per-depth rates, the unfreezing order
and a few fine-tuning steps with both switches on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ptm_core.training import TrainerConfig
from ptm_core.training.finetuning import (
    GradualUnfreezing,
    LayerGroups,
    discriminative_param_groups,
)
from ptm_multilingual import SharedBPETokenizer, XLMEncoder, xlm_text_encoder
from ptm_multilingual.finetune import build_xlm_classifier, finetune_xlm_classifier

CLS = Path(__file__).resolve().parents[2] / "data_specs" / "monolingual_corpus" / "classification"
LAYERS = 2
TOP = LAYERS + 1


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tokenizer() -> SharedBPETokenizer:
    texts = {
        lang: [line.split("\t")[1] for line in (CLS / f"{lang}.tsv").read_text().splitlines()]
        for lang in ("en", "fr")
    }
    return SharedBPETokenizer.train(texts, vocab_size=200, seed=0)


def _encoder(tokenizer: SharedBPETokenizer) -> XLMEncoder:
    torch.manual_seed(0)
    text = xlm_text_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_layers=LAYERS,
        num_heads=2,
        intermediate_size=32,
        max_positions=64,
    )
    return XLMEncoder(text, tokenizer.languages)


def _expected(name: str) -> int:
    if name.startswith("head."):
        return TOP
    if name.startswith(("encoder.lang_embeddings.", "encoder.encoder.embeddings.")):
        return 0
    assert name.startswith("encoder.encoder.layers."), name
    return int(name.split(".")[3]) + 1


def test_depths_rates_and_unfreezing_order() -> None:
    model = build_xlm_classifier(_encoder(_tokenizer()), 2)
    assert isinstance(model, LayerGroups) and model.depth_top() == TOP
    names = dict(model.named_parameters())
    for name in names:
        assert model.parameter_depth(name) == _expected(name), name
    groups = discriminative_param_groups(
        model, learning_rate=1e-3, weight_decay=0.0, layer_decay=0.5
    )
    lang = names["encoder.lang_embeddings.weight"]
    for group in groups:
        assert group["lr"] == 1e-3 * 0.5 ** (TOP - group["depth"])
        if any(p is lang for p in group["params"]):
            assert group["depth"] == 0 and group["lr"] == 1e-3 * 0.5**TOP
    unfreeze = GradualUnfreezing(model, every_steps=1)
    for step in range(TOP + 1):
        unfreeze.on_step_begin(step)
        trainable = {n for n, p in names.items() if p.requires_grad}
        assert trainable == {n for n in names if _expected(n) >= TOP - step}, step
    unfreeze.on_step_begin(TOP - 1)
    assert not lang.requires_grad  # the language table unfreezes with the embeddings


def test_a_few_steps_run_with_both_switches(tmp_path: Path) -> None:
    tokenizer = _tokenizer()
    encoder = _encoder(tokenizer)
    lang_before = encoder.lang_embeddings.weight.detach().clone()
    top_before = encoder.encoder.layers[LAYERS - 1].ffn_norm.weight.detach().clone()
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=3,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        layer_lr_decay=0.8,
        unfreeze_every=1,
        log_every=1,
        save_every=1000,
        progress=False,
        device="cpu",
        resume=False,
    )
    result = finetune_xlm_classifier(
        encoder,
        tokenizer=tokenizer,
        train=(CLS / "en.tsv", "en"),
        dev={"fr": CLS / "fr.tsv"},
        trainer=trainer,
        batch_size=8,
        max_length=32,
    )
    assert "dev/fr/accuracy" in result.final_metrics
    # Steps 0, 1, 2 train depths >= 3, 2, 1: the top layer moved, the tables never did.
    assert torch.equal(encoder.lang_embeddings.weight.detach(), lang_before)
    assert not torch.equal(encoder.encoder.layers[LAYERS - 1].ffn_norm.weight.detach(), top_before)
