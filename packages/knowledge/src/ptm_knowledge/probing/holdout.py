"""A copy of a KG folder whose KG-embedding split holds the probe facts out of training.

A LAMA probe of a knowledge-enhanced model should say whether its facts reached the model
through the KG embeddings. :func:`write_probe_holdout` writes the KG folder again with
``train.tsv``/``valid.tsv``/``test.tsv`` (the split ``ptm embed-kg`` uses) in which every
probe fact is in ``test.tsv`` only; the KG's own split is kept otherwise (or carved
80/10/10 with the seed when the folder has none). ``triples.tsv`` is unchanged, so linking
and the KG itself are the same. Inverse relations (WordNet's ``_hyponym`` of a probed
``_hypernym``) are not removed: use a WN18RR-style KG, which has none.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from ptm_core.atomic import atomic_directory
from ptm_knowledge.kg.embedding_splits import SPLIT_FILES, carve_split, read_kg_split
from ptm_knowledge.kg.graph import KnowledgeGraph

#: The probe facts themselves, beside the split (head, relation, tail).
PROBE_FILE = "probe_facts.tsv"
Fact = tuple[str, str, str]


def _write(path: Path, triples: Iterable[Fact]) -> None:
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")


def write_probe_holdout(
    folder: str | Path,
    kg: KnowledgeGraph,
    facts: Iterable[Fact],
    output: str | Path,
    *,
    seed: int = 0,
    overwrite: bool = False,
) -> dict[str, int]:
    """Write ``folder``'s KG to ``output`` with ``facts`` held out of the training split.

    Returns:
        The number of triples in each split file and of probe facts.
    """
    source = Path(folder)
    probe = list(dict.fromkeys(facts))
    held = set(probe)
    split = read_kg_split(source, kg) or carve_split(kg, (0.8, 0.1, 0.1), seed)
    train = [t for t in split.train if t not in held]
    valid = [t for t in split.valid if t not in held]
    in_test = set(split.test)
    test = list(split.test) + [t for t in probe if t not in in_test]
    with atomic_directory(
        output, kind="kg", overwrite=overwrite, option="--overwrite", legacy=False
    ) as tmp:
        for name in ("entities.tsv", "triples.tsv"):
            if (source / name).is_file():
                shutil.copyfile(source / name, tmp / name)
        for name, part in zip(SPLIT_FILES, (train, valid, test), strict=True):
            _write(tmp / name, part)
        _write(tmp / PROBE_FILE, probe)
    return {"train": len(train), "valid": len(valid), "test": len(test), "probe": len(probe)}
