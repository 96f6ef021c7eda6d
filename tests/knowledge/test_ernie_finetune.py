"""ERNIE-THU fine-tuning: linked entity inputs, the kg-free switch, final/ and predict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from knowledge_sample_paths import KG_DIR, VOCAB

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders import bert_encoder
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie.finetune import finetune_ernie_thu, predict_ernie
from ptm_knowledge.ernie.task_features import ErnieFeaturizer
from ptm_knowledge.ernie.task_io import (
    is_ernie_finetuned,
    load_ernie_task_model,
    save_ernie_task_model,
)
from ptm_knowledge.ernie.task_links import LinkedRows, task_links
from ptm_knowledge.ernie.task_model import build_ernie_task_model
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

TRAIN = (
    "label\tsentence\n"
    "city\tWe argued about Vienna for an hour.\n"
    "country\tWe argued about Austria for an hour.\n"
    "person\tThe quiz question was about Isaac Newton.\n"
    "city\tThe quiz question was about Munich.\n"
    "country\tA student asked a question about Hungary.\n"
    "person\tA student asked a question about Ada Lovelace.\n"
)
DEV = (
    "label\tsentence\n"
    "city\tWe argued about Milan for an hour.\n"
    "country\tThe quiz question was about Serbia.\n"
    "person\tA student asked a question about Alan Turing.\n"
)


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)


@pytest.fixture(scope="module")
def entity_ids(sample_kg) -> list[str]:
    return list(sample_kg.entity_ids)


def tiny_encoder(tokenizer: WordPieceTokenizer, num_entities: int) -> KnowledgeableEncoder:
    torch.manual_seed(0)
    text = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )
    table = torch.randn(num_entities, 8)
    return KnowledgeableEncoder.from_text_encoder(text, table, 1, entity_heads=2)


@pytest.fixture(scope="module")
def ernie_final(tmp_path_factory, tokenizer, entity_ids) -> Path:
    """An ERNIE-THU final/ as pre-training writes it (built directly, no training)."""
    final = tmp_path_factory.mktemp("ernie") / "final"
    encoder = tiny_encoder(tokenizer, len(entity_ids))
    encoder.save_pretrained(final, entity_ids=entity_ids, extra_writers=[tokenizer.save])
    return final


@pytest.fixture()
def task(tmp_path) -> TaskSpec:
    (tmp_path / "train.tsv").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "dev.tsv").write_text(DEV, encoding="utf-8")
    return TaskSpec(
        name="typing",
        kind="classification",
        train=str(tmp_path / "train.tsv"),
        dev=str(tmp_path / "dev.tsv"),
        max_length=32,
        batch_size=4,
    )


def example(text: str, pair: str | None = None) -> SentenceExample:
    return SentenceExample(text=text, pair=pair, label=0, id="1", line=2)


def test_linker_gives_the_alias_its_entity(tmp_path, tokenizer, entity_ids):
    """A known alias ("Danube River" -> danube) and a name get their entity ids, on the
    first piece of the mention, in the right segment of a pair."""
    index = {e: i for i, e in enumerate(entity_ids)}
    rows = [example("We argued about Vienna for an hour.", "The Danube River is long.")]
    path = tmp_path / "rows.tsv"
    path.write_text("x\n", encoding="utf-8")
    links = task_links(path, rows, KG_DIR, cache_dir=tmp_path / "cache")
    assert links == [([(16, 22, "vienna")], [(4, 16, "danube")])]
    featurizer = ErnieFeaturizer(tokenizer, index, 32)
    batch = featurizer.featurize(LinkedRows(rows, links))
    encoded = tokenizer.encode(rows[0].text, rows[0].pair)
    ids = batch["entity_ids"][0].tolist()
    vienna = encoded.tokens.index("vienna")
    danube = encoded.tokens.index("danube")
    assert ids[vienna] == index["vienna"]
    assert ids[danube] == index["danube"] and encoded.token_type_ids[danube] == 1
    assert sum(i >= 0 for i in ids) == 2  # "river" (the mention's second word) carries none


def test_links_are_cached_per_file(tmp_path, monkeypatch):
    """A second read of the same file, KG and settings does not link again; an edit does."""
    rows = [example("We argued about Vienna for an hour.")]
    path = tmp_path / "rows.tsv"
    path.write_text("x\n", encoding="utf-8")
    first = task_links(path, rows, KG_DIR, cache_dir=tmp_path)
    import ptm_knowledge.linking as linking

    def no_linking(*args, **kwargs):
        raise AssertionError("linked again")

    monkeypatch.setattr(linking, "EntityLinker", no_linking)
    assert task_links(path, rows, KG_DIR, cache_dir=tmp_path) == first
    path.write_text("y\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="linked again"):
        task_links(path, rows, KG_DIR, cache_dir=tmp_path)


def test_kg_free_switch_removes_the_entity_path(tokenizer, entity_ids):
    """With use_entities=False the KG table has no effect on the logits; with True it has."""
    index = {e: i for i, e in enumerate(entity_ids)}
    rows = [example("We argued about Vienna for an hour.")]
    links = [([(16, 22, "vienna")], [])]
    batch = ErnieFeaturizer(tokenizer, index, 32).featurize(LinkedRows(rows, links))
    outputs = {}
    for use in (True, False):
        model = build_ernie_task_model(
            tiny_encoder(tokenizer, len(entity_ids)), "classification", 3, use_entities=use
        ).eval()
        before = model(batch).logits
        with torch.no_grad():
            model.encoder.entity_table[index["vienna"]] += 5.0
        outputs[use] = (before, model(batch).logits)
    assert not torch.allclose(*outputs[True])
    torch.testing.assert_close(*outputs[False], rtol=0, atol=0)
    # Why pool="mentions" is the default: with one K-Encoder layer [CLS] attends before the
    # entities are fused, so a [CLS]-pooled head never sees them.
    model = build_ernie_task_model(
        tiny_encoder(tokenizer, len(entity_ids)), "classification", 3, pool="first"
    ).eval()
    before = model(batch).logits
    with torch.no_grad():
        model.encoder.entity_table[index["vienna"]] += 5.0
    torch.testing.assert_close(model(batch).logits, before, rtol=0, atol=0)


def test_save_load_gives_identical_logits(tmp_path, tokenizer, entity_ids):
    index = {e: i for i, e in enumerate(entity_ids)}
    rows = [example("We argued about Vienna for an hour."), example("Nothing here at all.")]
    links = [([(16, 22, "vienna")], []), ([], [])]
    batch = ErnieFeaturizer(tokenizer, index, 32).featurize(LinkedRows(rows, links))
    model = build_ernie_task_model(
        tiny_encoder(tokenizer, len(entity_ids)),
        "classification",
        3,
        label_names=["city", "country", "person"],
    ).eval()
    save_ernie_task_model(model, tmp_path / "final", entity_ids=entity_ids, task_config={})
    loaded, record = load_ernie_task_model(tmp_path / "final")
    torch.testing.assert_close(loaded(batch).logits, model(batch).logits, rtol=0, atol=0)
    assert record["entity_ids"] == entity_ids and record["use_entities"] is True


def test_label_names_of_another_length_are_refused(tokenizer, entity_ids):
    """As the core TaskModel does: two names for three classes would mislabel predictions."""
    with pytest.raises(ValueError, match="label_names has 2 names but num_labels=3"):
        build_ernie_task_model(
            tiny_encoder(tokenizer, len(entity_ids)), "classification", 3, label_names=["a", "b"]
        )


def test_finetune_final_and_predict(tmp_path, task, ernie_final):
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"), max_steps=4, learning_rate=1e-3, progress=False
    )
    result = finetune_ernie_thu(
        task, model_dir=ernie_final, kg=KG_DIR, trainer=trainer, cache_dir=tmp_path / "links"
    )
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    metrics, predictions = predict_ernie(result.encoder_dir, cache_dir=tmp_path / "links")
    assert metrics["accuracy"] == eval_json["dev/accuracy"]
    assert metrics["loss"] == pytest.approx(eval_json["dev/loss"], abs=1e-6)
    assert len(predictions) == 3 and set(predictions) <= {"city", "country", "person"}
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["recipe"] == "ernie_thu_finetune"
    assert record["link_coverage"]["dev"]["rows_with_entity"] == 3
    # A plain core loader refuses the folder loudly instead of dropping the K-Encoder.
    from ptm_core.finetune.model import load_task_model

    with pytest.raises(CheckpointError, match="unknown to a classification head"):
        load_task_model(result.encoder_dir)


def test_kg_free_run_records_the_switch(tmp_path, task, ernie_final):
    trainer = TrainerConfig(output_dir=str(tmp_path / "run"), max_steps=1, progress=False)
    result = finetune_ernie_thu(
        task,
        model_dir=ernie_final,
        kg=KG_DIR,
        trainer=trainer,
        use_entities=False,
        cache_dir=tmp_path / "links",
    )
    model, record = load_ernie_task_model(result.encoder_dir)
    assert record["use_entities"] is False and model.use_entities is False


def test_bad_task_row_names_file_line_field(tmp_path, task, ernie_final):
    Path(task.dev).write_text(DEV + "planet\tThe quiz question was about Earth.\n")
    trainer = TrainerConfig(output_dir=str(tmp_path / "run"), max_steps=1, progress=False)
    with pytest.raises(ValueError, match=r"dev\.tsv:5.*label") as info:
        finetune_ernie_thu(
            task, model_dir=ernie_final, kg=KG_DIR, trainer=trainer, cache_dir=tmp_path / "l"
        )
    assert "planet" in str(info.value)


def test_unsupported_inputs_say_the_fix(tmp_path, task, ernie_final):
    trainer = TrainerConfig(output_dir=str(tmp_path / "run"), max_steps=1, progress=False)
    with pytest.raises(FileNotFoundError, match="ernie_thu_tiny"):
        finetune_ernie_thu(task, model_dir=tmp_path, kg=KG_DIR, trainer=trainer)
    tagging = TaskSpec(name="ner", kind="tagging", train=task.train, dev=task.dev)
    with pytest.raises(ValueError, match="classification or regression"):
        finetune_ernie_thu(tagging, model_dir=ernie_final, kg=KG_DIR, trainer=trainer)
    with pytest.raises(FileNotFoundError, match=r"kg=.*not found"):
        finetune_ernie_thu(task, model_dir=ernie_final, kg=tmp_path / "no-kg", trainer=trainer)


def test_non_ernie_final_is_refused(tmp_path):
    (tmp_path / "task.json").write_text(
        json.dumps({"ptm_task": 1, "kind": "classification", "num_labels": 2, "recipe": "kbert"})
    )
    with pytest.raises(CheckpointError, match="not 'ernie_thu_finetune'"):
        load_ernie_task_model(tmp_path)
    assert not is_ernie_finetuned(tmp_path)


def test_ptm_predict_links_rows_and_agrees_with_predict_ernie(tmp_path, task, ernie_final):
    from ptm_core.finetune.predict_output import predict_file

    trainer = TrainerConfig(output_dir=str(tmp_path / "run"), max_steps=2, progress=False)
    final = finetune_ernie_thu(
        task, model_dir=ernie_final, kg=KG_DIR, trainer=trainer, cache_dir=tmp_path / "links"
    ).encoder_dir
    rows = tmp_path / "rows.csv"
    rows.write_text("id,sentence\na,We argued about Milan for an hour.\nb,Ada Lovelace.\n")
    stats = predict_file(final, rows, tmp_path / "out.jsonl", batch_size=1)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    _, expected = predict_ernie(final, rows, labelled=False)
    assert stats.kind == "classification" and [r["id"] for r in records] == ["a", "b"]
    assert [r["prediction"] for r in records] == expected
    for record in records:
        assert set(record["scores"]) == {"city", "country", "person"}
        assert sum(record["scores"].values()) == pytest.approx(1, abs=1e-4)
