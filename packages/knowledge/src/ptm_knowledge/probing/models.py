"""The models a LAMA probe reads: any masked-LM folder, and ERNIE-THU with its entities.

An ERNIE-THU ``final/`` is probed as it was trained: the statement's subject entity sits on
the first piece of the subject's name (the alignment of ERNIE-THU's pre-training data),
looked up in the folder's own entity table (``knowledge_config.json``'s ``entity_ids``).
Subjects outside that table get no entity. Everything else goes through
:func:`ptm_core.analysis.load_masked_language_model`.

K-BERT has no pre-training of its own: its ``final/`` is a fine-tuned classifier without
an MLM head. A K-BERT is probed as the masked LM it reads sentence trees with (the
``init_from`` folder its ``task.json`` records, or any BERT), through
:mod:`ptm_knowledge.probing.sentence_trees`.
"""

from __future__ import annotations

from pathlib import Path

from ptm_core.analysis import MaskedLanguageModel, load_masked_language_model
from ptm_core.checkpoints import read_json_object

#: The ``ptm_model`` kind whose folders carry an entity table for token-aligned entities.
ERNIE_THU = "ernie_thu"


def load_probe_model(folder: str | Path, *, knowledge: bool = True) -> MaskedLanguageModel:
    """The masked LM of ``folder``; an ERNIE-THU folder keeps its knowledge layers.

    Args:
        folder: a model folder with an MLM head.
        knowledge: ``False`` probes an ERNIE-THU folder through its text encoder alone (the
            same weights without entity inputs).
    """
    directory = Path(folder)
    _refuse_kbert_classifier(directory)
    kind = read_json_object(directory / "config.json").get("ptm_model")
    if kind != ERNIE_THU or not knowledge:
        return load_masked_language_model(directory)
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

    encoder = KnowledgeableEncoder.from_pretrained(directory)
    model = load_masked_language_model(directory, encoder=encoder)
    ids = read_json_object(directory / "knowledge_config.json").get("entity_ids")
    if not isinstance(ids, list):
        raise ValueError(
            f"{directory / 'knowledge_config.json'}: no entity_ids list; this ERNIE-THU "
            "folder predates recorded entity tables: pass --no-knowledge to probe its text"
        )
    model.entity_index = {str(e): i for i, e in enumerate(ids)}
    return model


def _refuse_kbert_classifier(directory: Path) -> None:
    """A K-BERT ``final/`` holds a task head, no MLM head: name the folder to probe instead."""
    task = directory / "task.json"
    if not task.is_file():
        return
    record = read_json_object(task)
    if record.get("recipe") != "kbert":
        return
    provenance = record.get("provenance") or {}
    source = provenance.get("init_from")
    kg = provenance.get("kg_path") or "KG"
    start = (
        f"its masked LM {source} (recorded as init_from in task.json)"
        if source
        else "the pre-trained BERT it would be fine-tuned from (this run started at random init)"
    )
    raise ValueError(
        f"{directory}: a K-BERT fine-tuned classifier has no masked-LM head; probe {start} "
        f"through K-BERT's sentence trees: ptm analyze MODEL lama --kg {kg} --kbert"
    )
