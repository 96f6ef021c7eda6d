"""Issue 20, ERNIE: a huge corpus line stays linear; ERNIE-THU never trains on nothing."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import torch
from ernie_runs import pretrain_ernie
from knowledge_sample_paths import KG_DIR, VOCAB

import ptm_knowledge.ernie.examples as examples_module
from ptm_core.encoders import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective
from ptm_knowledge.ernie.examples import (
    MentionCoverage,
    annotate_documents,
    build_knowledge_examples,
    check_mention_coverage,
)
from ptm_knowledge.ernie.phrases import CollocationPhrases
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.linking import (
    LinkedDocument,
    align_mentions_to_pieces,
    mention_piece_spans,
    read_linked_corpus,
)
from ptm_knowledge.linking.corpus import SentenceMention, write_linked_corpus

# ------------------------------------------------------------------ helpers


class CountingOffsets(Sequence[tuple[int, int]]):
    """Offsets that count every element read (iteration goes through ``__getitem__``)."""

    def __init__(self, items: list[tuple[int, int]]) -> None:
        self.items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):  # type: ignore[override]
        self.reads += 1
        return self.items[index]


class CountingMentions(list[SentenceMention]):
    """A document's mention list that counts the mentions handed out by iteration."""

    yielded = 0

    def __iter__(self) -> Iterator[SentenceMention]:
        for item in super().__iter__():
            CountingMentions.yielded += 1
            yield item


def _word_offsets(n: int) -> list[tuple[int, int]]:
    """Offsets of ``n`` four-letter words separated by spaces: ``[CLS] w w ... [SEP]``."""
    return [(0, 0), *((5 * i, 5 * i + 4) for i in range(n)), (0, 0)]


def _tiny(vocab_size: int):
    return bert_encoder(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )


def _trainer(path: Path, **overrides) -> TrainerConfig:
    settings = {
        "output_dir": str(path),
        "max_steps": 1,
        "log_every": 1,
        "save_every": 1000,
        "progress": False,
        "device": "cpu",
    }
    settings.update(overrides)
    return TrainerConfig(**settings)  # type: ignore[arg-type]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


_SYLLABLES = ["ka", "lo", "mir", "ven", "ta", "dor", "el", "sa", "rin", "bo", "tus", "quor"]
_FILLER = [
    *("the", "a", "of", "in", "on", "was", "and", "with", "which", "after", "before"),
    *("during", "their", "its", "great", "small", "old", "new", "river", "city", "people"),
    *("year", "work"),
]


def make_linked_corpus(
    num_entities: int = 1500, num_sentences: int = 1200, seed: int = 0
) -> tuple[list[str], list[LinkedDocument]]:
    """A KG-sized entity table and a linked corpus of it, as the linker would write.

    Entities have made-up one- or two-word names; each sentence mentions one to three of
    them among filler words, eight sentences per document.
    """
    rng = random.Random(seed)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < num_entities:
        words = rng.randint(1, 2)
        name = " ".join(
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
            for _ in range(words)
        )
        if name not in seen:
            seen.add(name)
            names.append(name)
    ids = [f"Q{1000 + i}" for i in range(num_entities)]
    documents: list[LinkedDocument] = []
    sentences: list[str] = []
    mentions: list[SentenceMention] = []
    for s in range(num_sentences):
        text, spans = "", []
        for _ in range(rng.randint(1, 3)):
            text += " ".join(rng.sample(_FILLER, rng.randint(2, 5))) + " "
            entity = rng.randrange(num_entities)
            spans.append((len(text), len(text) + len(names[entity]), ids[entity]))
            text += names[entity] + " "
        text += " ".join(rng.sample(_FILLER, 3)) + "."
        text = text[0].upper() + text[1:]
        mentions += [SentenceMention(len(sentences), a, b, e) for a, b, e in spans]
        sentences.append(text)
        if s % 8 == 7:
            documents.append(LinkedDocument(f"doc{len(documents)}", sentences, mentions))
            sentences, mentions = [], []
    if sentences:
        documents.append(LinkedDocument(f"doc{len(documents)}", sentences, mentions))
    return ids, documents


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """Entity ids and the path of the generated linked corpus (validated on reading)."""
    ids, documents = make_linked_corpus()
    path = tmp_path_factory.mktemp("generated") / "linked.jsonl"
    write_linked_corpus(documents, path)
    return ids, path


# ------------------------------------------------------------------ defect 2: long lines


