"""ERNIE-Baidu knowledge masking over the whole sample corpus: units never split, 15 % rate."""

from __future__ import annotations

import pytest
import torch
from knowledge_sample_paths import KG_DIR, VOCAB

from ptm_core.data import pad_examples
from ptm_core.encoders import bert_encoder
from ptm_core.objectives import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.ernie.examples import build_knowledge_examples
from ptm_knowledge.ernie.knowledge_masking import (
    LEVELS,
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
    select_units,
)
from ptm_knowledge.ernie.phrases import CollocationPhrases
from ptm_knowledge.linking import read_linked_corpus


@pytest.fixture(scope="module")
def setup(sample_kg):
    tok = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    docs = read_linked_corpus(KG_DIR / "gold_mentions.jsonl", sample_kg.entity_ids)
    phrases = CollocationPhrases.learn(s for d in docs for s in d.sentences)
    examples = build_knowledge_examples(docs, tok, 64, phrases=phrases)
    encoder = bert_encoder(vocab_size=tok.vocab_size, hidden_size=32, num_layers=1, num_heads=2)
    return tok, examples, encoder


def _units(row: torch.Tensor) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for position, unit in enumerate(row.tolist()):
        if unit >= 0:
            groups.setdefault(unit, []).append(position)
    return groups


@pytest.mark.parametrize("level", LEVELS)
def test_units_never_split_and_rate(setup, level: str) -> None:
    tok, examples, encoder = setup
    objective = build_objective(KnowledgeMaskingObjective, encoder, tok.vocab_info, level=level)
    generator = torch.Generator().manual_seed(1)
    masked = candidates = units_seen = 0
    for start in range(0, len(examples), 32):
        batch = pad_examples(examples[start : start + 32], tok.vocab_info.pad_id)
        out = objective.collate(batch, generator)
        selected = out["mlm_labels"] != IGNORE_INDEX
        real = (~batch["special_tokens_mask"].bool()) & batch["attention_mask"].bool()
        assert not (selected & ~real).any()
        masked += int(selected.sum())
        candidates += int(real.sum())
        for key in ("phrase_units", "entity_units"):
            if level == "basic" or key != f"{level}_units":
                continue
            for row in range(selected.shape[0]):
                for positions in _units(batch[key][row] * real[row] - (~real[row]).long()).values():
                    units_seen += 1
                    flags = selected[row, positions]
                    assert flags.all() or not flags.any(), f"{level} unit split"
    rate = masked / candidates
    print(f"\n{level}: {masked}/{candidates} = {rate:.4f} masked, {units_seen} units")
    assert candidates > 8000
    assert abs(rate - 0.15) <= 0.01
    if level != "basic":
        assert units_seen > 40


def test_units_annotated(setup) -> None:
    _, examples, _ = setup
    entity_units = sum(len(_units(torch.tensor(e["entity_units"]))) for e in examples)
    phrase_units = sum(len(_units(torch.tensor(e["phrase_units"]))) for e in examples)
    assert entity_units >= 180  # ~192 gold mentions (a few are cut by row boundaries)
    assert phrase_units >= 30


def test_select_units_takes_whole_units() -> None:
    units = torch.tensor([0, 0, 0, -1, 1, 1, -1, -1, -1, -1])
    candidates = torch.ones(10, dtype=torch.bool)
    for seed in range(50):
        chosen = select_units(units, candidates, 0.3, torch.Generator().manual_seed(seed))
        assert chosen[:3].all() or not chosen[:3].any()
        assert chosen[4:6].all() or not chosen[4:6].any()
        assert int(chosen.sum()) in (3, 4)


def test_staged_schedule(setup) -> None:
    tok, examples, encoder = setup
    schedule = MaskingSchedule(total_batches=9)
    assert [schedule.level_at(i) for i in range(12)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2]
    objective = build_objective(KnowledgeMaskingObjective, encoder, tok.vocab_info)
    batches = StagedMaskingBatches(
        examples,
        16,
        schedule=schedule,
        pad_id=tok.vocab_info.pad_id,
        transform=objective.collate,
        seed=0,
    )
    levels = [int(b["masking_level"][0]) for b in batches.iter_batches(0)][:9]
    assert levels == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    again = batches.batch(0, 4)
    assert torch.equal(again["input_ids"], batches.batch(0, 4)["input_ids"])


def test_phrase_sources() -> None:
    import spacy

    from ptm_knowledge.ernie.phrases import NounChunkPhrases, build_phrase_extractor

    blank = spacy.blank("en")
    with pytest.raises(ValueError, match="parser"):
        NounChunkPhrases(blank)
    # A blank pipeline has no parser: collocations learned from the sentences are used.
    sentences = ["The Black Sea is big.", "Ships cross the Black Sea.", "The Black Sea is deep."]
    learned = build_phrase_extractor(blank, sentences, min_count=2, min_pmi=0.5)
    assert isinstance(learned, CollocationPhrases)
    assert learned.phrase_spans("Near the Black Sea coast.") == [(9, 18)]
    lexicon = CollocationPhrases.from_lexicon(["second world war"])
    assert lexicon.phrase_spans("In the Second World War.") == [(7, 23)]
