"""ERNIE from a prepared linked corpus: the same rows and batches as the in-memory path,
checksummed shards, and bad input named by file and line (issue 14, item 4)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from ernie_runs import pretrain_ernie
from knowledge_sample_paths import KG_DIR, VOCAB

from ptm_core.data import PretrainingBatches
from ptm_core.data.prepared import PreparedDataError, shard_file
from ptm_core.encoders import bert_encoder
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie import (
    KnowledgeStore,
    build_knowledge_examples,
    knowledge_coverage,
    knowledge_rows,
    prepare_linked_corpus,
)
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective
from ptm_knowledge.ernie.knowledge_masking import (
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
)
from ptm_knowledge.ernie.phrases import CollocationPhrases
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.linking import LinkedCorpusError, read_linked_corpus

LINKED = KG_DIR / "gold_mentions.jsonl"
MAX_LENGTH = 48
SEED = 3


def _tiny(vocab_size: int):
    return bert_encoder(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )


@pytest.fixture(scope="module")
def sample():
    documents = read_linked_corpus(LINKED)
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    phrases = CollocationPhrases.learn(s for d in documents for s in d.sentences)
    return documents, tokenizer, phrases


@pytest.fixture(scope="module")
def prepared(sample, tmp_path_factory) -> Path:
    """The sample cut into ~16 shards, so rows and units meet shard boundaries."""
    _, _, phrases = sample
    out = tmp_path_factory.mktemp("ernie") / "prepared"
    prepare_linked_corpus(LINKED, out, tokenizer=VOCAB, phrases=phrases, shard_bytes=3000)
    return out


def _batches(source, examples, mix, batch_size=8):
    return [source(examples, mix).batch(epoch, i) for epoch in (0, 1) for i in range(4)]


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_baidu_prepared_and_raw_paths_give_identical_batches(sample, prepared) -> None:
    documents, tokenizer, phrases = sample
    store = KnowledgeStore.open(prepared)
    assert len(store.shards) > 5  # several shards: spans are read across them
    store.bind_entities(None)
    lazy = knowledge_rows(store, tokenizer.vocab_info, MAX_LENGTH)
    raw = build_knowledge_examples(documents, tokenizer, MAX_LENGTH, phrases=phrases)
    assert len(lazy) == len(raw)
    assert list(lazy) == list(raw)
    assert sum(u >= 0 for row in raw for u in row["phrase_units"]) > 0
    assert sum(u >= 0 for row in raw for u in row["entity_units"]) > 0

    text = _tiny(tokenizer.vocab_size)
    mix = ObjectiveMix(
        {"mlm": build_objective(KnowledgeMaskingObjective, text, tokenizer.vocab_info)}
    )

    def source(examples, mix):
        return StagedMaskingBatches(
            examples,
            8,
            schedule=MaskingSchedule(6),
            pad_id=tokenizer.vocab_info.pad_id,
            transform=mix.collate,
            seed=SEED,
        )

    for a, b in zip(_batches(source, lazy, mix), _batches(source, raw, mix), strict=True):
        _same(a, b)


def test_thu_prepared_and_raw_paths_give_identical_batches(sample, prepared, sample_kg) -> None:
    documents, tokenizer, phrases = sample
    ids = sample_kg.entity_ids[::2]  # half the entities have embeddings
    index = {e: i for i, e in enumerate(ids)}
    store = KnowledgeStore.open(prepared)
    store.bind_entities(index)
    lazy = knowledge_rows(store, tokenizer.vocab_info, MAX_LENGTH, segment_pairs=True, seed=SEED)
    raw = build_knowledge_examples(
        documents,
        tokenizer,
        MAX_LENGTH,
        phrases=phrases,  # the folder holds phrase units too (unused by THU's objectives)
        entity_index=index,
        segment_pairs=True,
        rng=random.Random(derive_seed(SEED, "examples")),
    )
    assert list(lazy) == list(raw)
    assert knowledge_coverage(store, index, lazy) == raw.coverage
    assert raw.coverage is not None and 0 < raw.coverage.in_rows < raw.coverage.mentions

    encoder = KnowledgeableEncoder.from_text_encoder(
        _tiny(tokenizer.vocab_size), torch.randn(len(ids), 8), 1, entity_heads=2
    )
    vocab = tokenizer.vocab_info
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, vocab),
            "nsp": build_objective(NextSentenceObjective, encoder, vocab),
            "dea": build_objective(DenoisingEntityAutoencoderObjective, encoder, vocab),
        }
    )

    def source(examples, mix):
        return PretrainingBatches(
            examples, 8, pad_id=vocab.pad_id, transform=mix.collate, seed=SEED
        )

    batches = _batches(source, lazy, mix)
    for a, b in zip(batches, _batches(source, raw, mix), strict=True):
        _same(a, b)
    assert any((b["dea_labels"] >= 0).any() for b in batches)


def test_a_raw_run_prepares_once_and_equals_a_run_on_the_prepared_folder(
    prepared, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PTM_CACHE_DIR", str(tmp_path / "cache"))

    def run(name: str, **data) -> list[dict]:
        trainer = TrainerConfig(
            output_dir=str(tmp_path / name),
            max_steps=2,
            log_every=1,
            save_every=1000,
            progress=False,
            device="cpu",
        )
        result = pretrain_ernie(
            "ernie_baidu",
            encoder=_tiny,
            trainer=trainer,
            tokenizer=str(VOCAB),
            max_length=MAX_LENGTH,
            batch_size=8,
            config={"objective.phrases": ["marie curie", "black sea"]},
            **data,
        )
        text = result.metrics_path.read_text().splitlines()
        return [json.loads(line) for line in text if line.strip()]

    first = run("raw", linked_corpus=str(LINKED))
    (cache,) = (tmp_path / "cache" / "prepared").iterdir()
    stamps = {p: p.stat().st_mtime_ns for p in (cache / "shards").iterdir()}
    manifest = (cache / "manifest.json").stat().st_mtime_ns
    again = run("raw-again", linked_corpus=str(LINKED))
    assert {p: p.stat().st_mtime_ns for p in (cache / "shards").iterdir()} == stamps
    assert (cache / "manifest.json").stat().st_mtime_ns == manifest  # nothing rewritten
    from_folder = run("prepared", prepared=str(cache))
    losses = [[r["mlm/loss"] for r in records] for records in (first, again, from_folder)]
    assert losses[0] == losses[1] == losses[2]


@pytest.mark.parametrize("kind", ["entity_units", "tokens"])
def test_a_corrupted_shard_is_caught_by_its_checksum(sample, tmp_path: Path, kind: str) -> None:
    out = tmp_path / "prepared"
    prepare_linked_corpus(LINKED, out, tokenizer=VOCAB, shard_bytes=3000)
    name = json.loads((out / "manifest.json").read_text())["shards"][2]["name"]
    path = shard_file(out, name, kind)
    data = bytearray(path.read_bytes())
    data[5] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    with pytest.raises(PreparedDataError) as caught:
        KnowledgeStore.open(out)
    message = str(caught.value)
    assert str(path) in message and "checksum" in message
    assert "re-run" in message and "rebuilt" in message
    # The fix works: preparing again rebuilds that shard alone.
    prepare_linked_corpus(LINKED, out, tokenizer=VOCAB, shard_bytes=3000)
    KnowledgeStore.open(out)


def test_a_malformed_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    lines = LINKED.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[20])
    record["mentions"] = [{"sentence": 0, "start": 5, "end": 2, "entity": "paris"}]
    lines[20] = json.dumps(record)
    bad = tmp_path / "linked.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LinkedCorpusError) as caught:
        prepare_linked_corpus(bad, tmp_path / "out", tokenizer=VOCAB, shard_bytes=3000)
    assert f"{bad}:21:" in str(caught.value)  # a later shard: lines counted in the file
    assert "mentions[0].start" in str(caught.value)
    lines[20] = '{"id": "x", "sentences": ["broken"'
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LinkedCorpusError, match=rf"{bad}:21: invalid JSON"):
        prepare_linked_corpus(bad, tmp_path / "out", tokenizer=VOCAB, shard_bytes=3000)


def test_an_unknown_entity_is_named_by_file_and_line(sample_kg, tmp_path: Path) -> None:
    lines = LINKED.read_text(encoding="utf-8").splitlines()
    number, record = next(
        (i, json.loads(line)) for i, line in enumerate(lines) if i > 10 and '"mentions": [{' in line
    )
    record["mentions"][0]["entity"] = "not_in_the_kg"
    lines[number] = json.dumps(record)
    path = tmp_path / "linked.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prepare_linked_corpus(path, tmp_path / "out", tokenizer=VOCAB, shard_bytes=3000)
    store = KnowledgeStore.open(tmp_path / "out")
    index = {e: i for i, e in enumerate(sample_kg.entity_ids)}
    store.bind_entities(index)  # not checked: the mention is only left out
    with pytest.raises(LinkedCorpusError) as caught:
        store.bind_entities(index, known=set(sample_kg.entity_ids))
    message = str(caught.value)
    assert f"{path}:{number + 1}:" in message
    assert "'not_in_the_kg'" in message and "ptm link --kg" in message


@pytest.mark.slow  # spawns two processes that import torch and spaCy (~20 s)
def test_shards_written_by_worker_processes_equal_those_written_here(
    sample, prepared, tmp_path
) -> None:
    _, _, phrases = sample
    parallel = tmp_path / "parallel"
    prepare_linked_corpus(
        LINKED, parallel, tokenizer=VOCAB, phrases=phrases, shard_bytes=3000, workers=2
    )
    digests = [
        [(s["name"], s["sha256"]) for s in json.loads((f / "manifest.json").read_text())["shards"]]
        for f in (prepared, parallel)
    ]
    assert len(digests[0]) > 5 and digests[0] == digests[1]


def test_dataloader_workers_build_the_same_batches(sample, prepared) -> None:
    _, tokenizer, _ = sample
    store = KnowledgeStore.open(prepared)
    store.bind_entities(None)
    rows = knowledge_rows(store, tokenizer.vocab_info, MAX_LENGTH)
    mix = ObjectiveMix(
        {
            "mlm": build_objective(
                KnowledgeMaskingObjective, _tiny(tokenizer.vocab_size), tokenizer.vocab_info
            )
        }
    )
    built = {
        workers: list(
            StagedMaskingBatches(
                rows,
                8,
                schedule=MaskingSchedule(6),
                pad_id=tokenizer.vocab_info.pad_id,
                transform=mix.collate,
                seed=SEED,
                num_workers=workers,
            ).iter_indices(0, range(4))
        )
        for workers in (0, 2)
    }
    for a, b in zip(built[0], built[2], strict=True):
        _same(a, b)


def test_a_resumed_run_with_a_trained_tokenizer_reuses_the_cache(tmp_path: Path) -> None:
    def run() -> None:
        trainer = TrainerConfig(
            output_dir=str(tmp_path / "run"),
            max_steps=1,
            save_every=1,
            progress=False,
            device="cpu",
        )
        pretrain_ernie(
            "ernie_baidu",
            linked=LINKED,
            encoder=_tiny,
            trainer=trainer,
            vocab_size=600,  # trained on the corpus (tokenizer=None)
            max_length=MAX_LENGTH,
            batch_size=8,
            cache_dir=str(tmp_path / "cache"),
        )

    run()
    (cache,) = (tmp_path / "cache").iterdir()
    stamps = {p.name: p.stat().st_mtime_ns for p in (cache / "shards").iterdir()}
    run()  # the run now has its own tokenizer/: the cache's is the same one
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [cache.name]
    assert {p.name: p.stat().st_mtime_ns for p in (cache / "shards").iterdir()} == stamps