def test_piece_spans_read_each_offset_once() -> None:
    # 3,000 pieces, 1,000 spans: scanning every piece per span read 3,000,000 offsets.
    offsets = CountingOffsets(_word_offsets(3000))
    spans = [(15 * k, 15 * k + 9) for k in range(1000)]  # words 3k and 3k + 1
    result = mention_piece_spans(offsets, spans, [1] + [0] * 3000 + [1])
    assert result[:2] == [(1, 3), (4, 6)] and len(result) == 1000
    assert offsets.reads <= len(offsets) + 1  # one pass (+1: the iterator's IndexError)


def test_mention_alignment_reads_each_offset_once() -> None:
    offsets = CountingOffsets(_word_offsets(3000))
    mentions = [(15 * k, 15 * k + 9, f"e{k}") for k in range(1000)]
    index = {f"e{k}": k for k in range(1000)}
    ids = align_mentions_to_pieces(offsets, mentions, index, [1] + [0] * 3000 + [1])
    assert ids[1] == 0 and ids[2] == -1 and ids[4] == 1 and ids[2998] == 999
    assert sum(i != -1 for i in ids) == 1000
    assert offsets.reads <= len(offsets) + 1


def _reference_spans(offsets, spans, special):
    out = []
    for start, end in spans:
        covered = [
            i
            for i, (a, b) in enumerate(offsets)
            if not special[i] and b > a and a < end and start < b
        ]
        if covered:
            out.append((covered[0], covered[-1] + 1))
    return out


@pytest.mark.parametrize("monotone", [True, False])
def test_fast_alignment_equals_the_full_scan(monotone: bool) -> None:
    rng = random.Random(3)
    for _ in range(200):
        offsets, position = [(0, 0)], 0
        for _ in range(rng.randint(0, 30)):
            position += rng.randint(0, 2)  # touching pieces, gaps
            width = rng.choice([0, 1, 1, 2, 3])  # empty pieces too
            offsets.append((position, position + width))
            position += width
        offsets.append((0, 0))
        if not monotone:
            rng.shuffle(offsets)
        special = [int(o == (0, 0)) for o in offsets]
        spans = [
            (a, a + rng.randint(0, 6)) for a in (rng.randint(0, position + 2) for _ in range(8))
        ]
        assert mention_piece_spans(offsets, spans, special) == _reference_spans(
            offsets, spans, special
        )
        mentions = [(a, b, f"e{k % 3}") for k, (a, b) in enumerate(spans)]
        index = {"e0": 0, "e1": 1}  # e2 has no embedding: skipped
        expected = [-1] * len(offsets)
        for start, end, entity in mentions:
            covered = _reference_spans(offsets, [(start, end)], special)
            if entity in index and covered:
                expected[covered[0][0]] = index[entity]
        assert align_mentions_to_pieces(offsets, mentions, index, special) == expected


def test_annotation_reads_each_mention_once() -> None:
    # 2,000 one-word sentences, one mention each, in one document: asking every sentence
    # for its mentions scanned all 2,000 mentions 2,000 times.
    sentences = ["Paris"] * 2000
    mentions = CountingMentions(SentenceMention(i, 0, 5, "paris") for i in range(2000))
    document = LinkedDocument("d", sentences, mentions)
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    CountingMentions.yielded = 0
    _, table = annotate_documents([document], tokenizer, entity_index={"paris": 7})
    assert sum(e == 7 for e in table["entity_ids"]) == 2000
    assert CountingMentions.yielded <= 2 * len(mentions)


