"""The ``kg_embeddings`` family: what ``ptm embed-kg`` writes (PyKEEN entity embeddings).

No pre-training or fine-tuning of its own (``ptm embed-kg`` trains it; ERNIE-THU reads it
through ``knowledge.embeddings_dir``): the spec gives its folder's load and save and its
evaluation (the held-out link-prediction scores). Torch-free.
"""

from __future__ import annotations

from pathlib import Path

from ptm_core.families.spec import FamilySpec
from ptm_knowledge.kinds import KG_EMBEDDINGS as KG_EMBEDDINGS_KIND

#: The weights file that marks a KG-embedding folder (it has no ``config.json``).
EMBEDDINGS_FILE = "entity_embeddings.safetensors"


def recognizes(path: str | Path) -> bool:
    """A KG-embedding folder written before it carried ``config.json``: its weights file."""
    folder = Path(path)
    return (folder / EMBEDDINGS_FILE).is_file() and not (folder / "config.json").exists()


KG_EMBEDDINGS = FamilySpec(
    name="kg_embeddings",
    description="KG entity embeddings (PyKEEN, ptm embed-kg), scored by link prediction",
    kinds=(KG_EMBEDDINGS_KIND,),
    load={KG_EMBEDDINGS_KIND: "ptm_knowledge.kg.embeddings:load_kg_embeddings"},
    save={KG_EMBEDDINGS_KIND: "ptm_knowledge.kg.embeddings:save_kg_embeddings"},
    evaluation="ptm_knowledge.evaluation_kinds:KG_EMBEDDINGS",
    recognizes="ptm_knowledge.family_kg:recognizes",
)

__all__ = ["EMBEDDINGS_FILE", "KG_EMBEDDINGS", "recognizes"]
