"""WKLM's entity replacement: rate, same-type constraint, adjacency rule, new spans."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from knowledge_sample_paths import VOCAB

from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.kg import Entity, KnowledgeGraph
from ptm_knowledge.wklm import (
    EntityTypeIndex,
    ReplacementStats,
    SurfaceForms,
    replace_mentions,
    row_mentions,
)

CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)


def _synthetic_kg() -> KnowledgeGraph:
    """Three types of several entities, one type of one entity, one untyped entity."""
    names = {
        "person": ["Marie Curie", "Pierre Curie", "Henri Becquerel", "Albert Einstein"],
        "city": ["Paris", "Warsaw", "London", "Berlin", "Vienna"],
        "river": ["Seine", "Vistula", "Thames"],
        "planet": ["Mars"],
        "": ["radium"],
    }
    entities = [
        Entity(f"{kind or 'none'}_{i}", name, (name.lower(),), kind)
        for kind, group in names.items()
        for i, name in enumerate(group)
    ]
    return KnowledgeGraph(entities)


def _row(mentions: list[tuple[int, int, int]], length: int) -> dict[str, list[int]]:
    ids = [CLS] + [100 + i for i in range(length - 2)] + [SEP]
    return {
        "input_ids": ids,
        "token_type_ids": [0] * length,
        "special_tokens_mask": [1] + [0] * (length - 2) + [1],
    }


def _chain(entities: list[int], gap: int = 1) -> tuple[dict[str, list[int]], list]:
    """A row with one-piece mentions of ``entities`` separated by ``gap`` plain pieces."""
    mentions, position = [], 1
    for entity in entities:
        mentions.append((position, position + 1, entity))
        position += 1 + gap
    return _row(mentions, position + 1), mentions


def test_type_index_draws_same_type_other_entity_on_a_large_kg() -> None:
    rng = np.random.default_rng(0)
    n = 200_000
    labels = np.array(["t0", "t1", "t2", "solo", ""], dtype=object)
    codes = rng.choice([0, 1, 2], size=n, p=[0.7, 0.2, 0.1])
    types = list(labels[codes])
    types[5], types[6] = "solo", ""
    index = EntityTypeIndex.from_types(types)
    entities = rng.integers(0, n, size=100_000)
    ok = index.replaceable(entities)
    assert not index.replaceable(np.array([5, 6])).any()
    drawn = index.sample_other(entities[ok], rng)
    assert (index.type_codes[drawn] == index.type_codes[entities[ok]]).all()
    assert (drawn != entities[ok]).all()
    # Uniform over the other members: a type of 3 entities, each of the 2 others ~1/2.
    small = EntityTypeIndex.from_types(["a", "b", "a", "a"])
    picks = small.sample_other(np.zeros(4000, dtype=np.int64), rng)
    assert set(picks.tolist()) == {2, 3}
    assert abs((picks == 2).mean() - 0.5) < 4 * math.sqrt(0.25 / 4000)


def test_replacement_rate_is_half_among_eligible_and_never_two_neighbours(tokenizer) -> None:
    kg = _synthetic_kg()
    types = EntityTypeIndex.from_graph(kg)
    surfaces = SurfaceForms(kg.entities, tokenizer)
    replaceable = [i for i in range(len(kg)) if types.replaceable(np.array([i]))[0]]
    rng = np.random.default_rng(1)
    total = ReplacementStats()
    n_mentions = 8
    by_position = np.zeros(n_mentions)
    rows = 1500
    for _ in range(rows):
        chosen = rng.choice(replaceable, size=n_mentions).tolist()
        row, mentions = _chain(chosen, gap=int(rng.integers(0, 3)))
        out = replace_mentions(row, mentions, types, surfaces, rng, replace_prob=0.5)
        total = total + out.stats
        flags = out.replaced
        assert not any(a and b for a, b in itertools.pairwise(flags))
        by_position += np.asarray(flags, dtype=float)
    assert total.mentions == rows * n_mentions
    assert total.eligible + total.blocked == total.mentions
    # Among eligible mentions every draw is Bernoulli(0.5): 4 sigma binomial tolerance.
    rate = total.replaced / total.eligible
    assert abs(rate - 0.5) < 4 * math.sqrt(0.25 / total.eligible), rate
    # Overall, mention k is replaced with r_k = p (1 - r_{k-1}), r_1 = p.
    expected, r = [], 0.0
    for _ in range(n_mentions):
        r = 0.5 * (1 - r)
        expected.append(r)
    for k in range(n_mentions):
        observed = by_position[k] / rows
        assert abs(observed - expected[k]) < 4 * math.sqrt(expected[k] * (1 - expected[k]) / rows)
    assert total.replaced / total.mentions == pytest.approx(np.mean(expected), abs=0.03)


def test_same_type_always_and_spans_point_at_the_new_name(tokenizer) -> None:
    kg = _synthetic_kg()
    types = EntityTypeIndex.from_graph(kg)
    surfaces = SurfaceForms(kg.entities, tokenizer)
    rng = np.random.default_rng(2)
    replaced = 0
    for _ in range(400):
        chosen = rng.integers(0, len(kg), size=6).tolist()
        row, mentions = _chain(chosen, gap=2)
        out = replace_mentions(row, mentions, types, surfaces, rng)
        assert out.input_ids[0] == CLS and out.input_ids[-1] == SEP
        assert len(out.input_ids) == len(out.token_type_ids) == len(out.special_tokens_mask)
        assert len(out.spans) == len(mentions)
        for k, ((first, stop), old, new, flag) in enumerate(
            zip(out.spans, out.originals, out.entities, out.replaced, strict=True)
        ):
            if flag:
                replaced += 1
                assert types.type_name(new) == types.type_name(old) != ""
                assert new != old
                name = tokenizer.encode(kg.entities.names[new]).input_ids[1:-1]
                assert out.input_ids[first:stop] == name
            else:
                assert new == old == mentions[k][2]
                assert out.input_ids[first:stop] == [row["input_ids"][mentions[k][0]]]
        # The plain pieces between mentions are unchanged and in order.
        inside = {p for first, stop in out.spans for p in range(first, stop)}
        plain = [t for i, t in enumerate(out.input_ids) if i not in inside]
        original_inside = {m[0] for m in mentions}
        assert plain == [t for i, t in enumerate(row["input_ids"]) if i not in original_inside]
    assert replaced > 300


def test_untyped_and_sole_entities_are_kept_and_counted(tokenizer) -> None:
    kg = _synthetic_kg()
    types = EntityTypeIndex.from_graph(kg)
    surfaces = SurfaceForms(kg.entities, tokenizer)
    mars, radium = kg.index["planet_0"], kg.index["none_0"]
    row, mentions = _chain([mars, radium, mars, radium], gap=1)
    out = replace_mentions(
        row, mentions, types, surfaces, np.random.default_rng(3), replace_prob=1.0
    )
    assert out.replaced == [False] * 4
    assert out.input_ids == row["input_ids"]
    assert (out.stats.single, out.stats.untyped, out.stats.eligible) == (2, 2, 0)
    # At p = 1 the rule alone decides: replace, skip, replace, skip ...
    paris = kg.index["city_0"]
    row, mentions = _chain([paris] * 5, gap=0)
    out = replace_mentions(
        row, mentions, types, surfaces, np.random.default_rng(4), replace_prob=1.0
    )
    assert out.replaced == [True, False, True, False, True]
    assert out.stats.blocked == 2


def test_grown_rows_are_cut_and_cut_mentions_unlabelled(tokenizer) -> None:
    kg = KnowledgeGraph([Entity("a", "x", (), "t"), Entity("b", "paris seine", (), "t")])
    types = EntityTypeIndex.from_graph(kg)
    surfaces = SurfaceForms(kg.entities, tokenizer)
    row, mentions = _chain([0, 0, 0], gap=1)  # 8 pieces; the name of "b" is 3
    out = replace_mentions(
        row, mentions, types, surfaces, np.random.default_rng(0), replace_prob=1.0, max_length=9
    )
    assert len(out.input_ids) == 9 and out.input_ids[-1] == SEP
    assert out.replaced == [True, False]  # 1st and 3rd grew to 3 pieces; the 3rd was cut
    assert out.stats.truncated == 1
    assert all(stop <= 8 for _, stop in out.spans)
    example = out.example()
    assert example["mention_labels"][1] == 1 and example["mention_ends"][1] == 3
    assert example["mention_labels"][5] == 0
    assert sum(v != -100 for v in example["mention_labels"]) == 2


def test_row_mentions_reads_units_with_an_entity() -> None:
    units = [-1, 0, 0, -1, 1, 2, 2, -1]
    entities = [-1, 7, -1, -1, -1, 9, -1, -1]  # unit 1 has no KG entity
    assert row_mentions(units, entities) == [(1, 3, 7), (5, 7, 9)]