def _one_line_and_split(words: int, per_line: int) -> tuple[LinkedDocument, LinkedDocument]:
    """The same text as one huge sentence and as sentences of ``per_line`` words."""
    rng = random.Random(1)
    vocabulary = ["marie", "curie", "studied", "radium", "in", "paris", "with", "pierre"]
    tokens = [rng.choice(vocabulary) for _ in range(words)]
    long_text = " ".join(tokens)
    starts, position = [], 0
    for token in tokens:
        starts.append(position)
        position += len(token) + 1
    entity_words = [i for i, t in enumerate(tokens) if t == "paris"]
    long_mentions = [SentenceMention(0, starts[i], starts[i] + 5, "paris") for i in entity_words]
    lines = [tokens[i : i + per_line] for i in range(0, words, per_line)]
    split_mentions = []
    for i in entity_words:
        line_start = starts[i - i % per_line]  # the first word of the word's line
        start = starts[i] - line_start
        split_mentions.append(SentenceMention(i // per_line, start, start + 5, "paris"))
    one = LinkedDocument("one", [long_text], long_mentions)
    split = LinkedDocument("split", [" ".join(line) for line in lines], split_mentions)
    return one, split


def test_one_long_line_gives_the_rows_of_the_same_text_in_lines() -> None:
    one, split = _one_line_and_split(words=6000, per_line=17)
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    # Phrases that never cross a line end of the split text, so both see the same units.
    phrases = CollocationPhrases.from_lexicon(["marie curie"])
    rows_one = build_knowledge_examples([one], tokenizer, 64, phrases=phrases)
    rows_split = build_knowledge_examples([split], tokenizer, 64, phrases=phrases)
    assert len(rows_one) == len(rows_split) > 90  # 6,000 pieces in rows of 62
    for a, b in zip(rows_one, rows_split, strict=True):
        assert a["input_ids"] == b["input_ids"]
        assert a["entity_units"] == b["entity_units"]
        assert len(a["input_ids"]) <= 64
    assert sum(u != -1 for r in rows_one for u in r["entity_units"]) > 0


def test_a_long_sentence_reaches_the_row_builder_in_row_sized_pieces(monkeypatch) -> None:
    # The core single-segment builder re-slices the rest of a sentence for every row
    # (quadratic in one huge sentence): it must only ever see row-sized sentences.
    seen: list[int] = []
    real = examples_module.build_single_segment_examples

    def spy(documents, vocab, max_length):
        seen.extend(len(s) for d in documents for s in d)
        return real(documents, vocab, max_length)

    monkeypatch.setattr(examples_module, "build_single_segment_examples", spy)
    one, _ = _one_line_and_split(words=3000, per_line=17)
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    rows = build_knowledge_examples([one], tokenizer, 32)
    assert seen and max(seen) <= 30 and sum(seen) == 3000  # one piece per word
    # Rows are exactly what the builder makes from the whole sentence.
    position_docs, table = annotate_documents([one], tokenizer)
    whole = real(position_docs, examples_module._POSITION_VOCAB, 32)
    assert [len(r["input_ids"]) for r in rows] == [len(r["input_ids"]) for r in whole]
    assert rows[-1]["input_ids"][1:-1] == [
        table["token_ids"][p] for p in whole[-1]["input_ids"][1:-1]
    ]


# ------------------------------------------------------------------ defect 7: dEA on nothing


def test_all_unknown_entities_stop_before_training(generated, tmp_path: Path) -> None:
    _, path = generated
    documents = read_linked_corpus(path)
    mentions = sum(len(d.mentions) for d in documents)
    other_kg = [f"other_{i}" for i in range(50)]  # embeddings made from another KG
    trainer = _trainer(tmp_path / "run")
    with pytest.raises(ValueError) as caught:
        pretrain_ernie(
            "ernie_thu",
            linked=documents,
            embeddings=(other_kg, torch.randn(50, 16)),
            encoder=_tiny,
            trainer=trainer,
            vocab_size=1000,
            max_length=64,
            batch_size=8,
        )
    message = str(caught.value)
    assert f"0 of {mentions:,} linked mentions have an entity in the KG embeddings" in message
    assert f"({tmp_path / 'run-inputs' / 'embeddings'})" in message  # where they came from
    assert "different KGs" in message and "--kg" in message
    assert f"{mentions:,} linked mentions, 0 with an entity in the KG embeddings" in message
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # nothing was trained


def test_few_known_entities_warn_with_the_counts(generated, tmp_path: Path, caplog) -> None:
    ids, path = generated
    documents = read_linked_corpus(path)
    subset = ids[:75]  # 5 % of the entities have embeddings
    mentions = sum(len(d.mentions) for d in documents)
    known = sum(m.entity_id in set(subset) for d in documents for m in d.mentions)
    assert 0 < known < 0.1 * mentions
    with caplog.at_level(logging.WARNING, logger="ptm_knowledge.ernie.examples"):
        pretrain_ernie(
            "ernie_thu",
            linked=documents,
            embeddings=(subset, torch.randn(len(subset), 16)),
            encoder=_tiny,
            trainer=_trainer(tmp_path / "run"),
            vocab_size=1000,
            max_length=64,
            batch_size=8,
        )
    (warning,) = [r for r in caplog.records if "reach the training rows" in r.getMessage()]
    message = warning.getMessage()
    assert warning.levelno == logging.WARNING
    assert f"{mentions:,} linked mentions, {known:,} with an entity in the KG embeddings" in message
    assert "missing from the KG embeddings" in message


def test_a_realistic_linked_corpus_feeds_dea_from_the_first_step(generated, tmp_path: Path) -> None:
    ids, path = generated
    documents = read_linked_corpus(path)
    tokenizer = WordPieceTokenizer.train(
        (s for d in documents for s in d.sentences), vocab_size=1000, lowercase=True
    )
    rows = build_knowledge_examples(
        documents,
        tokenizer,
        64,
        entity_index={e: i for i, e in enumerate(ids)},
        segment_pairs=True,
        rng=random.Random(0),
    )
    coverage = rows.coverage
    assert coverage is not None
    assert coverage.mentions == coverage.known == coverage.aligned > 2000
    assert coverage.in_rows >= 0.9 * coverage.mentions
    assert sum(e >= 0 for r in rows for e in r["entity_ids"]) >= coverage.in_rows

    result = pretrain_ernie(
        "ernie_thu",
        linked=path,
        embeddings=(ids, torch.randn(len(ids), 16, generator=torch.Generator().manual_seed(0))),
        encoder=_tiny,
        trainer=_trainer(tmp_path / "run", max_steps=2),
        vocab_size=1000,
        max_length=64,
        batch_size=16,
    )
    first = _records(result.metrics_path)[0]
    assert first["step"] == 1
    assert first["dea/mentions"] > 16  # several linked entities per row of the batch
    assert first["dea/candidates"] > 1 and first["dea/loss"] > 0


def test_dea_logs_the_same_keys_and_zero_mentions_for_an_empty_batch() -> None:
    text = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2)
    encoder = KnowledgeableEncoder(text, torch.randn(20, 8), 1, entity_heads=2)
    objective = DenoisingEntityAutoencoderObjective(encoder)
    ids = torch.randint(5, 50, (2, 6))
    outputs = {}
    for name, entity_ids in {
        "some": torch.tensor([[-1, 4, -1, 9, -1, -1], [4, -1, -1, -1, 15, -1]]),
        "none": torch.full((2, 6), -1),
    }.items():
        batch = objective.collate(
            {"input_ids": ids, "entity_ids": entity_ids, "attention_mask": torch.ones(2, 6)},
            torch.Generator().manual_seed(0),
        )
        outputs[name] = objective(encoder(ids, entity_ids=batch["entity_ids"]), batch)
    # The same metric names either way: DDP ranks reduce them in lockstep.
    assert set(outputs["some"].metrics) == set(outputs["none"].metrics)
    assert float(outputs["some"].metrics["mentions"]) == 4.0
    assert float(outputs["none"].metrics["mentions"]) == 0.0
    assert float(outputs["none"].loss.detach()) == 0.0


def test_coverage_errors_name_where_the_mentions_were_lost() -> None:
    with pytest.raises(ValueError, match="has no mentions: link it"):
        check_mention_coverage(MentionCoverage(0, 0, 0, 0))
    with pytest.raises(ValueError, match=r"none of the 40 known mentions covers a word piece"):
        check_mention_coverage(MentionCoverage(50, 40, 0, 0))
    with pytest.raises(ValueError, match=r"all cut from the rows by truncation \(max_length=16\)"):
        check_mention_coverage(MentionCoverage(50, 40, 40, 0), max_length=16)
    check_mention_coverage(MentionCoverage(50, 40, 40, 30))  # 60 %: fine


def test_truncation_losses_warn(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ptm_knowledge.ernie.examples"):
        check_mention_coverage(MentionCoverage(2848, 2848, 2848, 12), max_length=128)
    (record,) = caplog.records
    assert "only 0.4% of the linked mentions" in record.getMessage()
    assert "cut by truncation (max_length=128)" in record.getMessage()


def test_recipe_refuses_a_linked_corpus_of_another_kg_before_embedding(
    generated, tmp_path: Path, monkeypatch
) -> None:
    from flows import runner
    from flows.config import compose_config
    from ptm_knowledge.ernie import plans

    def no_embedding(*args, **kwargs):
        raise AssertionError("TransE ran on a KG the corpus was not linked against")

    monkeypatch.setattr(plans, "train_kg_embeddings", no_embedding)
    _, path = generated
    cfg = compose_config(["experiment=ernie_thu_tiny", f"data.linked_corpus={path}"])
    with pytest.raises(ValueError) as caught:
        runner.run(cfg, output_dir=str(tmp_path / "run"))
    message = str(caught.value)
    assert "0 of " in message and f"linked mentions of {path}" in message
    assert f"data.kg={KG_DIR}" in message and "linked against another KG" in message
