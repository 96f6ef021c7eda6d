"""XLM fine-tuning for zero-shot transfer: train on en, score fr/de, reload final/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ptm_core.data.errors import DataError
from ptm_core.training import TrainerConfig
from ptm_multilingual import SharedBPETokenizer, XLMEncoder, xlm_text_encoder
from ptm_multilingual.finetune import (
    XLMSentenceFeaturizer,
    build_xlm_classifier,
    finetune_xlm_classifier,
    load_xlm_classifier,
    read_language_tsv,
)

CLS = Path(__file__).resolve().parents[2] / "data_specs" / "monolingual_corpus" / "classification"
LANGS = ("de", "en", "fr")


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def xlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random XLM + shared BPE over the three classification files, saved as final/."""
    texts = {
        lang: [line.split("\t")[1] for line in (CLS / f"{lang}.tsv").read_text().splitlines()]
        for lang in LANGS
    }
    tokenizer = SharedBPETokenizer.train(texts, vocab_size=300, seed=0)
    torch.manual_seed(0)
    text = xlm_text_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )
    directory = tmp_path_factory.mktemp("xlm") / "final"
    XLMEncoder(text, tokenizer.languages).save_pretrained(directory, extra_writers=[tokenizer.save])
    return directory


def _trainer(out: Path, steps: int = 80) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(out),
        max_steps=steps,
        learning_rate=3e-3,
        warmup_ratio=0.1,
        log_every=20,
        save_every=1000,
        progress=False,
        device="cpu",
        resume=False,
    )


