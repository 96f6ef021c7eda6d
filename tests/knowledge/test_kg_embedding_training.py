"""KG embeddings that learn: every model beats its untrained self, early stopping stops,
filtered >= raw metrics, pre-split folders are used as given, presets pick by size, bad
settings name their flag. Small generated KGs; seconds each."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ptm_knowledge.kg import load_entity_embeddings, load_knowledge_graph, train_kg_embeddings
from ptm_knowledge.kg.embedding_settings import MODELS, pick_preset, resolve_settings
from ptm_knowledge.kg.embedding_splits import read_kg_split

HEADER = "id\tname\ttype\taliases\tdescription\n"


def _write_kg(folder: Path, triples: list[tuple[str, str, str]], extra: list[str] = ()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ids = sorted({e for h, _, t in triples for e in (h, t)} | set(extra))
    rows = "".join(f"{e}\t{e}\tthing\t\t\n" for e in ids)
    (folder / "entities.tsv").write_text(HEADER + rows)
    (folder / "triples.tsv").write_text("".join("\t".join(t) + "\n" for t in triples))
    return folder


def structured_triples(seed: int = 0) -> list[tuple[str, str, str]]:
    """6 groups of 10 members: member_of its group's hub, similar_to 3 members of its group
    (so a (head, similar_to) has several true tails: filtered and raw ranks differ)."""
    rng = random.Random(seed)
    triples = []
    for g in range(6):
        members = [f"g{g}m{i}" for i in range(10)]
        for member in members:
            triples.append((member, "member_of", f"hub{g}"))
            for other in rng.sample([m for m in members if m != member], 3):
                triples.append((member, "similar_to", other))
    return triples


@pytest.fixture(scope="module")
def structured_kg(tmp_path_factory: pytest.TempPathFactory):
    return load_knowledge_graph(_write_kg(tmp_path_factory.mktemp("kg"), structured_triples()))


@pytest.mark.parametrize("model", MODELS)
def test_every_model_learns(structured_kg, model: str) -> None:
    trained, untrained = [], []
    for seed in (0, 1):
        result = train_kg_embeddings(
            structured_kg, model=model, num_epochs=40, eval_every=10, patience=0, seed=seed
        )
        trained.append(result.metrics["mrr"])
        untrained.append(result.baseline_metrics["mrr"])
    print(f"\n{model}: filtered MRR {trained}, untrained {untrained}")
    # 66 entities: an untrained model ranks the true entity ~33rd (MRR 0.04-0.09 over
    # seeds); a tail query (member, member_of, ?) alone is 1 of 6 hubs once learnt. The
    # mean of two seeds must clear the untrained mean by more than that whole spread
    # (measured means: TransE 0.26, RotatE 0.37, ComplEx 0.17, DistMult 0.41).
    assert sum(trained) / 2 > sum(untrained) / 2 + 0.06
    width = 2 * 32 if model in ("RotatE", "ComplEx") else 32
    assert result.embeddings.shape == (len(structured_kg), width)
    assert result.report["settings"]["preset"] == "small"


def test_early_stopping_stops_and_would_not_without_patience(structured_kg) -> None:
    # lr 1e-9: validation MRR cannot gain 1%, so patience 1 stops at the second evaluation.
    common = {"num_epochs": 30, "eval_every": 2, "learning_rate": 1e-9, "seed": 0}
    stopped = train_kg_embeddings(structured_kg, patience=1, evaluate_baseline=False, **common)
    assert stopped.report["stopped_early"] is True
    assert stopped.report["epochs_run"] == 4
    assert [p["epoch"] for p in stopped.report["curve"]] == [2, 4]
    endless = train_kg_embeddings(structured_kg, patience=0, evaluate_baseline=False, **common)
    assert endless.report["stopped_early"] is False
    assert endless.report["epochs_run"] == 30
    assert len(endless.report["curve"]) == 15


def test_filtered_metrics_at_least_raw_and_differ(structured_kg) -> None:
    result = train_kg_embeddings(structured_kg, num_epochs=20, patience=0, seed=1)
    filtered, raw = result.metrics, result.report["test_raw"]
    for key in ("mrr", "hits_at_1", "hits_at_3", "hits_at_10"):
        assert filtered[key] >= raw[key] - 1e-9, key
    assert filtered["mean_rank"] <= raw["mean_rank"] + 1e-9
    # similar_to has 3 true tails per head: raw ranks count the other two against it.
    assert filtered["mrr"] > raw["mrr"]


def test_pre_split_folder_is_used_as_given(tmp_path: Path) -> None:
    triples = structured_triples(seed=2)
    folder = _write_kg(tmp_path / "kg", triples)
    rng = random.Random(0)
    held = rng.sample([t for t in triples if t[1] == "similar_to"], 20)
    train = [t for t in triples if t not in held]
    for name, part in (("train", train), ("valid", held[:10]), ("test", held[10:])):
        (folder / f"{name}.tsv").write_text("".join("\t".join(t) + "\n" for t in part))
    kg = load_knowledge_graph(folder)
    split = read_kg_split(folder, kg)
    assert split is not None and split.test == held[10:] and split.train == train
    result = train_kg_embeddings(kg, split=split, num_epochs=5, patience=0)
    assert (result.num_train, result.num_test, result.report["num_valid"]) == (len(train), 10, 10)
    out = result.save(tmp_path / "emb")
    ids, matrix = load_entity_embeddings(out)
    assert ids == kg.entity_ids and matrix.shape[0] == len(kg)

    (folder / "test.tsv").write_text("g0m1\tsimilar_to\tg0m2\ng0m1\tsimilar_to\tnobody\n")
    with pytest.raises(ValueError, match=r"test\.tsv:2: entity 'nobody' is not in entities\.tsv"):
        read_kg_split(folder, kg)
    (folder / "valid.tsv").unlink()
    with pytest.raises(ValueError, match=r"not valid\.tsv; give all three split files or none"):
        read_kg_split(folder, kg)
    assert read_kg_split(tmp_path / "emb", kg) is None


def test_presets_pick_by_size_and_flags_override() -> None:
    assert [pick_preset(n) for n in (10, 4_999, 5_000, 40_000, 50_001)] == [
        "small",
        "small",
        "medium",
        "medium",
        "large",
    ]
    auto = resolve_settings(model="RotatE", num_entities=38_000, embedding_dim=64)
    assert (auto.preset, auto.embedding_dim, auto.loss) == ("medium", 64, "NSSA")
    assert auto.loss_kwargs["adversarial_temperature"] == 0.5
    # RotatE's own learning rate at medium size; an explicit --lr still wins
    assert (auto.learning_rate, resolve_settings(num_entities=38_000).learning_rate) == (
        0.02,
        0.005,
    )
    assert (
        resolve_settings(model="RotatE", num_entities=38_000, learning_rate=0.1).learning_rate
        == 0.1
    )
    assert resolve_settings(preset="large", num_entities=10).preset == "large"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"num_negatives": 0}, r"^num_negatives \(--negatives\) is 0; .* at least 1$"),
        ({"eval_every": 1.5}, r"^eval_every \(--eval-every\) is 1\.5"),
        ({"patience": -1}, r"^patience \(--patience\) is -1; .* at least 0$"),
        ({"learning_rate": float("inf")}, r"^learning_rate \(--lr\) is inf"),
        ({"preset": "tiny"}, r"^preset \(--preset\) is 'tiny'; use auto, small, medium or large$"),
        ({"model": "NoSuchModel"}, r"^unknown PyKEEN model 'NoSuchModel' \(--model\); valid"),
        ({"threads": 0}, r"^threads \(--threads\) is 0"),
        ({"valid_sample": -5}, r"^valid_sample \(--valid-sample\) is -5; .* at least 0$"),
        ({"device": "tpu"}, r"^device \(--device\) is 'tpu'"),
    ],
)
def test_bad_settings_name_the_flag(structured_kg, settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        train_kg_embeddings(structured_kg, num_epochs=1, **settings)
    assert "\n" not in str(caught.value)


def test_early_stopping_can_score_a_fixed_sample_of_valid(structured_kg) -> None:
    """valid_sample: the stopper ranks a fixed random sample (same seed, same sample, in
    file order); the final validation scores every triple."""
    from ptm_knowledge.kg.embedding_splits import carve_split
    from ptm_knowledge.kg.embedding_training import _factories, valid_subset

    split = carve_split(structured_kg, (0.6, 0.3, 0.1), 0)
    _train, valid, _test = _factories(structured_kg.entity_ids, split)
    total = len(valid.mapped_triples)
    sample = valid_subset(valid, 10, seed=3)
    rows = [tuple(r) for r in sample.mapped_triples.tolist()]
    everything = [tuple(r) for r in valid.mapped_triples.tolist()]
    assert len(rows) == 10 and rows == [r for r in everything if r in set(rows)]
    again = valid_subset(valid, 10, seed=3).mapped_triples
    assert sample.mapped_triples.equal(again)
    assert not valid_subset(valid, 10, seed=4).mapped_triples.equal(again)
    assert valid_subset(valid, 0, seed=3) is valid and valid_subset(valid, total, 3) is valid
    result = train_kg_embeddings(
        structured_kg,
        split=split,
        num_epochs=4,
        eval_every=2,
        patience=0,
        valid_sample=10,
        evaluate_baseline=False,
    )
    report = result.report
    assert (report["num_valid_for_stopping"], report["num_valid"]) == (10, total)
    assert report["settings"]["valid_sample"] == 10 and len(report["curve"]) == 2


def test_one_pass_ranks_equal_pykeens_filtered_and_raw_evaluations(structured_kg) -> None:
    """Filtered and raw metrics from one scoring pass equal PyKEEN's own evaluate() runs
    (filtered by train + valid + test, and unfiltered)."""
    from pykeen.evaluation import RankBasedEvaluator

    from ptm_knowledge.kg.embedding_splits import carve_split
    from ptm_knowledge.kg.embedding_training import (
        _factories,
        rank_metrics,
        rank_metrics_filtered_and_raw,
    )

    result = train_kg_embeddings(structured_kg, num_epochs=10, patience=0, seed=2)
    model = result.pykeen_model
    split = carve_split(structured_kg, (0.8, 0.1, 0.1), 2)  # the run's own split
    train, valid, test = _factories(structured_kg.entity_ids, split)
    filtered, raw = rank_metrics_filtered_and_raw(model, test, [train, valid], batch_size=7)
    theirs = RankBasedEvaluator(filtered=True).evaluate(
        model,
        test.mapped_triples,
        additional_filter_triples=[train.mapped_triples, valid.mapped_triples],
        use_tqdm=False,
        batch_size=5,
    )
    assert filtered == pytest.approx(rank_metrics(theirs), abs=1e-9)
    assert filtered == pytest.approx(result.metrics, abs=1e-9)
    # raw: PyKEEN's evaluate() has no unfiltered ranks on its own; every candidate counts,
    # so the raw mean rank is the filtered one plus the other true entities ranked above.
    assert raw["mean_rank"] >= filtered["mean_rank"] and raw != filtered
    assert raw == pytest.approx(result.report["test_raw"], abs=1e-9)


def test_the_mmap_threshold_is_pinned_at_one_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranking's 1-32 MiB score tensors go to mmap, not a heap that fragments (9.5 GB of
    RSS at 38k entities before, 1.1 GB after)."""
    import ctypes
    import sys

    from ptm_knowledge.kg import embedding_training

    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.setattr(sys, "platform", "linux")
    assert embedding_training.fix_mmap_threshold() is True
    assert calls == [(-3, 1 << 20)]  # M_MMAP_THRESHOLD, 1 MiB
    monkeypatch.setattr(sys, "platform", "darwin")
    assert embedding_training.fix_mmap_threshold() is False and len(calls) == 1
