"""The kbert_tiny_cls preset trains (falling loss), saves, reloads; the sample reader checks input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.finetune.model import TaskModel
from ptm_knowledge.kbert import (
    KBertFeaturizer,
    evaluate_kbert,
    load_kbert_classifier,
    read_labeled_tsv,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_specs" / "kbert_sample"


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_kbert_tiny_cls_preset_trains_with_falling_loss(tmp_path: Path, one_thread) -> None:
    cfg = compose_config(
        [
            "experiment=kbert_tiny_cls",
            "model.hidden_size=64",
            "model.intermediate_size=128",
            "model.dropout=0.0",
            "trainer.log_every=5",
            "trainer.progress=false",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path}",
        ]
    )
    result = run_composed(cfg)
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    print("kbert_tiny_cls losses:", [round(x, 3) for x in losses])
    assert len(losses) >= 6
    assert sum(losses[-2:]) / 2 < 0.7 * sum(losses[:2]) / 2
    for name in ("accuracy", "f1", "matthews_corrcoef", "loss"):
        assert f"dev/{name}" in result.final_metrics
    saved = json.loads((result.output_dir / "eval.json").read_text())
    assert saved["dev/accuracy"] == result.final_metrics["dev/accuracy"]
    # final/ reloads into the same classifier (same dev metrics).
    model, config = load_kbert_classifier(result.encoder_dir)
    assert isinstance(model, TaskModel) and model.kind == "classification"
    assert config["label_names"] == ["capital", "other"]
    assert config["recipe"] == "kbert" and config["kg"] == "full"
    assert config["visible_matrix"] == "on" and config["max_length"] == cfg.data.max_length
    assert config["provenance"]["kg_path"] == str(cfg.data.kg)
    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_knowledge.kbert import knowledge_from_graph
    from ptm_knowledge.kg import load_knowledge_graph

    tokenizer = WordPieceTokenizer.from_directory(result.encoder_dir)
    knowledge = knowledge_from_graph(load_knowledge_graph(cfg.data.kg))
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_length=cfg.data.max_length)
    dev, _ = read_labeled_tsv(SAMPLE / "dev.tsv", config["label_names"])
    metrics, _ = evaluate_kbert(model, dev, featurizer, config["label_names"], batch_size=16)
    assert metrics["accuracy"] == pytest.approx(result.final_metrics["dev/accuracy"], abs=1e-6)
    assert metrics["loss"] == pytest.approx(result.final_metrics["dev/loss"], rel=1e-5)


def test_sample_is_balanced_and_dev_cities_are_unseen() -> None:
    train, labels = read_labeled_tsv(SAMPLE / "train.tsv")
    dev, _ = read_labeled_tsv(SAMPLE / "dev.tsv", labels)
    assert labels == ["capital", "other"]
    for split in (train, dev):
        share = sum(e.label for e in split) / len(split)
        assert 0.4 <= share <= 0.6
    train_words = {w for e in train for w in e.words}
    for city in ("Bratislava", "Belgrade", "Khartoum", "Salzburg", "Barcelona", "Milan"):
        assert city not in train_words


def test_reader_names_file_line_and_fix(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("label\ttext_a\ncapital\tWarsaw is nice .\nwrong line without tab\n")
    with pytest.raises(ValueError, match=r"bad.tsv:3: expected label<TAB>text_a"):
        read_labeled_tsv(bad)
    bad.write_text("capital\tWarsaw .\nvillage\tTroy .\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: label 'village'"):
        read_labeled_tsv(bad, ["capital", "other"])


def test_tagger_finetunes_and_reloads(tmp_path: Path, one_thread, sample_kg) -> None:
    from ptm_core.encoders import bert_encoder
    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_core.training import TrainerConfig
    from ptm_knowledge.kbert import finetune_kbert, knowledge_from_graph, read_tagged_tsv

    cities = ["Paris", "Vienna", "Warsaw", "Munich", "Geneva", "Milan"]
    lines = []
    for i, city in enumerate(cities * 2):
        for word, tag in [("We", "O"), ("met", "O"), ("in", "O"), (city, "B-CITY"), (".", "O")][
            i % 2 :
        ]:
            lines.append(f"{word}\t{tag}")
        lines.append("")
    data = tmp_path / "ner.tsv"
    data.write_text("\n".join(lines))
    train, tags = read_tagged_tsv(data)
    assert tags == ["B-CITY", "O"] and len(train) == 12
    tokenizer = WordPieceTokenizer.from_vocab(ROOT / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
        dropout=0.0,
    )
    result = finetune_kbert(
        train,
        train,
        encoder=encoder,
        tokenizer=tokenizer,
        knowledge=knowledge_from_graph(sample_kg),
        label_names=tags,
        trainer=TrainerConfig(
            output_dir=str(tmp_path / "run"),
            max_steps=30,
            learning_rate=3e-3,
            warmup_ratio=0.1,
            log_every=5,
            save_every=30,
            progress=False,
            device="cpu",
        ),
        max_length=64,
        batch_size=4,
    )
    losses = [json.loads(line)["loss"] for line in result.metrics_path.read_text().splitlines()]
    assert losses[-1] < 0.5 * losses[0], losses
    model, config = load_kbert_classifier(result.encoder_dir)
    assert config["kind"] == "tagging"
    assert isinstance(model, TaskModel) and model.kind == "tagging"
    featurizer = KBertFeaturizer(tokenizer, knowledge_from_graph(sample_kg), max_length=64)
    batch = featurizer.featurize(list(train))
    assert batch["is_knowledge"].any()  # the cities carry branches
    assert batch["attention_mask"].dim() == 3  # the visible matrix reaches the model
    with torch.no_grad():
        best = model(batch).logits.argmax(-1)
    keep = batch["word_start"] & ~batch["is_knowledge"]
    predictions = [best[b][keep[b]].tolist() for b in range(best.shape[0])]
    assert [len(p) for p in predictions] == [len(e.words) for e in train]
    # Word-level accuracy of the reloaded model is the word accuracy finetune_kbert scored.
    pairs = [
        (a, b)
        for p, e in zip(predictions, train, strict=True)
        for a, b in zip(p, e.tags, strict=True)
    ]
    accuracy = sum(a == b for a, b in pairs) / len(pairs)
    assert accuracy == pytest.approx(result.final_metrics["dev/accuracy"], abs=1e-6)
    assert accuracy > 0.8
    assert result.final_metrics["dev/f1"] > 0.5  # seqeval entity F1 over the B-CITY spans
