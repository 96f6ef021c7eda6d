"""Bad inputs of the knowledge, multilingual and multimodal specs: KG entities, triples and
aliases, linked corpora, parallel corpora, image-text pairs and their region features."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from bad_input_cases import DEEP, WORDS, Case, _file_mutations, _line_mutations, _lines

ENTITY_HEADER = b"id\tname\ttype\taliases\tdescription"


def _entities() -> list[bytes]:
    return [
        f"e{i}\t{w.title()}\tthing\t{w}|{w}s\tA {w} of note".encode() for i, w in enumerate(WORDS)
    ]


def _triples() -> list[bytes]:
    return [f"e{i}\tnear\te{(i + 3) % len(WORDS)}".encode() for i in range(10)]


def kg_cases() -> Iterator[Case]:
    from ptm_knowledge.kg import load_knowledge_graph

    def read(d: Path) -> object:
        return load_knowledge_graph(d / "entities.tsv", d / "triples.tsv", cache_dir=d / "cache")

    triples = {"triples.tsv": _lines(_triples())}
    entities = {"entities.tsv": _lines([ENTITY_HEADER, *_entities()])}
    entity_bad = {
        "four-columns": b"e90\tName\tthing\taliases",
        "six-columns": b"e90\tName\tthing\taliases\tdesc\textra",
        "one-column": b"e90",
        "empty-id": b"\tName\tthing\t\t",
        "space-in-id": b"e 90\tName\tthing\t\t",
        "duplicate-id": b"e0\tOther\tthing\t\t",
        "empty-name": b"e90\t\tthing\t\t",
        "nul-name": b"e90\tNa\x00me\tthing\t\t",
        "nul-alias": b"e90\tName\tthing\ta\x00b\t",
        "bad-utf8": b"e90\tNam\xe9\tthing\t\t",
    }
    yield from _line_mutations(
        "entities", "entities.tsv", [ENTITY_HEADER], _entities(), entity_bad, read, extra=triples
    )
    for mutation, header in {
        "no-header": b"e99\tName\tthing\t\t",
        "short-header": b"id\tname\ttype",
        "renamed-header": b"id\tlabel\ttype\taliases\tdescription",
    }.items():
        files = {"entities.tsv": _lines([header, *_entities()]), **triples}
        yield Case(f"entities/{mutation}", files, read, "entities.tsv:1")
    yield Case(
        "entities/header-only",
        {"entities.tsv": _lines([ENTITY_HEADER]), **triples},
        read,
        "entities.tsv",
    )
    yield from _file_mutations(
        "entities", "entities.tsv", entities["entities.tsv"], read, extra=triples
    )
    triple_bad = {
        "two-columns": b"e1\tnear",
        "four-columns": b"e1\tnear\te2\te3",
        "unknown-head": b"nobody\tnear\te2",
        "unknown-tail": b"e1\tnear\tnobody",
        "empty-relation": b"e1\t\te2",
        "nul": b"e1\tne\x00ar\te2",
        "bad-utf8": b"e1\tn\xe9ar\te2",
    }
    yield from _line_mutations(
        "triples", "triples.tsv", [], _triples(), triple_bad, read, extra=entities
    )


def _linked_rows() -> list[bytes]:
    rows = []
    for i, w in enumerate(WORDS[:6]):
        sentence = f"{w.title()} met the drum."
        mention = {"sentence": 0, "start": 0, "end": len(w), "entity": f"e{i}"}
        rows.append(json.dumps({"id": f"d{i}", "sentences": [sentence], "mentions": [mention]}))
    return [r.encode() for r in rows]


def linked_corpus_cases() -> Iterator[Case]:
    from ptm_knowledge.linking import read_linked_corpus

    def read(d: Path) -> object:
        return read_linked_corpus(d / "linked.jsonl", entity_ids=[f"e{i}" for i in range(6)])

    def row(**changes: object) -> bytes:
        record: dict[str, object] = {
            "id": "z9",
            "sentences": ["Vorix met the drum."],
            "mentions": [{"sentence": 0, "start": 0, "end": 5, "entity": "e1"}],
        }
        record.update(changes)
        return json.dumps(record).encode()

    def mention(**changes: object) -> bytes:
        m: dict[str, object] = {"sentence": 0, "start": 0, "end": 5, "entity": "e1"}
        m.update(changes)
        return row(mentions=[m])

    bad = {
        "not-json": b"vorix",
        "array": b"[]",
        "deep": DEEP,
        "no-id": json.dumps({"sentences": ["A."]}).encode(),
        "id-int": row(id=5),
        "id-duplicate": row(id="d0"),
        "sentences-missing": json.dumps({"id": "z9"}).encode(),
        "sentences-str": row(sentences="A."),
        "sentence-int": row(sentences=[5]),
        "sentence-nul": row(sentences=["Vo\x00rix met."]),
        "sentence-surrogate": b'{"id": "z9", "sentences": ["Vo\\ud800rix."]}',
        "mentions-str": row(mentions="none"),
        "mention-str": row(mentions=["e1"]),
        "mention-sentence-9": mention(sentence=9),
        "mention-sentence-neg": mention(sentence=-1),
        "mention-start-after-end": mention(start=4, end=2),
        "mention-end-past": mention(end=500),
        "mention-start-neg": mention(start=-2),
        "mention-start-str": mention(start="0"),
        "mention-huge": mention(end=10**30),
        "mention-text-differs": mention(text="Other"),
        "mention-score-2": mention(score=2),
        "mention-score-str": mention(score="high"),
        "mention-score-nan": mention(score=float("nan")),
        "mention-unknown-entity": mention(entity="e77"),
        "mention-overlap": row(
            mentions=[
                {"sentence": 0, "start": 0, "end": 5, "entity": "e1"},
                {"sentence": 0, "start": 2, "end": 8, "entity": "e2"},
            ]
        ),
    }
    yield from _line_mutations("linked", "linked.jsonl", [], _linked_rows(), bad, read)


def parallel_corpus_cases() -> Iterator[Case]:
    from ptm_core.data.parallel_corpus import read_parallel_tsv

    def read(d: Path) -> object:
        return read_parallel_tsv(d / "xx-yy.tsv")

    rows = [f"The {w} hums.\tLe {w} chante.".encode() for w in WORDS[:8]]
    bad = {
        "one-column": b"The vorix hums.",
        "three-columns": b"a\tb\tc",
        "empty-source": b"\tLe vorix.",
        "empty-target": b"The vorix.\t",
        "nul": b"The vo\x00rix.\tLe vorix.",
        "bad-utf8": b"The vor\xe9.\tLe vorix.",
        "cut-utf8": b"The vor.\tLe vor\xc3",
    }
    yield from _line_mutations("parallel", "xx-yy.tsv", [], rows, bad, read)
    yield from _file_mutations("parallel", "xx-yy.tsv", _lines(rows), read)


def _features(directory: Path, count: int = 4) -> None:
    import torch

    from ptm_multimodal.feature_spec import FeatureSpec
    from ptm_multimodal.region_features import (
        ImageRegions,
        RegionFeatureSet,
        write_region_features,
    )

    generator = torch.Generator().manual_seed(3)
    images = {
        f"img{i}": ImageRegions(
            torch.rand(2 + i % 2, 6, generator=generator),
            torch.tensor([[0.0, 0.0, 5.0, 5.0]] * (2 + i % 2)),
            width=10,
            height=10,
        )
        for i in range(count)
    }
    spec = FeatureSpec(extractor="test-grid", feature_size=6, extractor_hash="abc123")
    write_region_features(directory, RegionFeatureSet(spec, images))


def image_text_cases() -> Iterator[Case]:
    """``pairs.jsonl`` lines and damaged ``features.*`` (the features are written first)."""
    from ptm_multimodal.data import read_image_text_pairs

    def read(d: Path) -> object:
        _features(d)
        return read_image_text_pairs(d)

    rows = [
        json.dumps({"image_id": f"img{i % 4}", "caption": f"a {w} by a drum"}).encode()
        for i, w in enumerate(WORDS[:6])
    ]
    bad = {
        "not-json": b"img0 a caption",
        "deep": DEEP,
        "array": b'["img0", "x"]',
        "no-image": b'{"caption": "a drum"}',
        "no-caption": b'{"image_id": "img0"}',
        "image-int": b'{"image_id": 0, "caption": "a drum"}',
        "caption-list": b'{"image_id": "img0", "caption": ["a"]}',
        "caption-empty": b'{"image_id": "img0", "caption": ""}',
        "caption-nul": b'{"image_id": "img0", "caption": "a\\u0000drum"}',
        "caption-surrogate": b'{"image_id": "img0", "caption": "a\\udc00drum"}',
        "unknown-image": b'{"image_id": "img99", "caption": "a drum"}',
        "bad-utf8": b'{"image_id": "img0", "caption": "a dr\xfcm"}',
    }
    yield from _line_mutations("pairs", "pairs.jsonl", [], rows, bad, read)

    def damaged(change: str) -> object:
        def run(d: Path) -> object:
            _features(d)
            index = d / "features.json"
            tensors = d / "features.safetensors"
            if change == "tensors-cut":
                tensors.write_bytes(tensors.read_bytes()[:-40])
            elif change == "tensors-garbage":
                tensors.write_bytes(bytes(range(256)))
            elif change == "tensors-missing":
                tensors.unlink()
            elif change == "index-json":
                index.write_text("{not json")
            elif change == "index-format":
                data = json.loads(index.read_text())
                data["format"] = "other/9"
                index.write_text(json.dumps(data))
            elif change == "index-regions":
                data = json.loads(index.read_text())
                data["images"][1]["num_regions"] = 50
                index.write_text(json.dumps(data))
            elif change == "index-negative":
                data = json.loads(index.read_text())
                data["images"][0]["num_regions"] = -1
                index.write_text(json.dumps(data))
            elif change == "index-size":
                data = json.loads(index.read_text())
                data["spec"]["feature_size"] = 7
                index.write_text(json.dumps(data))
            return read_image_text_pairs(d)

        return run

    for change in (
        "tensors-cut",
        "tensors-garbage",
        "tensors-missing",
        "index-json",
        "index-format",
        "index-regions",
        "index-negative",
        "index-size",
    ):
        yield Case(f"features/{change}", {"pairs.jsonl": _lines(rows)}, damaged(change), "features")
