"""Train/valid/test triples of a KG-embedding run: a KG folder's own split, or one carved.

A KG folder that holds ``train.tsv``, ``valid.tsv`` and ``test.tsv`` (``ptm wordnet-kg
--style wn18rr`` writes them; so do WN18RR's own files) is used as given: every id is
checked against ``entities.tsv``, with ``file:line`` in the error. Otherwise the KG's
triples are split by PyKEEN's splitter, which keeps every entity of valid/test in train.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ptm_knowledge.kg.graph import KnowledgeGraph

__all__ = ["SPLIT_FILES", "TripleSplit", "carve_split", "read_kg_split"]

#: The split files a pre-split KG folder holds (all three, or none).
SPLIT_FILES = ("train.tsv", "valid.tsv", "test.tsv")

Labeled = tuple[str, str, str]


@dataclass(frozen=True)
class TripleSplit:
    """Labeled ``(head, relation, tail)`` triples per split, and where they came from."""

    train: list[Labeled]
    valid: list[Labeled]
    test: list[Labeled]
    source: str


def _read_triples(path: Path, known: set[str] | dict[str, int]) -> list[Labeled]:
    triples: list[Labeled] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\n").rstrip("\r")
            if not text.strip() or text.startswith("#"):
                continue
            fields = text.split("\t")
            if len(fields) != 3:
                raise ValueError(
                    f"{path}:{number}: {len(fields)} tab-separated fields; "
                    "write head<TAB>relation<TAB>tail"
                )
            head, relation, tail = fields
            for entity in (head, tail):
                if entity not in known:
                    raise ValueError(
                        f"{path}:{number}: entity {entity!r} is not in entities.tsv; "
                        "add it there or drop the triple"
                    )
            triples.append((head, relation, tail))
    return triples


def read_kg_split(folder: str | Path, kg: KnowledgeGraph) -> TripleSplit | None:
    """The folder's ``train/valid/test.tsv`` as given, or ``None`` when it has none.

    Raises:
        ValueError: only some of the three files exist, a row is malformed, or an id is not
            in the KG's entity table (``file:line`` and the fix).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    present = [name for name in SPLIT_FILES if (folder / name).is_file()]
    if not present:
        return None
    if len(present) != len(SPLIT_FILES):
        missing = ", ".join(n for n in SPLIT_FILES if n not in present)
        raise ValueError(
            f"{folder}: has {', '.join(present)} but not {missing}; "
            "give all three split files or none"
        )
    train, valid, test = (_read_triples(folder / name, kg.index) for name in SPLIT_FILES)
    for name, part in (("train.tsv", train), ("test.tsv", test)):
        if not part:
            raise ValueError(f"{folder / name}: no triples; a pre-split KG needs some in each")
    return TripleSplit(train, valid, test, source=f"{folder}/{{train,valid,test}}.tsv")


def carve_split(
    kg: KnowledgeGraph, fractions: tuple[float, float, float], seed: int
) -> TripleSplit:
    """Split the KG's triples with PyKEEN's splitter (``fractions`` of train/valid/test).

    Every entity of valid and test keeps a triple in train (PyKEEN's cleanup moves triples
    back to train when needed); the same seed gives the same split.
    """
    import numpy as np
    from pykeen.triples import TriplesFactory

    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(
            f"split is {fractions!r}; give three positive train/valid/test fractions summing to 1"
        )
    labeled = np.array(kg.labeled_triples(), dtype=str)
    factory = TriplesFactory.from_labeled_triples(labeled)
    parts = factory.split(list(fractions), random_state=seed)
    train, valid, test = ([tuple(row) for row in part.triples.tolist()] for part in parts)
    return TripleSplit(
        train,
        valid,
        test,
        source=f"carved from triples.tsv ({fractions[0]:g}/{fractions[1]:g}/{fractions[2]:g}, "
        f"seed {seed})",
    )
