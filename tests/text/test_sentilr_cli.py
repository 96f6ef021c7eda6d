"""`ptm pretrain experiment=sentilr_tiny` on generated labelled reviews (not the bundled
sample): the loss falls, final/ is a ``sentilr`` folder, and `ptm finetune` fine-tunes it
with the POS/polarity inputs (the folder's knowledge tables change and are saved)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from generated_text import write_review_task, write_reviews
from safetensors.torch import load_file

from flows.cli import main
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.features import SentenceFeaturizer
from ptm_core.tokenization import WordPieceTokenizer
from ptm_text.sentilr.checkpoint import load_sentilr
from ptm_text.sentilr.finetune import KNOWLEDGE_FILE, SentiLRFeaturizer, load_sentilr_task
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER, KnowledgeAnnotator

SMALL = [
    "model.num_layers=1",
    "model.hidden_size=64",
    "model.num_heads=2",
    "model.intermediate_size=128",
    "data.label_field=label",
    "data.vocab_size=200",
    "data.max_length=64",
    "data.batch_size=8",
    "trainer.max_steps=40",
    "trainer.log_every=1",
    "trainer.save_every=40",
    "trainer.warmup_steps=3",
    "trainer.learning_rate=2e-3",
    "trainer.progress=false",
]


@pytest.mark.integration
def test_sentilr_tiny_trains_with_a_falling_loss_and_fine_tunes_with_knowledge(
    tmp_path: Path,
) -> None:
    out = tmp_path / "sentilr"
    corpus = write_reviews(tmp_path / "corpus", reviews=200)
    args = ["pretrain", "experiment=sentilr_tiny", f"data.corpus={corpus}", *SMALL]
    assert main([*args, f"trainer.output_dir={out}"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records]
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
    parts = {f"sentilr/{p}_{m}" for p in ("token", "pos", "polarity", "label")
             for m in ("loss", "accuracy")}  # fmt: skip
    assert parts <= set(records[-1])
    late = sum(r["sentilr/late_rows"] for r in records) / (8 * len(records))
    assert 0.05 < late < 0.4  # 20% of rows are late supervision (tested exactly elsewhere)

    final = out / "final"
    config = json.loads((final / "config.json").read_text())
    assert config["ptm_model"] == "sentilr"
    assert config["sentilr"]["labels"] == ["bad", "good"]
    assert config["sentilr"]["sources"]["polarity"].startswith("VADER")
    assert load_sentilr(final).knowledge.num_labels == 2

    tuned = tmp_path / "tuned"
    task = write_review_task(tmp_path / "task")
    ft = ["finetune", f"model={final}", *task, "trainer.max_steps=6", "trainer.progress=false"]
    assert main([*ft, f"trainer.output_dir={tuned}"]) == 0
    saved = load_file(str(tuned / "final" / KNOWLEDGE_FILE))
    assert set(saved) == {"pos.weight", "polarity.weight", "label.weight"}
    # the fine-tuned model reads the POS/polarity inputs: other inputs, other scores
    model = load_sentilr_task(tuned / "final").eval()
    assert torch.equal(model.knowledge.pos.weight, saved["pos.weight"])
    tok = WordPieceTokenizer.from_directory(tuned / "final")
    featurizer = SentiLRFeaturizer(SentenceFeaturizer(tok, 32), tok, KnowledgeAnnotator(None), 32)
    rows = [SentenceExample("anna found oslo lovely .", None, 1, 0, 1),
            SentenceExample("boris said lima was not awful .", None, 1, 1, 2)]  # fmt: skip
    batch = featurizer.featurize(rows)
    assert (batch["sentilr_polarity"] != NEUTRAL).any()  # lovely, awful
    plain = {**batch, "sentilr_pos": torch.full_like(batch["sentilr_pos"], OTHER),
             "sentilr_polarity": torch.full_like(batch["sentilr_polarity"], NEUTRAL)}  # fmt: skip
    with torch.no_grad():
        assert not torch.allclose(model(batch).logits, model(plain).logits)
    # ptm predict annotates its rows the same way
    predictions = tmp_path / "p.jsonl"
    dev = tmp_path / "task" / "dev.tsv"
    assert main(["predict", str(tuned / "final"), str(dev), "-o", str(predictions)]) == 0
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(records) == 32 and {r["prediction"] for r in records} <= {"0", "1"}
    task_json = json.loads((tuned / "final" / "task.json").read_text())
    assert task_json["family"] == "sentilr" and task_json["sentilr"]["labels"] == ["bad", "good"]
    assert "dev/accuracy" in json.loads((tuned / "eval.json").read_text())


def test_a_missing_corpus_is_refused(tmp_path: Path) -> None:
    assert main(["pretrain", "experiment=sentilr_tiny", "data.corpus=/no/such.jsonl",
                 f"trainer.output_dir={tmp_path / 'x'}"]) != 0  # fmt: skip
