"""KEPLER's parts: the KE loss, negative sampling, description encoding, rank metrics and
the description checks (no training here; see test_kepler_training.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from knowledge_sample_paths import KG_DIR, VOCAB
from scipy.stats import binomtest

from ptm_core.encoders import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.kepler import (
    KnowledgeEmbeddingObjective,
    KnownTriples,
    corrupt_triples,
    encode_entities,
    expected_random_metrics,
    ke_loss,
    link_prediction_ranks,
    load_description_graph,
    random_scorer,
    rank_metrics,
    realistic_ranks,
    split_triples,
    tokenize_descriptions,
    transe_distance,
    triple_array,
)
from ptm_knowledge.kg import KGError


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_ke_loss_equals_a_hand_computation() -> None:
    h = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    r = torch.tensor([[0.5, 0.5], [1.0, -1.0]])
    t = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    # |1+.5-1| + |0+.5-1| = 1.0 ; |0+1-0| + |2-1-0| = 2.0
    positive = transe_distance(h, r, t, p=1)
    assert positive.tolist() == pytest.approx([1.0, 2.0])
    negative = torch.tensor([[3.0, 0.5], [6.0, 2.0]])
    gamma = 2.0
    expected = 0.0
    for d, negs in zip([1.0, 2.0], [[3.0, 0.5], [6.0, 2.0]], strict=True):
        expected += -math.log(_sigmoid(gamma - d)) - sum(
            math.log(_sigmoid(n - gamma)) for n in negs
        ) / len(negs)
    expected /= 2
    assert float(ke_loss(positive, negative, gamma)) == pytest.approx(expected, rel=1e-6)
    # p = 2 is the Euclidean distance.
    assert float(transe_distance(h[:1], r[:1], t[:1], p=2)) == pytest.approx(math.sqrt(0.5))


def test_negatives_corrupt_exactly_one_end_and_never_the_true_triple() -> None:
    generator = torch.Generator().manual_seed(0)
    num_entities = 7
    heads = torch.randint(num_entities, (500,), generator=generator)
    tails = torch.randint(num_entities, (500,), generator=generator)
    neg_h, neg_t = corrupt_triples(heads, tails, num_entities, 8, generator)
    assert neg_h.shape == neg_t.shape == (500, 8)
    head_changed = neg_h != heads[:, None]
    tail_changed = neg_t != tails[:, None]
    assert bool((head_changed ^ tail_changed).all())  # exactly one end, never neither
    assert int(neg_h.min()) >= 0 and int(neg_h.max()) < num_entities
    assert int(neg_t.min()) >= 0 and int(neg_t.max()) < num_entities
    # Head or tail with probability 1/2 each.
    assert binomtest(int(head_changed.sum()), head_changed.numel(), 0.5).pvalue > 1e-3
    # The replacement is uniform over the other entities: every one is drawn.
    drawn = torch.where(head_changed, neg_h, neg_t)
    counts = torch.bincount(drawn.flatten(), minlength=num_entities).float()
    assert bool((counts > 0.8 * counts.mean()).all())
    with pytest.raises(ValueError, match="at least 2 entities"):
        corrupt_triples(heads[:1] * 0, tails[:1] * 0, 1, 1, generator)


@pytest.fixture(scope="module")
def tiny_setup():
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    vocab = tokenizer.vocab_info
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=vocab.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )
    kg = load_description_graph(KG_DIR)
    descriptions = tokenize_descriptions(
        kg,
        tokenizer,
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        pad_id=vocab.pad_id,
        max_length=40,
        chunk_size=16,  # several chunks on the sample table
    )
    return tokenizer, encoder, kg, descriptions


def test_entity_embeddings_are_the_cls_state_of_the_description(tiny_setup) -> None:
    tokenizer, encoder, kg, descriptions = tiny_setup
    assert len(descriptions) == len(kg)
    embeddings = encode_entities(encoder, descriptions, batch_size=32)
    assert embeddings.shape == (len(kg), 32)
    encoder.eval()
    for index in (0, 5, len(kg) - 1):
        text = kg.entities[index].description
        ids = torch.tensor([tokenizer.encode(text, max_length=40).input_ids])
        assert descriptions.row(index).tolist() == ids[0].tolist()
        with torch.no_grad():
            direct = encoder(ids).last_hidden_state[0, 0]
        torch.testing.assert_close(embeddings[index], direct, atol=1e-5, rtol=1e-5)


def test_ke_batches_carry_the_descriptions_of_the_sampled_triples(tiny_setup) -> None:
    tokenizer, encoder, kg, descriptions = tiny_setup
    triples = triple_array(kg)
    objective = KnowledgeEmbeddingObjective(
        encoder,
        tokenizer.vocab_info,
        descriptions=descriptions,
        triples=triples,
        num_relations=len(kg.triples.relation_names),
        batch_size=6,
        num_negatives=3,
    )
    assert "relations.weight" in objective.state_dict()
    assert not any(k.startswith("encoder") for k in objective.state_dict())
    batch = objective.collate({}, torch.Generator().manual_seed(1))
    ids, mask = batch["ke_input_ids"], batch["ke_attention_mask"]
    known = {tuple(t) for t in triples.tolist()}
    for b in range(6):
        rows = [ids[batch[k][b]][mask[batch[k][b]]].tolist() for k in ("ke_heads", "ke_tails")]
        h = next(i for i in range(len(kg)) if descriptions.row(i).tolist() == rows[0])
        t = next(i for i in range(len(kg)) if descriptions.row(i).tolist() == rows[1])
        assert (h, int(batch["ke_relations"][b]), t) in known
    out = objective(None, batch)  # type: ignore[arg-type]
    assert out.loss.ndim == 0 and out.loss.requires_grad
    assert set(out.metrics) == {"positive_distance", "negative_distance", "pair_accuracy"}


def _brute_force_ranks(scores, triples, known, side):
    ranks = []
    for i, (h, r, t) in enumerate(triples):
        target = t if side == "tail" else h
        s = scores[i]
        options = [
            e
            for e in range(len(s))
            if e == target or ((h, r, e) if side == "tail" else (e, r, t)) not in known
        ]
        better = sum(1 for e in options if s[e] > s[target])
        not_worse = sum(1 for e in options if s[e] >= s[target])
        ranks.append(((better + 1) + not_worse) / 2)
    return ranks


def test_rank_metrics_match_a_brute_force_filtered_computation() -> None:
    rng = np.random.default_rng(0)
    num_entities, num_relations = 12, 3
    all_triples = np.unique(rng.integers(0, [12, 3, 12], size=(60, 3)), axis=0)
    test = all_triples[:15]
    known_set = {tuple(x) for x in all_triples.tolist()}
    # Integer scores: many ties, so the realistic rank matters.
    tail_scores = torch.from_numpy(rng.integers(0, 4, size=(15, num_entities))).float()
    head_scores = torch.from_numpy(rng.integers(0, 4, size=(15, num_entities))).float()

    def scorer(h, r, t, side):
        rows = [
            int(np.flatnonzero((test == np.array(x)).all(1))[0]) for x in zip(h, r, t, strict=True)
        ]
        return (tail_scores if side == "tail" else head_scores)[rows]

    known = KnownTriples(all_triples, num_entities, num_relations)
    ranks = link_prediction_ranks(scorer, test, known, batch_size=4)
    triples = [tuple(x) for x in test.tolist()]
    expected = _brute_force_ranks(tail_scores.tolist(), triples, known_set, "tail")
    expected += _brute_force_ranks(head_scores.tolist(), triples, known_set, "head")
    assert ranks.tolist() == pytest.approx(expected)
    metrics = rank_metrics(ranks)
    assert metrics["mrr"] == pytest.approx(np.mean([1 / x for x in expected]))
    for k in (1, 3, 10):
        assert metrics[f"hits_at_{k}"] == pytest.approx(np.mean([x <= k for x in expected]))
    # The filter matters on this case (else the test would not check it).
    unfiltered = link_prediction_ranks(scorer, test, known, filtered=False)
    assert not torch.equal(unfiltered, ranks)
    # Candidates: ranking among a subset equals ranking with the rest excluded.
    subset = torch.arange(num_entities)
    assert torch.equal(link_prediction_ranks(scorer, test, known, candidates=subset), ranks)


def test_random_baseline_is_the_expectation_of_random_ranking() -> None:
    rng = np.random.default_rng(1)
    all_triples = np.unique(rng.integers(0, [20, 2, 20], size=(80, 3)), axis=0)
    test = all_triples[:10]
    known = KnownTriples(all_triples, 20, 2)
    expected = expected_random_metrics(test, known)
    draws = [
        rank_metrics(link_prediction_ranks(random_scorer(20, seed), test, known))
        for seed in range(300)
    ]
    for key in ("mrr", "hits_at_1", "hits_at_3", "hits_at_10", "mean_rank"):
        values = np.array([d[key] for d in draws])
        # Mean of 300 draws: within 4 standard errors of the exact expectation.
        assert abs(values.mean() - expected[key]) < 4 * values.std() / np.sqrt(300) + 1e-9, key


def test_realistic_rank_of_a_tie_is_the_mean_of_optimistic_and_pessimistic() -> None:
    scores = torch.tensor([[1.0, 2.0, 2.0, 0.0], [5.0, 2.0, 2.0, 2.0]])
    ranks = realistic_ranks(scores, torch.tensor([1, 3]))
    assert ranks.tolist() == [1.5, 3.0]  # (1 + 2) / 2 ; (2 + 4) / 2
    excluded = torch.tensor([[False, False, True, False], [True, False, False, False]])
    assert realistic_ranks(scores, torch.tensor([1, 3]), excluded).tolist() == [1.0, 2.0]


def test_split_keeps_every_test_relation_in_train() -> None:
    triples = triple_array(load_description_graph(KG_DIR))
    train, test = split_triples(triples, 0.1, seed=3)
    assert len(train) + len(test) == len(triples)
    assert set(test[:, 1].tolist()) <= set(train[:, 1].tolist())
    assert abs(len(test) - 0.1 * len(triples)) <= 3
    again = split_triples(triples, 0.1, seed=3)
    assert np.array_equal(again[1], test)


def _write_kg(folder: Path, header: str, row: str) -> Path:
    folder.mkdir()
    (folder / "entities.tsv").write_text(f"{header}\n{row}\nb\tB\t\t\t\n")
    (folder / "triples.tsv").write_text("a\tr\tb\n")
    return folder


def test_a_missing_description_column_names_the_file_and_column(tmp_path: Path) -> None:
    folder = _write_kg(tmp_path / "kg", "id\tname\ttype\taliases", "a\tA\t\t")
    with pytest.raises(KGError) as info:
        load_description_graph(folder)
    message = str(info.value)
    assert str(folder / "entities.tsv") in message and "'description'" in message
    assert info.value.line == 1 and info.value.field == "description"


def test_descriptions_all_empty_or_refused_are_errors(tmp_path: Path) -> None:
    header = "id\tname\ttype\taliases\tdescription"
    empty = _write_kg(tmp_path / "empty", header, "a\tA\t\t\t")
    with pytest.raises(KGError, match=r"2 of 2 entities have an empty description"):
        load_description_graph(empty)
    some = _write_kg(tmp_path / "some", header, "a\tA\t\t\tThe letter a.")
    assert len(load_description_graph(some)) == 2  # b encodes its name
    with pytest.raises(KGError, match="allow_missing_descriptions"):
        load_description_graph(some, allow_missing=False)
