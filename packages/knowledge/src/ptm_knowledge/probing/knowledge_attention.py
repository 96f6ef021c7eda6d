"""Where attention goes on knowledge tokens: K-BERT's branches, ERNIE-THU's aligned tokens.

The attention analysis (:mod:`ptm_core.analysis.attention`) reports per layer and head the
mass on ``[CLS]``, ``[SEP]``, the token itself and the ``rest``; this module says which
tokens carry knowledge, and runs the model the way it reads knowledge:

- **K-BERT** (any masked-LM or encoder folder with a KG, or a K-BERT fine-tuned ``final/``
  with its own KG and settings): each sentence becomes a sentence tree; the knowledge
  tokens are the injected branch tokens, and the encoder runs with the soft positions and
  the visible matrix, so a query's mass is spread over the keys it may see only.
- **ERNIE-THU** (a folder with ``knowledge_config.json``): each sentence is linked against
  the KG with the linker settings the folder records, and the knowledge tokens are the
  first pieces of the linked mentions whose entity is in the folder's entity table (the
  alignment ERNIE-THU trains with). The layers are the T-Encoder's, then the aggregators'
  token attention (which runs with the entity inputs).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ptm_core.checkpoints import read_json_object
from ptm_core.progress import batch_starts

#: The file that marks an ERNIE-THU folder (entity table, KG and linker settings).
KNOWLEDGE_CONFIG = "knowledge_config.json"


@dataclass
class KnowledgeBatch:
    """One batch of sentences, the knowledge tokens in it and every layer's attention.

    Attributes:
        input_ids: ``(B, L)``.
        real: ``(B, L)`` bool real tokens.
        knowledge: ``(B, L)`` bool knowledge tokens.
        visibility: ``(B, L, L)`` K-BERT's visible matrix; ``None``: all real tokens.
        probs: per layer ``(B, h, L, L)`` attention probabilities.
    """

    input_ids: Tensor
    real: Tensor
    knowledge: Tensor
    visibility: Tensor | None
    probs: tuple[Tensor, ...]


@dataclass
class KnowledgeAttention:
    """A model read with its knowledge: what it is, and its batches.

    Attributes:
        kind: ``"kbert"`` or ``"ernie_thu"``.
        kg: the KG the knowledge came from.
        special_ids: ``{"cls", "sep"}`` ids.
        batches: the batches (computed lazily).
        details: what the report says (branches per subject, entity table size, ...).
    """

    kind: str
    kg: str
    special_ids: dict[str, int]
    batches: Iterator[KnowledgeBatch]
    details: dict[str, Any] = field(default_factory=dict)


def read_with_knowledge(
    folder: str | Path,
    sentences: Sequence[str],
    kg: str | Path | None,
    *,
    max_length: int = 128,
    batch_size: int = 16,
    max_entities: int = 2,
) -> KnowledgeAttention:
    """``folder`` read with its knowledge over ``sentences`` (see the module docstring).

    Args:
        folder: an ERNIE-THU folder, a K-BERT fine-tuned ``final/`` or any encoder folder
            (read as K-BERT with ``kg``).
        sentences: the texts.
        kg: the KG; default the folder's own (ERNIE-THU's ``knowledge_config.json``,
            a K-BERT ``final/``'s ``task.json`` provenance).
        max_length: tokens per sentence (tree).
        batch_size: sentences per forward pass.
        max_entities: K-BERT branches per subject (a K-BERT ``final/`` uses its own).

    Raises:
        ValueError: no KG given and none recorded (names the folder and the option).
    """
    directory = Path(folder)
    if (directory / KNOWLEDGE_CONFIG).is_file():
        return _ernie_thu(directory, sentences, kg, max_length, batch_size)
    return _kbert(directory, sentences, kg, max_length, batch_size, max_entities)


def _kbert(
    directory: Path,
    sentences: Sequence[str],
    kg: str | Path | None,
    max_length: int,
    batch_size: int,
    max_entities: int,
) -> KnowledgeAttention:
    from ptm_core.analysis.attention import attention_probabilities
    from ptm_core.analysis.sentence_states import load_analysed_encoder
    from ptm_knowledge.kbert import knowledge_from_graph
    from ptm_knowledge.kbert.finetune import featurizer_for
    from ptm_knowledge.kbert.model import KBertFeaturizer, segment_words
    from ptm_knowledge.kg import load_knowledge_graph

    task = directory / "task.json"
    record = read_json_object(task) if task.is_file() else {}
    own = record.get("recipe") == "kbert"
    provenance = record.get("provenance") or {}
    source = kg if kg is not None else provenance.get("kg_path") if own else None
    if source is None:
        raise ValueError(
            f"{directory}: give --kg KG to read it as K-BERT (branches from that KG)"
            + ("; its task.json records no provenance.kg_path" if own else "")
        )
    knowledge = knowledge_from_graph(
        load_knowledge_graph(source),
        predicate=bool(provenance.get("predicate", True)),
        aliases=bool(provenance.get("aliases", False)),
    )
    analysed = load_analysed_encoder(directory)
    encoder = analysed.encoder
    limit = min(max_length, encoder.config.max_positions)
    if own:
        featurizer = featurizer_for(
            {**record, "max_length": limit},
            analysed.tokenizer,  # type: ignore[arg-type]
            knowledge,
        )
    else:
        featurizer = KBertFeaturizer(
            analysed.tokenizer, knowledge, max_entities=max_entities, max_length=limit
        )
    details = {
        "max_entities": featurizer.max_entities,
        "kg_mode": featurizer.kg,
        "visible_matrix": featurizer.visible_matrix,
        "settings": "the model's task.json" if own else "K-BERT's defaults",
    }

    def batches() -> Iterator[KnowledgeBatch]:
        for first in batch_starts(len(sentences), batch_size, "attention", "sentence"):
            items = [
                featurizer.encode(segment_words(text))
                for text in sentences[first : first + batch_size]
            ]
            batch = featurizer.collate(items)
            visibility = batch.get("visible_matrix")
            mask = visibility if visibility is not None else batch["attention_mask"]
            probs = attention_probabilities(
                encoder,
                batch["input_ids"],
                mask,
                position_ids=batch["position_ids"],
                token_type_ids=batch["token_type_ids"],
            )
            yield KnowledgeBatch(
                batch["input_ids"],
                batch["attention_mask"].bool(),
                batch["is_knowledge"],
                visibility,
                probs,
            )

    return KnowledgeAttention("kbert", str(source), analysed.special_ids, batches(), details)


def _ernie_thu(
    directory: Path,
    sentences: Sequence[str],
    kg: str | Path | None,
    max_length: int,
    batch_size: int,
) -> KnowledgeAttention:
    from ptm_core.analysis.sentence_states import AnalysedEncoder
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking.alignment import align_mentions_to_pieces
    from ptm_knowledge.linking.linker import EntityLinker, saved_linker_options

    config = read_json_object(directory / KNOWLEDGE_CONFIG)
    ids = config.get("entity_ids")
    if not isinstance(ids, list):
        raise ValueError(
            f"{directory / KNOWLEDGE_CONFIG}: no entity_ids list, so the entity each token "
            "is aligned to is unknown; this ERNIE-THU folder predates recorded entity tables"
        )
    source = kg if kg is not None else config.get("kg")
    if not source:
        raise ValueError(
            f"{directory / KNOWLEDGE_CONFIG}: records no KG; give --kg KG (the KG its entity "
            "table was embedded from) to link the sentences"
        )
    if kg is None and not Path(source).exists():
        raise ValueError(
            f"{directory / KNOWLEDGE_CONFIG}: records the KG {source}, which is gone; give "
            "--kg KG (the KG its entity table was embedded from)"
        )
    entity_index = {str(e): i for i, e in enumerate(ids)}
    model = KnowledgeableEncoder.from_pretrained(directory).eval()
    tokenizer = load_task_tokenizer(directory)
    analysed = AnalysedEncoder(model.text_encoder, tokenizer, str(directory))
    linker = EntityLinker(
        load_knowledge_graph(source), **saved_linker_options(config.get("linker"))
    )
    limit = min(max_length, model.text_encoder.config.max_positions)
    backend = tokenizer.backend
    pad = analysed.special_ids["pad"]
    details: dict[str, Any] = {"entity_table": len(ids), "mentions": 0, "aligned_tokens": 0}

    def batches() -> Iterator[KnowledgeBatch]:
        for first in batch_starts(len(sentences), batch_size, "attention", "sentence"):
            texts = list(sentences[first : first + batch_size])
            encoded = backend.encode_batch(texts, add_special_tokens=True)
            rows, entities = [], []
            for e, mentions in zip(encoded, linker.link_batch(texts), strict=True):
                aligned = align_mentions_to_pieces(
                    [(int(o[0]), int(o[1])) for o in e.offsets],
                    [(m.start, m.end, m.entity_id) for m in mentions],
                    entity_index,
                    e.special_tokens_mask,
                )
                row = list(e.ids)
                if len(row) > limit:  # cut as the analysis cuts: the last [SEP] kept
                    row, aligned = row[: limit - 1] + row[-1:], [*aligned[: limit - 1], -1]
                details["mentions"] += len(mentions)
                rows.append(row)
                entities.append(aligned)
            length = max(len(r) for r in rows)
            input_ids = torch.full((len(rows), length), pad, dtype=torch.long)
            entity_ids = torch.full((len(rows), length), -1, dtype=torch.long)
            real = torch.zeros((len(rows), length), dtype=torch.bool)
            for i, (row, aligned) in enumerate(zip(rows, entities, strict=True)):
                input_ids[i, : len(row)] = torch.tensor(row)
                entity_ids[i, : len(row)] = torch.tensor(aligned)
                real[i, : len(row)] = True
            details["aligned_tokens"] += int((entity_ids >= 0).sum())
            probs = _ernie_probabilities(model, input_ids, real, entity_ids)
            yield KnowledgeBatch(input_ids, real, entity_ids >= 0, None, probs)

    return KnowledgeAttention("ernie_thu", str(source), analysed.special_ids, batches(), details)


def _ernie_probabilities(
    model: Any, input_ids: Tensor, real: Tensor, entity_ids: Tensor
) -> tuple[Tensor, ...]:
    """The T-Encoder's layers, then each aggregator's token attention (with entities)."""
    from ptm_core.analysis.attention import attention_probabilities

    text = attention_probabilities(model.text_encoder, input_ids, real.long())
    captured: list[Tensor] = []

    def keep(module: torch.nn.Module, args: tuple[Any, ...], _output: Any) -> None:
        # forward() itself, not __call__: the hook must not run again
        _, scores = module.forward(args[0], args[1] if len(args) > 1 else None, return_scores=True)
        captured.append(scores.float().softmax(dim=-1))

    handles = [
        layer.token_attention.register_forward_hook(keep) for layer in model.knowledge_layers
    ]
    try:
        with torch.no_grad():
            model(input_ids, attention_mask=real.long(), entity_ids=entity_ids)
    finally:
        for handle in handles:
            handle.remove()
    return (*text, *captured)
