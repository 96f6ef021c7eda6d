"""The inputs of :mod:`benchmarks.wordnet_linking`: WordNet's noun KG and its gloss gold.

Both come from the library when it has them (``write_wordnet_kg``,
``ptm_knowledge.kg.wordnet``; ``wordnet_gloss_gold``, ``ptm_knowledge.linking.evaluation``),
else from the stand-ins below, which follow the #38 interface (design38.md) to the letter:
entity id = synset id, name = first lemma with ``_`` -> space, aliases = the other lemmas,
type = lexname, description = definition, triples = pointers between noun synsets; gold =
in S's definition, the occurrences of a lemma of a synset S points to (longest first, no
overlaps). The results file records which one was used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


def write_noun_kg(wordnet: Any, kg_dir: Path) -> dict[str, Any]:
    try:
        from ptm_knowledge.kg.wordnet import write_wordnet_kg  # type: ignore[attr-defined]
    except ImportError:
        _write_kg(wordnet, kg_dir)
        return {"kg_writer": "benchmarks.wordnet_inputs (stand-in)"}
    write_wordnet_kg(wordnet, kg_dir)
    return {"kg_writer": "ptm_knowledge.kg.wordnet.write_wordnet_kg"}


def write_gloss_gold(wordnet: Any, path: Path) -> dict[str, Any]:
    try:
        from ptm_knowledge.linking.evaluation import (  # type: ignore[import-not-found]
            wordnet_gloss_gold,
        )
    except ImportError:
        documents = _gloss_gold(wordnet)
        source = "benchmarks.wordnet_inputs (stand-in)"
    else:
        documents = [_as_dict(d) for d in wordnet_gloss_gold(wordnet)]
        source = "ptm_knowledge.linking.evaluation.wordnet_gloss_gold"
    with path.open("w", encoding="utf-8") as handle:
        for doc in documents:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return {
        "gold": source,
        "gold_documents": len(documents),
        "gold_mentions": sum(len(d["mentions"]) for d in documents),
    }


def _as_dict(doc: Any) -> dict[str, Any]:
    if isinstance(doc, dict):
        return doc
    return {
        "id": doc.id,
        "text": doc.text,
        "mentions": [{"start": m.start, "end": m.end, "entity": m.entity} for m in doc.mentions],
        "complete": bool(getattr(doc, "complete", False)),
    }


def _clean(text: str) -> str:
    return " ".join(text.split())


def _write_kg(wordnet: Any, kg_dir: Path) -> None:
    kg_dir.mkdir(parents=True, exist_ok=True)
    nouns = {s.id: s for s in wordnet if s.pos == "n"}
    with (kg_dir / "entities.tsv").open("w", encoding="utf-8") as handle:
        handle.write("id\tname\ttype\taliases\tdescription\n")
        for synset in nouns.values():
            names = list(dict.fromkeys(lemma.replace("_", " ") for lemma in synset.lemmas))
            aliases = "|".join(names[1:])
            row = [synset.id, names[0], synset.lexname, aliases, _clean(synset.definition)]
            handle.write("\t".join(row) + "\n")
    with (kg_dir / "triples.tsv").open("w", encoding="utf-8") as handle:
        for synset in nouns.values():
            seen = set()
            for pointer in synset.pointers:
                key = (pointer.relation, pointer.target)
                if pointer.target in nouns and key not in seen:
                    seen.add(key)
                    handle.write(f"{synset.id}\t_{pointer.relation}\t{pointer.target}\n")


def _gloss_gold(wordnet: Any) -> list[dict[str, Any]]:
    nouns = {s.id: s for s in wordnet if s.pos == "n"}
    documents = []
    for synset in nouns.values():
        text = _clean(synset.definition)
        found = []
        for target in dict.fromkeys(p.target for p in synset.pointers if p.target in nouns):
            for lemma in nouns[target].lemmas:
                pattern = r"(?<![\w-])" + re.escape(lemma.replace("_", " ")) + r"(?![\w-])"
                found += [(m.start(), m.end(), target) for m in re.finditer(pattern, text)]
        found.sort(key=lambda f: (f[0] - f[1], f[0]))
        taken: set[int] = set()
        mentions = []
        for start, end, target in found:
            if not taken.intersection(range(start, end)):
                taken.update(range(start, end))
                mentions.append({"start": start, "end": end, "entity": target})
        mentions.sort(key=lambda m: m["start"])
        documents.append({"id": synset.id, "text": text, "mentions": mentions, "complete": False})
    return documents
