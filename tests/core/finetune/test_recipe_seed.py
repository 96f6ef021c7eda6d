"""The fine-tuning recipe is reproducible from its seed, whatever the RNG held before."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.recipe import finetune
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

REPO = Path(__file__).resolve().parents[3]


def _run(out: Path, noise: int) -> dict[str, torch.Tensor]:
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(123)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
    )
    torch.rand(noise)  # whatever ran before (imports, other runs) drew from the global RNG
    task = TaskSpec(
        name="sentiment",
        kind="classification",
        train=str(REPO / "data_specs/glue_classification/single_train.tsv"),
        dev=str(REPO / "data_specs/glue_classification/single_dev.tsv"),
        max_length=32,
    )
    trainer = TrainerConfig(
        output_dir=str(out), max_steps=2, progress=False, device="cpu", seed=3, log_every=1
    )
    result = finetune(task, encoder=encoder, tokenizer=tokenizer, trainer=trainer, seed=3)
    return load_file(str(result.encoder_dir / "task_head.safetensors"))


def test_same_seed_same_head_whatever_the_rng_held(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", noise=1)
    second = _run(tmp_path / "b", noise=977)
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