@pytest.fixture(scope="module")
def run(xlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> object:
    return finetune_xlm_classifier(
        xlm_dir,
        train=(CLS / "en.tsv", "en"),
        dev={lang: CLS / f"{lang}.tsv" for lang in ("en", "fr", "de")},
        trainer=_trainer(tmp_path_factory.mktemp("ft")),
        batch_size=16,
        max_length=48,
        dropout=0.0,
    )


def test_trains_on_en_and_scores_every_dev_language(run: object) -> None:
    metrics = run.final_metrics  # type: ignore[attr-defined]
    saved = json.loads((run.output_dir / "eval.json").read_text())  # type: ignore[attr-defined]
    assert saved == pytest.approx(metrics)
    for lang in ("en", "fr", "de"):
        assert 0.0 <= metrics[f"dev/{lang}/accuracy"] <= 1.0
        assert metrics[f"dev/{lang}/chance"] == pytest.approx(64 / 120)  # 64 animal, 56 person
    # en is the training file: the classifier must have learned it (chance 0.53).
    assert metrics["dev/en/accuracy"] >= 0.9
    # The fine-tuning report's confusion matrix is the training language's dev set.
    labels = json.loads((run.output_dir / "dev_labels.json").read_text())  # type: ignore[attr-defined]
    assert labels["dev_set"] == "dev (en)" and sum(map(sum, labels["confusion"])) == 120
    right = sum(labels["confusion"][i][i] for i in range(len(labels["labels"])))
    assert right / 120 == pytest.approx(metrics["dev/en/accuracy"])


def test_final_reloads_with_identical_logits(run: object) -> None:
    model = run.model.eval()  # type: ignore[attr-defined]
    loaded, tokenizer, record = load_xlm_classifier(run.encoder_dir)  # type: ignore[attr-defined]
    assert record["family"] == "xlm" and record["kind"] == "classification"
    assert record["label_names"] == ["animal", "person"]
    assert record["train"]["lang"] == "en"
    rows, _ = read_language_tsv(CLS / "fr.tsv", ["animal", "person"])
    batch = XLMSentenceFeaturizer(tokenizer, "fr", 48).featurize(rows[:16])
    with torch.no_grad():
        expected = model(batch).logits
        got = loaded(batch).logits
    assert got.shape == (16, 2)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_featurizer_carries_the_language_id(xlm_dir: Path) -> None:
    tokenizer = SharedBPETokenizer.from_directory(xlm_dir)
    rows, _ = read_language_tsv(CLS / "de.tsv")
    batch = XLMSentenceFeaturizer(tokenizer, "de", 48).featurize(rows[:4])
    real = batch["attention_mask"].bool()
    assert (batch["langs"][real] == tokenizer.lang_id("de")).all()
    assert (batch["input_ids"][:, 0] == tokenizer.vocab_info.cls_id).all()
    assert batch["labels"].tolist() == [r.label for r in rows[:4]]
    # The language id reaches the model: the same tokens as "fr" give other logits.
    torch.manual_seed(0)
    model = build_xlm_classifier(XLMEncoder.from_pretrained(xlm_dir), 2).eval()
    other = dict(batch, langs=torch.where(real, tokenizer.lang_id("fr"), 0))
    with torch.no_grad():
        assert not torch.allclose(model(batch).logits, model(other).logits)


def test_freeze_embeddings_keeps_the_tables(xlm_dir: Path, tmp_path: Path) -> None:
    before = XLMEncoder.from_pretrained(xlm_dir).state_dict()
    result = finetune_xlm_classifier(
        xlm_dir,
        train=(CLS / "en.tsv", "en"),
        dev={"fr": CLS / "fr.tsv"},
        trainer=_trainer(tmp_path, steps=5),
        freeze="embeddings",
    )
    after = result.model.encoder.state_dict()  # type: ignore[union-attr]
    for name in ("encoder.embeddings.word.weight", "lang_embeddings.weight"):
        assert torch.equal(before[name], after[name]), name
    layer = next(k for k in before if k.startswith("encoder.layers.0.") and "weight" in k)
    assert not torch.equal(before[layer], after[layer]), layer


def test_unknown_language_is_refused(xlm_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'es' is not one of the checkpoint's languages"):
        finetune_xlm_classifier(
            xlm_dir,
            train=(CLS / "en.tsv", "en"),
            dev={"es": CLS / "fr.tsv"},
            trainer=_trainer(tmp_path, steps=1),
        )


def test_bad_tsv_names_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "en.tsv"
    bad.write_text("animal\tThe cat sleeps.\nperson The man waits.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"en\.tsv:2: .*field 'columns'"):
        read_language_tsv(bad)
    bad.write_text("animal\tThe cat sleeps.\nplant\tThe tree grows.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"en\.tsv:2: unknown label 'plant'"):
        read_language_tsv(bad, ["animal", "person"])


def test_recipe_runs_from_the_experiment_config(xlm_dir: Path, tmp_path: Path) -> None:
    from flows import runner
    from flows.config import compose_config

    cfg = compose_config(
        [
            "experiment=xlm_zero_shot",
            f"init_from={xlm_dir}",
            "trainer.max_steps=3",
            f"trainer.output_dir={tmp_path}",
            "trainer.device=cpu",
            "trainer.progress=false",
        ]
    )
    result = runner.run(cfg)
    assert result.encoder_dir == tmp_path / "final"
    assert {f"dev/{lang}/accuracy" for lang in ("en", "fr", "de")} <= set(result.final_metrics)
    record = json.loads((tmp_path / "final" / "task.json").read_text())
    assert record["provenance"]["init_from"] == str(xlm_dir)
    assert record["train"]["lang"] == "en"
    missing = compose_config(["experiment=xlm_zero_shot", f"trainer.output_dir={tmp_path}"])
    with pytest.raises(FileNotFoundError, match="init_from=None: experiment=xlm_zero_shot"):
        runner.run(missing)


def test_ptm_predict_reads_text_and_lang_columns(run: object, tmp_path: Path) -> None:
    import csv

    from ptm_core.finetune.predict_output import predict_file
    from ptm_multilingual.finetune import evaluate_xlm_classifier

    final = run.encoder_dir  # type: ignore[attr-defined]
    model, tokenizer, record = load_xlm_classifier(final)
    rows, expected = [], []
    for lang in ("fr", "en"):
        examples, _ = read_language_tsv(CLS / f"{lang}.tsv", record["label_names"])
        featurizer = XLMSentenceFeaturizer(tokenizer, lang, record["max_length"])
        _, predicted = evaluate_xlm_classifier(model, examples[:10], featurizer)
        expected += [record["label_names"][i] for i in predicted]
        rows += [{"lang": lang, "text": e.text} for e in examples[:10]]
    source = tmp_path / "rows.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["lang", "text"])
        writer.writeheader()
        writer.writerows(rows)
    stats = predict_file(final, source, tmp_path / "out.jsonl", batch_size=4)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert stats.examples == 20 and [r["lang"] for r in records] == [r["lang"] for r in rows]
    assert [r["prediction"] for r in records] == expected
    bad = tmp_path / "bad.csv"
    bad.write_text("lang,text\nxx,bonjour\n")
    with pytest.raises(DataError, match=r"bad.csv:2: language 'xx' is not one of the model's"):
        predict_file(final, bad, tmp_path / "bad.jsonl")
