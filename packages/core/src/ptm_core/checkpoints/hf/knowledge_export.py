"""What ``ptm export --format hf`` does with an ERNIE-THU ``final/``: refuse, or text layers.

ERNIE-THU (Zhang et al., 2019) is a T-Encoder of BERT text layers followed by a K-Encoder
of knowledgeable layers that fuse entity embeddings into the tokens. ``transformers`` has
no class for the K-Encoder, so the model as trained cannot be exported. The T-Encoder on
its own is a BERT encoder, and a user may want exactly that: :func:`knowledge_left_out`
describes what such an export leaves behind, for the refusal, the command's message and a
note written into the output folder (:data:`NOTE_FILE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import safe_open

from ptm_core.checkpoints.io import CheckpointError, read_json_object

# Written by ptm_knowledge.ernie beside the T-Encoder (the K-Encoder settings, entity ids).
KNOWLEDGE_CONFIG = "knowledge_config.json"
KNOWLEDGE_WEIGHTS = "knowledge_layers.safetensors"
TASK_HEAD_FILE = "task_head.safetensors"
NOTE_FILE = "NOT_EXPORTED.md"
# The kind ptm_knowledge.kinds.ERNIE_THU (core does not import the package that owns it).
ERNIE_THU_KIND = "ernie_thu"
FLAG = "--text-layers-only"


@dataclass(frozen=True)
class KnowledgeLeftOut:
    """What a text-layers-only export of an ERNIE-THU folder leaves behind.

    Attributes:
        knowledge_layers: the K-Encoder's knowledgeable layers.
        entities: entities in the entity table (``None`` when the config does not say).
        parameters: parameters of the K-Encoder (aggregators, projection, entity table).
        heads: the pre-training heads (they read the K-Encoder's output, not the text layers').
    """

    knowledge_layers: int
    entities: int | None
    parameters: int
    heads: list[str]

    def summary(self) -> str:
        """One clause: the K-Encoder's layers, entity table and heads."""
        entities = f"{self.entities} entities" if self.entities is not None else "entities"
        heads = f"; heads {', '.join(self.heads)}" if self.heads else ""
        return (
            f"{self.knowledge_layers} knowledgeable layer(s) with the entity table ({entities}), "
            f"{self.parameters:,} parameters{heads}"
        )


def is_ernie_thu(source: Path, raw: dict[str, Any]) -> bool:
    """Whether ``source`` (its ``config.json`` is ``raw``) is an ERNIE-THU folder."""
    return raw.get("ptm_model") == ERNIE_THU_KIND or (source / KNOWLEDGE_CONFIG).is_file()


def _parameters(path: Path, prefix: str = "") -> int:
    if not path.is_file():
        return 0
    try:
        with safe_open(str(path), framework="pt") as handle:
            total = 0
            for key in handle.keys():  # noqa: SIM118 - safe_open has no __iter__
                if key.startswith(prefix):
                    count = 1
                    for size in handle.get_slice(key).get_shape():
                        count *= size
                    total += count
            return total
    except Exception as exc:  # safetensors raises its own error types for a damaged file
        raise CheckpointError(f"{path}: cannot read ({exc}); the folder is damaged") from None


def head_names(path: Path) -> list[str]:
    """The objectives with tensors in a ``heads.safetensors`` (``objectives.<name>.*``)."""
    if not path.is_file():
        return []
    try:
        with safe_open(str(path), framework="pt") as handle:
            keys = list(handle.keys())
    except Exception as exc:  # safetensors raises its own error types for a damaged file
        raise CheckpointError(f"{path}: cannot read ({exc}); the folder is damaged") from None
    return sorted({key.split(".")[1] for key in keys if key.count(".") >= 2})


def knowledge_left_out(source: Path, heads: list[str]) -> KnowledgeLeftOut:
    """Describe the K-Encoder of the ERNIE-THU folder ``source``."""
    config: dict[str, Any] = {}
    if (source / KNOWLEDGE_CONFIG).is_file():
        config = read_json_object(source / KNOWLEDGE_CONFIG)
    ids = config.get("entity_ids")
    parameters = _parameters(source / KNOWLEDGE_WEIGHTS) or _parameters(
        source / TASK_HEAD_FILE, prefix="knowledge."
    )
    return KnowledgeLeftOut(
        knowledge_layers=int(config.get("num_knowledge_layers", 0) or 0),
        entities=len(ids) if isinstance(ids, list) else None,
        parameters=parameters,
        heads=heads,
    )


def refusal(source: Path, left_out: KnowledgeLeftOut, *, task: bool) -> CheckpointError:
    """The one-line refusal of exporting ERNIE-THU ``source`` as it was trained."""
    if task:
        return CheckpointError(
            f"{source}: a fine-tuned ERNIE-THU model; transformers has no class for its "
            f"knowledgeable encoder ({left_out.summary()}), and its task head reads that "
            "encoder's output, so no Hugging Face folder gives its predictions. Serve it with "
            "ptm (ptm predict), or export the pre-trained final/ with " + FLAG
        )
    return CheckpointError(
        f"{source}: an ERNIE-THU model; transformers has no class for its knowledgeable "
        f"encoder ({left_out.summary()}), so it is not exported. Add {FLAG} to export only "
        "its text layers as a BERT encoder (without the knowledge, so not the same model)"
    )


def note(source: Path, text_layers: int, left_out: KnowledgeLeftOut) -> str:
    """The Markdown note written into a text-layers-only export."""
    heads = ", ".join(left_out.heads) or "none"
    entities = left_out.entities if left_out.entities is not None else "unknown"
    return (
        "# Not the whole model\n\n"
        f"Exported by `ptm export --format hf {FLAG}` from `{source}`, an ERNIE-THU model.\n\n"
        f"This folder holds only its T-Encoder: the {text_layers} text layer(s), their "
        "embeddings and the tokenizer, as a `BertModel`.\n\n"
        "Left out (transformers has no class for them):\n\n"
        f"- the K-Encoder: {left_out.knowledge_layers} knowledgeable layer(s) that fuse "
        "entity embeddings into the tokens (aggregators and the entity projection);\n"
        f"- the entity embedding table ({entities} entities);\n"
        f"- {left_out.parameters:,} parameters in all for the two above;\n"
        f"- the pre-training heads ({heads}): they were trained on the K-Encoder's output.\n\n"
        "Its hidden states are the T-Encoder's, not the ERNIE-THU model's output.\n"
    )


__all__ = [
    "FLAG",
    "NOTE_FILE",
    "KnowledgeLeftOut",
    "head_names",
    "is_ernie_thu",
    "knowledge_left_out",
    "note",
    "refusal",
]
