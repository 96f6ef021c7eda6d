"""The inputs of :mod:`benchmarks.wordnet_linking`: WordNet's noun KG and its gloss gold.

The KG is ``ptm_knowledge.kg.wordnet.write_wordnet_kg``'s. The gold is
``ptm_knowledge.linking.evaluation.wordnet_gloss_gold``'s when the library has it, else
the stand-in below, which follows the #38 interface (design38.md): in synset S's
definition, an occurrence of a lemma of a synset that S points to is a mention of it
(longest first, no overlaps). The results file records which one was used.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any


def write_noun_kg(wordnet: Any, kg_dir: Path) -> dict[str, Any]:
    from ptm_knowledge.kg.wordnet import write_wordnet_kg

    write_wordnet_kg(wordnet, kg_dir)
    return {"kg_writer": "ptm_knowledge.kg.wordnet.write_wordnet_kg"}


def write_gloss_gold(wordnet: Any, path: Path) -> dict[str, Any]:
    try:
        evaluation = importlib.import_module("ptm_knowledge.linking.evaluation")
        make_gold = evaluation.wordnet_gloss_gold
    except (ImportError, AttributeError):
        documents = _gloss_gold(wordnet)
        source = "benchmarks.wordnet_inputs (stand-in)"
    else:
        documents = [_as_dict(d) for d in make_gold(wordnet)]
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
