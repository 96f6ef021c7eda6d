"""The ``"ptm_model"`` kinds ptm-knowledge's folders carry (claimed in its family specs).

Torch-free: the family registry reads these when it lists the installed families.
"""

from __future__ import annotations

#: An ERNIE-THU ``final/``: T-Encoder (``config.json``, ``model.safetensors``) plus the
#: knowledge layers (``knowledge_layers.safetensors``, ``knowledge_config.json``).
ERNIE_THU = "ernie_thu"
#: ``ptm embed-kg`` output: ``entity_embeddings.safetensors``, ``entity_ids.json``,
#: ``metrics.json`` (no ``config.json``: recognised by its embeddings file).
KG_EMBEDDINGS = "kg_embeddings"

#: A KnowBERT ``final/``: the text encoder (``config.json``, ``model.safetensors``) plus the
#: KARs (``knowbert_layers.safetensors``, ``knowbert_config.json``).
KNOWBERT = "knowbert"

__all__ = ["ERNIE_THU", "KG_EMBEDDINGS", "KNOWBERT"]
