"""`ptm pretrain experiment=glm_tiny`: the loss falls, final/ is a plain encoder folder, and
`ptm finetune` trains a classifier on it (through the encoder's [CLS], not GLM's cloze)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flows.cli import main
from ptm_core import TransformerEncoder
from ptm_text.glm.infill import fill_blanks, load_glm

FAST = ["model.num_layers=1", "data.max_length=64", "data.batch_size=8", "trainer.progress=false"]


@pytest.mark.integration
def test_glm_tiny_pretrains_from_the_cli_and_finetunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "glm"
    code = main(
        [
            "pretrain",
            "experiment=glm_tiny",
            "trainer.max_steps=40",
            "trainer.log_every=1",
            f"trainer.output_dir={out}",
            "trainer.device=cpu",
            *FAST,
        ]
    )
    assert code == 0
    assert "glm/loss" in capsys.readouterr().out
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["glm/loss"] for r in records]
    assert len(losses) == 40
    assert sum(losses[-8:]) / 8 < sum(losses[:8]) / 8 - 0.5
    assert all(r["glm/predictions"] > 0 for r in records)
    encoder = TransformerEncoder.from_pretrained(out / "final")
    assert encoder.config.num_layers == 1
    # The trained objective comes back from heads.safetensors and fills a blank.
    encoder, objective, tokenizer = load_glm(out / "final")
    assert objective.block_positions.weight[1:].abs().sum() > 0
    ids = tokenizer.encode("The river flows to the [MASK] and on to the sea.").input_ids
    assert ids.count(tokenizer.vocab_info.mask_id) == 1
    (span,) = fill_blanks(encoder, objective, ids, max_span_length=4)
    assert len(span) <= 4
    bare = tmp_path / "bare"
    shutil.copytree(out / "final", bare)
    (bare / "heads.safetensors").unlink()
    with pytest.raises(ValueError, match="no trained GLM head"):
        load_glm(bare)

    code = main(
        [
            "finetune",
            "task=gain_sentiment",
            f"model={out / 'final'}",
            "trainer.max_steps=5",
            f"trainer.output_dir={tmp_path / 'clf'}",
            "trainer.progress=false",
            "trainer.device=cpu",
        ]
    )
    assert code == 0
    dev = json.loads((tmp_path / "clf" / "eval.json").read_text())
    assert 0.0 <= dev["dev/accuracy"] <= 1.0


@pytest.mark.integration
def test_glm_sent_pretrains_on_a_generated_corpus_and_fills_smask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GLM-Sent and GLM-Doc mixed in, on a corpus that is not the sample (its own words, one
    sentence per line), tokenised by a vocabulary trained on it."""
    import random

    from safetensors.torch import load_file, save_file

    from ptm_text.glm.construction import SENTENCE
    from ptm_text.glm.infill import encode_blanks

    rng = random.Random(0)
    words = [f"{a}{b}" for a in ("ka", "lo", "mi", "su", "te") for b in ("ra", "no", "vi", "de")]
    lines: list[str] = []
    for _ in range(60):
        for _ in range(rng.randint(3, 8)):
            lines.append(" ".join(rng.choices(words, k=rng.randint(3, 9))) + " .")
        lines.append("")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "glm_sent"
    code = main(
        [
            "pretrain",
            "experiment=glm_tiny",
            f"data.corpus={corpus}",
            "data.tokenizer=null",
            "data.vocab_size=200",
            f"data.cache_dir={tmp_path / 'cache'}",
            "objective.objectives.glm.sentence_prob=0.5",
            "objective.objectives.glm.document_prob=0.2",
            "trainer.max_steps=12",
            "trainer.log_every=1",
            f"trainer.output_dir={out}",
            "trainer.device=cpu",
            *FAST,
        ]
    )
    assert code == 0
    capsys.readouterr()
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(r["glm/sentence"] == 1.0 for r in records)
    assert any(r["glm/document"] == 1.0 for r in records)
    assert all(r["glm/predictions"] > 0 for r in records)
    encoder, objective, tokenizer = load_glm(out / "final")
    assert objective.task_embeddings is not None
    assert objective.task_embeddings.weight[SENTENCE].abs().sum() > 0
    ids, tasks = encode_blanks(tokenizer, "kara lono . [sMASK] mide sute .")
    assert tasks == [SENTENCE]
    (span,) = fill_blanks(encoder, objective, ids, tasks=tasks, max_span_length=6)
    assert len(span) <= 6
    # A final/ from before task masks (no task table in heads.safetensors) still loads.
    old = tmp_path / "old"
    shutil.copytree(out / "final", old)
    heads = load_file(old / "heads.safetensors")
    save_file(
        {k: v for k, v in heads.items() if "task_embeddings" not in k}, old / "heads.safetensors"
    )
    _, plain, _ = load_glm(old)
    assert plain.task_embeddings is None
    with pytest.raises(ValueError, match="without task masks"):
        fill_blanks(encoder, plain, ids, tasks=tasks)
