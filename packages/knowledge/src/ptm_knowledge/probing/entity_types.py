"""Entity-type labels for layer probes: KG mentions found in text, labelled by their type.

The mentions are what ptm's entity linker finds (:class:`~ptm_knowledge.linking.linker.
EntityLinker`, the alias table of the KG with its default guard, ranking and threshold:
the ERNIE-THU preprocessing step), and each mention's label is its entity's ``type``
column in ``entities.tsv`` (the sample KG's ``person``, ``city``, ...; a WordNet KG's
lexicographer file, ``noun.animal``, ``noun.artifact``, ...). A probe then asks whether a
layer's state of the mention's pieces tells the entity's type.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from ptm_core.analysis.layer_features import LabeledText
from ptm_core.progress import track

logger = logging.getLogger(__name__)


def read_texts(path: str | Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line of a UTF-8 text file.

    Raises:
        FileNotFoundError / ValueError: no such file, a line that is not UTF-8, or no text
            (the message names the file and line).
    """
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such text file; pass --text FILE, one text a line")
    texts = []
    with source.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise ValueError(f"{source}:{number}: not UTF-8; save the file as UTF-8") from None
            if line:
                texts.append((number, line))
    if not texts:
        raise ValueError(f"{source}: no text (one text a line)")
    return texts


def entity_type_texts(
    kg: str | Path, text: str | Path, *, linker_options: dict[str, Any] | None = None
) -> tuple[list[LabeledText], dict[str, Any]]:
    """Texts of ``text`` with their linked KG mentions, each labelled by the entity's type.

    Args:
        kg: a KG folder (``entities.tsv`` with a ``type`` column, ``triples.tsv``).
        text: a text file, one text a line (a ptm text corpus's lines work).
        linker_options: keyword arguments of :class:`EntityLinker` (default: its defaults).

    Returns:
        The texts that hold at least one typed mention, and counts: ``{"texts", "mentions",
        "untyped_mentions", "types"}``.

    Raises:
        ValueError: the KG has no typed entity, or no typed mention was found (the message
            says which file and what to change).
    """
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking.linker import EntityLinker

    graph = load_knowledge_graph(kg)
    typed = sum(1 for entity in graph.entities if entity.type)
    if not typed:
        raise ValueError(
            f"{Path(kg) / 'entities.tsv'}: no entity has a type (the 'type' column is empty); "
            "layer probes label a mention by its entity's type: fill that column, or probe "
            "tags from a CoNLL file with --conll"
        )
    lines = read_texts(text)
    linker = EntityLinker(graph, **(linker_options or {}))
    out: list[LabeledText] = []
    untyped = 0
    linked = zip(lines, linker.link_batch([t for _, t in lines]), strict=True)
    for (number, line), mentions in track(linked, "link mentions", len(lines), "text"):
        spans, labels = [], []
        for mention in mentions:
            kind = graph[mention.entity_id].type
            if not kind:
                untyped += 1
                continue
            spans.append((mention.start, mention.end))
            labels.append(kind)
        if spans:
            out.append(LabeledText(line, spans, labels, where=f"{text}:{number}"))
    counts = Counter(label for t in out for label in t.labels)
    info = {
        "texts": len(out),
        "mentions": sum(counts.values()),
        "untyped_mentions": untyped,
        "typed_entities": typed,
        "entities": len(graph),
        "types": dict(sorted(counts.items())),
    }
    logger.info("%s in %s: %s", kg, text, info)
    if not out:
        raise ValueError(
            f"{text}: no mention of a typed entity of {kg} was linked in {len(lines)} lines; "
            "give text that names the KG's entities"
        )
    return out, info
