"""The inputs of :mod:`benchmarks.wordnet_linking`: WordNet's noun KG and its gloss gold.

The KG is ``ptm_knowledge.kg.wordnet.write_wordnet_kg``'s, the gold
``ptm_knowledge.linking.evaluation.wordnet_gloss_gold``'s (in synset S's definition, an
occurrence of a lemma of a synset that S points to is a mention of it), written here in the
benchmark's one-sentence form ``{"id", "text", "mentions", "complete"}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_noun_kg(wordnet: Any, kg_dir: Path) -> dict[str, Any]:
    from ptm_knowledge.kg.wordnet import write_wordnet_kg

    write_wordnet_kg(wordnet, kg_dir)
    return {"kg_writer": "ptm_knowledge.kg.wordnet.write_wordnet_kg"}


def write_gloss_gold(wordnet: Any, path: Path) -> dict[str, Any]:
    from ptm_knowledge.linking.evaluation import wordnet_gloss_gold

    documents = [
        {
            "id": doc.doc_id,
            "text": doc.sentences[0],
            "mentions": [
                {"start": m.start, "end": m.end, "entity": m.entity_id} for m in doc.mentions
            ],
            "complete": doc.complete,
        }
        for doc in wordnet_gloss_gold(wordnet)
    ]
    with path.open("w", encoding="utf-8") as handle:
        for doc in documents:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return {
        "gold": "ptm_knowledge.linking.evaluation.wordnet_gloss_gold",
        "gold_documents": len(documents),
        "gold_mentions": sum(len(d["mentions"]) for d in documents),
    }
