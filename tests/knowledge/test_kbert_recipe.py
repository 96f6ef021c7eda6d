"""K-BERT on the core fine-tuning pieces: TaskBatches, TaskModel, save_task_model, metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from knowledge_sample_paths import KG_DIR, VOCAB
from safetensors.torch import save_file

from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders import bert_encoder
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.model import TASK_JSON, build_task_model
from ptm_core.heads.tasks import summary_token
from ptm_core.objectives import IGNORE_INDEX
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.kbert import (
    KBertFeaturizer,
    LabeledSentence,
    TaggedSentence,
    finetune_kbert,
    knowledge_from_graph,
    load_kbert_classifier,
    mask_transformer,
    predict_kbert,
    read_labeled_tsv,
    segment_words,
)
from ptm_knowledge.kbert.finetune import score_kbert_final

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_specs" / "kbert_sample"
SENTENCES = [
    "Marie Curie moved to Paris in 1891 .",
    "The Danube flows through Vienna and Budapest .",
    "Warsaw is a large city .",
    "We met in Munich .",
    "Geneva lies on a lake .",
    "Paris is old .",
    "Milan has a cathedral .",
    "Vienna has music .",
    "They flew to Warsaw .",
    "Munich has beer .",
]


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB)


@pytest.fixture(scope="module")
def knowledge(sample_kg) -> dict[str, list[str]]:
    return knowledge_from_graph(sample_kg)


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _rows() -> list[LabeledSentence]:
    return [LabeledSentence(segment_words(t), i % 2) for i, t in enumerate(SENTENCES)]


def _encoder(tokenizer: WordPieceTokenizer):
    torch.manual_seed(0)
    return bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
        dropout=0.0,
    )


def _trainer(tmp_path: Path, steps: int) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(tmp_path),
        max_steps=steps,
        learning_rate=3e-3,
        log_every=steps,
        save_every=steps,
        progress=False,
        device="cpu",
    )


# ------------------------------------------------------------------ batches


def test_kbert_task_batches_are_deterministic_and_resumable(tokenizer, knowledge) -> None:
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_length=48)
    rows = _rows()
    batches = TaskBatches(rows, featurizer, 4, seed=3)
    assert batches.batches_per_epoch == 3
    epoch = list(batches.iter_batches(1))
    again = list(TaskBatches(rows, featurizer, 4, seed=3).iter_batches(1))
    for a, b in zip(epoch, again, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key
    # A run resumed at batch 2 sees exactly the tail of the epoch.
    tail = list(batches.iter_batches(1, start=2))
    assert len(tail) == 1
    for key in tail[0]:
        assert torch.equal(tail[0][key], epoch[2][key])
    # Every row once per epoch, in an order that changes with the epoch.
    visited = [i for b in range(3) for i in batches.indices(1, b)]
    assert sorted(visited) == list(range(10)) and visited != list(range(10))
    assert visited != [i for b in range(3) for i in batches.indices(0, b)]
    # The model's inputs: soft positions and the (B, L, L) visible matrix as attention_mask.
    first = epoch[0]
    length = first["input_ids"].shape[1]
    assert first["attention_mask"].shape == (4, length, length)
    assert first["attention_mask"].dtype == torch.bool
    assert "visible_matrix" not in first and first["position_ids"].shape == (4, length)
    chosen = batches.indices(1, 0)
    expected = featurizer.collate(
        [featurizer.encode(rows[i].words, label=rows[i].label) for i in chosen]
    )
    assert torch.equal(first["attention_mask"], expected["visible_matrix"])
    assert torch.equal(first["position_ids"], expected["position_ids"])
    assert first["labels"].tolist() == [rows[i].label for i in chosen]


def test_ablations_give_a_padding_mask(tokenizer, knowledge) -> None:
    rows = _rows()[:3]
    for options in ({"kg": "none"}, {"visible_matrix": "off"}):
        batch = KBertFeaturizer(tokenizer, knowledge, **options).featurize(rows)  # type: ignore[arg-type]
        assert batch["attention_mask"].dim() == 2
        assert torch.equal(
            batch["attention_mask"].bool(), batch["input_ids"] != tokenizer.vocab_info.pad_id
        )


# ------------------------------------------------------------------ model parity


def test_task_model_equals_the_mask_transformer_with_the_same_weights(tokenizer, knowledge) -> None:
    """What KBertClassifier/KBertTagger computed: head(mask_transformer(encoder, batch))."""
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_length=48)
    rows = _rows()[:4]
    collated = featurizer.collate([featurizer.encode(r.words, label=r.label) for r in rows])
    assert collated["is_knowledge"].any()
    classifier = build_task_model(_encoder(tokenizer), "classification", 2).eval()
    head = classifier.head
    with torch.no_grad():
        hidden = mask_transformer(classifier.encoder, collated)
        reference = head.classifier(head.pooler(hidden))  # the old KBertClassifier
        ours = classifier(featurizer.featurize(rows)).logits
    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=0)

    tagger = build_task_model(_encoder(tokenizer), "tagging", 3).eval()
    tagged = [TaggedSentence(r.words, [i % 3 for i in range(len(r.words))]) for r in rows]
    with torch.no_grad():
        hidden = mask_transformer(tagger.encoder, collated)
        reference = tagger.head.classifier(hidden)  # the old KBertTagger
        ours = tagger(featurizer.featurize(tagged)).logits
    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=0)


def test_soft_positions_and_visibility_reach_the_encoder(tokenizer, knowledge) -> None:
    rows = _rows()[:4]
    model = build_task_model(_encoder(tokenizer), "classification", 2).eval()
    for layer in (model.head.pooler.dense, model.head.classifier):  # logits that show changes
        torch.nn.init.normal_(layer.weight, std=1.0)
    on = KBertFeaturizer(tokenizer, knowledge, max_length=48).featurize(rows)
    off = KBertFeaturizer(tokenizer, knowledge, max_length=48, visible_matrix="off").featurize(rows)
    assert torch.equal(on["input_ids"], off["input_ids"])
    assert torch.equal(on["position_ids"], off["position_ids"])
    with torch.no_grad():
        logits_on = model(on).logits
        logits_off = model(off).logits
        # Positions 0..L-1 instead of the soft ones.
        default_positions = model({k: v for k, v in on.items() if k != "position_ids"}).logits
    assert (logits_on - logits_off).abs().max() > 1e-2
    assert (logits_on - default_positions).abs().max() > 1e-2
    # A sentence without branches is unaffected by the matrix (it is the padding mask).
    plain = [i for i in range(4) if not on["is_knowledge"][i].any()]
    for i in plain:
        torch.testing.assert_close(logits_on[i], logits_off[i], atol=1e-5, rtol=0)


def test_pool_last_reads_the_padding_off_a_visibility_mask(tokenizer, knowledge) -> None:
    batch = KBertFeaturizer(tokenizer, knowledge, max_length=48).featurize(_rows()[:4])
    padding = batch["input_ids"] != tokenizer.vocab_info.pad_id
    assert not padding.all()  # rows of different lengths
    hidden = torch.randn(*batch["input_ids"].shape, 8)
    torch.testing.assert_close(
        summary_token(hidden, "last", batch["attention_mask"]),
        summary_token(hidden, "last", padding.long()),
    )
    model = build_task_model(_encoder(tokenizer), "classification", 2, pool="last").eval()
    with torch.no_grad():
        logits = model(batch).logits
    last = padding.long().sum(1) - 1
    with torch.no_grad():
        hidden = mask_transformer(
            model.encoder, {**batch, "visible_matrix": batch["attention_mask"]}
        )
        token = hidden[torch.arange(4), last][:, None]
        reference = model.head.classifier(model.head.pooler(token))
    torch.testing.assert_close(logits, reference, atol=1e-6, rtol=0)


# ------------------------------------------------------------------ final/


def test_short_run_final_loads_and_predicts(tmp_path: Path, tokenizer, knowledge, one_thread):
    train, labels = read_labeled_tsv(SAMPLE / "train.tsv")
    dev, _ = read_labeled_tsv(SAMPLE / "dev.tsv", labels)
    result = finetune_kbert(
        train,
        dev,
        encoder=_encoder(tokenizer),
        tokenizer=tokenizer,
        knowledge=knowledge,
        label_names=labels,
        trainer=_trainer(tmp_path / "run", 4),
        max_length=48,
        batch_size=8,
        provenance={"kg_path": str(KG_DIR), "dev": str(SAMPLE / "dev.tsv")},
    )
    final = result.encoder_dir
    record = json.loads((final / TASK_JSON).read_text())
    assert record["kind"] == "classification" and record["recipe"] == "kbert"
    assert {record[k] for k in ("max_entities", "max_length", "kg", "visible_matrix")} == {
        2,
        48,
        "full",
        "on",
    }
    assert (final / "task_head.safetensors").exists() and (final / "vocab.txt").exists()
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert set(eval_json) >= {"dev/accuracy", "dev/f1", "dev/matthews_corrcoef", "dev/loss"}
    metrics, predictions = predict_kbert(final, dev, knowledge)
    assert len(predictions) == len(dev) and set(predictions) <= set(labels)
    assert metrics["accuracy"] == pytest.approx(eval_json["dev/accuracy"], abs=1e-6)
    # From the folder alone: the KG and the dev file come from task.json's provenance.
    scored, _ = score_kbert_final(final)
    assert scored["accuracy"] == pytest.approx(eval_json["dev/accuracy"], abs=1e-6)


def test_old_final_folders_still_load(tmp_path: Path, tokenizer, knowledge) -> None:
    """A final/ of the old finetune_kbert (kbert_head.safetensors + kbert.json)."""
    model = build_task_model(_encoder(tokenizer), "classification", 2).eval()
    old = tmp_path / "final"
    heads = {k: v.contiguous() for k, v in model.head.state_dict().items()}

    def write_old(directory: Path) -> None:
        save_file(heads, str(directory / "kbert_head.safetensors"))
        (directory / "kbert.json").write_text(
            json.dumps(
                {
                    "task": "classification",
                    "label_names": ["capital", "other"],
                    "max_entities": 1,
                    "max_length": 48,
                    "kg": "full",
                    "visible_matrix": "on",
                }
            )
        )

    model.encoder.save_pretrained(old, extra_writers=[tokenizer.save, write_old])
    loaded, config = load_kbert_classifier(old)
    assert config["kind"] == "classification" and config["max_entities"] == 1
    batch = KBertFeaturizer(tokenizer, knowledge, max_length=48).featurize(_rows()[:3])
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch).logits, model(batch).logits)
    # A damaged old head names the file and the fix.
    save_file({"classifier.weight": torch.zeros(5, 32)}, str(old / "kbert_head.safetensors"))
    with pytest.raises(CheckpointError, match=r"kbert_head\.safetensors.*fine-tune again"):
        load_kbert_classifier(old)


def test_loader_refuses_a_final_of_another_recipe(tmp_path: Path, tokenizer) -> None:
    from ptm_core.finetune.model import save_task_model

    model = build_task_model(_encoder(tokenizer), "classification", 2)
    save_task_model(model, tmp_path / "final", task_config={"task": {"name": "sst2"}})
    with pytest.raises(CheckpointError, match="not written by finetune_kbert"):
        load_kbert_classifier(tmp_path / "final")


def test_tagging_labels_skip_branches_in_task_batches(tokenizer, knowledge) -> None:
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_length=48)
    rows = [TaggedSentence(r.words, [1] * len(r.words)) for r in _rows()[:4]]
    batch = next(TaskBatches(rows, featurizer, 4, shuffle=False).iter_batches(0))
    assert batch["is_knowledge"].any()
    assert (batch["labels"][batch["is_knowledge"]] == IGNORE_INDEX).all()
    assert [int((r != IGNORE_INDEX).sum()) for r in batch["labels"]] == [len(r.words) for r in rows]


# ------------------------------------------------------------------ preset + ablations


@pytest.mark.parametrize("override", ["kbert.kg=none", "kbert.visible_matrix=off"])
def test_preset_ablations_run_on_the_core_recipe(tmp_path: Path, override: str, one_thread):
    cfg = compose_config(
        [
            "experiment=kbert_tiny_cls",
            override,
            "model.hidden_size=32",
            "model.intermediate_size=64",
            "trainer.max_steps=2",
            "trainer.log_every=1",
            "trainer.save_every=2",
            "trainer.progress=false",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path}",
        ]
    )
    result = run_composed(cfg)
    record = json.loads((result.encoder_dir / TASK_JSON).read_text())
    key, value = override.removeprefix("kbert.").split("=")
    assert record[key] == value
    assert "dev/accuracy" in result.final_metrics
    _, config = load_kbert_classifier(result.encoder_dir)
    assert config["provenance"]["train"].endswith("train.tsv")


def test_attention_structured_masks_reaches_the_kbert_featurizer(
    tmp_path: Path, tokenizer, knowledge, one_thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``trainer.structured_masks`` (attention.structured_masks) gives K-BERT's batches the
    tree as a structure; the fine-tuned result equals the visible-matrix run's."""
    import dataclasses

    from ptm_knowledge.kbert import finetune as kbert_finetune

    flags: list[bool] = []

    class Recording(kbert_finetune.KBertFeaturizer):  # type: ignore[misc,name-defined]
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)
            flags.append(self.structured_mask)

    monkeypatch.setattr(kbert_finetune, "KBertFeaturizer", Recording)
    train, labels = read_labeled_tsv(SAMPLE / "train.tsv")
    dev, _ = read_labeled_tsv(SAMPLE / "dev.tsv", labels)
    scores = {}
    for structured in (False, True):
        config = dataclasses.replace(
            _trainer(tmp_path / f"run-{structured}", 2), precision="fp32", seed=0
        )
        result = finetune_kbert(
            train[:16],
            dev[:8],
            encoder=_encoder(tokenizer),
            tokenizer=tokenizer,
            knowledge=knowledge,
            label_names=labels,
            trainer=dataclasses.replace(config, structured_masks=structured),
            max_length=48,
            batch_size=8,
        )
        scores[structured] = json.loads((result.output_dir / "eval.json").read_text())
    assert flags[0] is False and flags[-1] is True
    assert scores[True]["dev/loss"] == pytest.approx(scores[False]["dev/loss"], abs=1e-5)


def test_ptm_predict_on_a_kbert_classifier(tmp_path: Path, tokenizer, knowledge, one_thread):
    from ptm_core.finetune.predict_output import predict_file

    train, labels = read_labeled_tsv(SAMPLE / "train.tsv")
    dev, _ = read_labeled_tsv(SAMPLE / "dev.tsv", labels)
    final = finetune_kbert(
        train,
        dev,
        encoder=_encoder(tokenizer),
        tokenizer=tokenizer,
        knowledge=knowledge,
        label_names=labels,
        trainer=_trainer(tmp_path / "run", 2),
        max_length=48,
        batch_size=8,
        provenance={"kg_path": str(KG_DIR), "dev": str(SAMPLE / "dev.tsv")},
    ).encoder_dir
    stats = predict_file(final, SAMPLE / "dev.tsv", tmp_path / "out.jsonl", batch_size=5)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    _, expected = predict_kbert(final, dev, knowledge)
    assert stats.examples == len(records) == len(dev)
    assert [r["prediction"] for r in records] == expected
    assert all(set(r["scores"]) == set(labels) and "text_a" in r for r in records)
