"""An encoder with its MLM head and tokenizer, scored at ``[MASK]`` positions.

Probes (LAMA cloze statements, pseudo-log-likelihood) only need one thing from a model:
the distribution over the vocabulary at the masked position of a sentence. This module
gives that for every folder with a masked-LM head that ptm reads: a ptm pre-training
``final/`` (BERT, RoBERTa-style, ALBERT, ELECTRA generator-free MLM runs, ERNIE-Baidu,
KEPLER and WKLM text encoders) and a Hugging Face ``...ForMaskedLM`` /
``...ForPreTraining`` folder (BERT, RoBERTa, XLM-R, ALBERT, DistilBERT, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ptm_core.objectives.mlm import MaskedLMObjective
from ptm_core.progress import batch_starts

logger = logging.getLogger(__name__)


class NoMaskedLMHeadError(ValueError):
    """The folder holds an encoder without a trained masked-LM head."""


@dataclass
class MaskedLanguageModel:
    """Scores the vocabulary at the ``[MASK]`` of each text.

    Attributes:
        encoder: the encoder (eval mode): a :class:`~ptm_core.encoders.TransformerEncoder`
            or a family's encoder around one (ERNIE-THU's reads ``entity_ids``).
        objective: its masked-LM objective; ``objective.head`` maps hidden states to logits.
        tokenizer: the folder's tokenizer (``backend`` is a Hugging Face ``Tokenizer``).
        mask_token: the string that stands for the mask in a text (``[MASK]``, ``<mask>``).
        source: the folder it came from.
        entity_index: see the attribute below.
    """

    encoder: torch.nn.Module
    objective: MaskedLMObjective
    tokenizer: object
    mask_token: str
    source: str

    @property
    def mask_id(self) -> int:
        return int(self.tokenizer.vocab_info.mask_id)  # type: ignore[attr-defined]

    @property
    def vocab_size(self) -> int:
        return int(self.objective.head.decoder.weight.shape[0])

    #: Entity id -> row of the model's entity table, for models that read entities
    #: aligned to tokens (ERNIE-THU); ``None`` for text-only models.
    entity_index: dict[str, int] | None = None

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of ``texts`` with the model's special tokens (``[CLS] ... [SEP]``)."""
        return [ids for ids, _ in self.encode_with_offsets(texts)]

    def encode_with_offsets(
        self, texts: Sequence[str]
    ) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """Token ids and each token's ``(start, end)`` character span in its text."""
        backend = self.tokenizer.backend  # type: ignore[attr-defined]
        encoded = backend.encode_batch(list(texts), add_special_tokens=True)
        return [(e.ids, [tuple(o) for o in e.offsets]) for e in encoded]

    @torch.no_grad()
    def log_probs(
        self,
        ids: Sequence[Sequence[int]],
        positions: Sequence[int],
        *,
        entities: Sequence[Sequence[int]] | None = None,
        position_ids: Sequence[Sequence[int]] | None = None,
        visibility: Sequence[Tensor] | None = None,
        batch_size: int = 64,
    ) -> Tensor:
        """``(N, V)`` log-probabilities at ``positions[i]`` of row ``ids[i]``.

        Args:
            ids: token id rows (each with its special tokens).
            positions: one position per row (usually where ``mask_id`` is).
            entities: per row, an entity-table row per token (``-1``: none), for a model
                with :attr:`entity_index`.
            position_ids: per row, a position id per token (K-BERT's soft positions);
                default ``0, 1, 2, ...``.
            visibility: per row, an ``(L_i, L_i)`` bool matrix, ``True`` where the row
                token may attend the column token (K-BERT's visible matrix); default:
                every token sees every token of its row.
            batch_size: rows per forward pass.
        """
        if len(ids) != len(positions):
            raise ValueError(f"{len(ids)} rows but {len(positions)} positions")
        pad_id = int(self.tokenizer.vocab_info.pad_id)  # type: ignore[attr-defined]
        out = torch.empty(len(ids), self.vocab_size)
        for first in batch_starts(len(ids), batch_size, "score", "statement"):
            rows = ids[first : first + batch_size]
            length = max(len(r) for r in rows)
            batch = torch.full((len(rows), length), pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), length), dtype=torch.long)
            for i, row in enumerate(rows):
                batch[i, : len(row)] = torch.tensor(row, dtype=torch.long)
                mask[i, : len(row)] = 1
            extra: dict[str, Tensor] = {}
            attention: Tensor = mask
            if visibility is not None:
                attention = torch.zeros((len(rows), length, length), dtype=torch.bool)
                for i, matrix in enumerate(visibility[first : first + batch_size]):
                    attention[i, : matrix.shape[0], : matrix.shape[1]] = matrix
            if position_ids is not None:
                table_p = torch.zeros((len(rows), length), dtype=torch.long)
                for i, row_p in enumerate(position_ids[first : first + batch_size]):
                    table_p[i, : len(row_p)] = torch.as_tensor(row_p, dtype=torch.long)
                extra["position_ids"] = table_p
            if entities is not None:
                rows_e = entities[first : first + batch_size]
                table = torch.full((len(rows), length), -1, dtype=torch.long)
                for i, row_e in enumerate(rows_e):
                    table[i, : len(row_e)] = torch.tensor(row_e, dtype=torch.long)
                extra["entity_ids"] = table
            hidden = self.encoder(
                batch, attention_mask=attention, token_type_ids=torch.zeros_like(batch), **extra
            ).last_hidden_state
            at = torch.tensor(positions[first : first + batch_size], dtype=torch.long)
            picked = hidden[torch.arange(len(rows)), at]
            out[first : first + len(rows)] = torch.log_softmax(
                self.objective.head(picked).float(), dim=-1
            )
        return out

    @torch.no_grad()
    def mask_log_probs(self, texts: Sequence[str], *, batch_size: int = 64) -> Tensor:
        """``(N, V)`` log-probabilities at the one mask of each text.

        Raises:
            ValueError: a text has no mask token or more than one (names the text).
        """
        ids = self.encode(texts)
        positions = []
        for text, row in zip(texts, ids, strict=True):
            found = [i for i, t in enumerate(row) if t == self.mask_id]
            if len(found) != 1:
                raise ValueError(
                    f"{text!r}: needs exactly one {self.mask_token} (found {len(found)})"
                )
            positions.append(found[0])
        return self.log_probs(ids, positions, batch_size=batch_size)


def load_masked_language_model(
    folder: str | Path, *, encoder: torch.nn.Module | None = None
) -> MaskedLanguageModel:
    """The encoder, trained MLM head and tokenizer of ``folder``.

    Args:
        folder: a ptm pre-training ``final/`` with an ``mlm`` objective, or a Hugging Face
            folder whose weights hold the MLM head (``...ForMaskedLM``/``...ForPreTraining``).
        encoder: the folder's encoder, already loaded by its family (a knowledge encoder
            whose MLM head ties to its text table); default: :func:`load_encoder`.

    Raises:
        NoMaskedLMHeadError: the folder has no trained MLM head (names the folder and what
            to pass instead).
        FileNotFoundError / ValueError / CheckpointError: unreadable config, weights or
            tokenizer files (the message names the file).
    """
    from ptm_core.checkpoints.encoder import load_encoder
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.objectives.mix import ObjectiveMix
    from ptm_core.pretraining import load_init_heads

    directory = Path(folder)
    # a TextBackbone: ptm's encoder, or a family's encoder that declares its text parts
    backbone: Any = load_encoder(directory) if encoder is None else encoder
    tokenizer = load_task_tokenizer(directory)
    objective = build_objective(MaskedLMObjective, backbone, tokenizer.vocab_info)
    fresh = load_init_heads(ObjectiveMix({"mlm": objective}), directory)
    # A tied decoder weight is the embedding table: "missing" from a heads file is fine.
    untrained = [name for name in fresh if not name.endswith("decoder.weight")]
    if untrained:
        raise NoMaskedLMHeadError(
            f"{directory}: no trained masked-LM head ({', '.join(untrained)} missing); pass a "
            "pre-training run's final/ with an mlm objective, or a Hugging Face ...ForMaskedLM "
            "or ...ForPreTraining folder"
        )
    if objective.head.decoder.weight.shape[0] != tokenizer.vocab_size:
        logger.info(
            "%s: the MLM head scores %d ids, the tokenizer has %d (padded vocabulary)",
            directory,
            objective.head.decoder.weight.shape[0],
            tokenizer.vocab_size,
        )
    backend = tokenizer.backend
    mask_token = backend.id_to_token(tokenizer.vocab_info.mask_id)
    if mask_token is None:
        raise ValueError(f"{directory}: the tokenizer has no mask token")
    return MaskedLanguageModel(
        encoder=backbone.eval(),
        objective=objective.eval(),
        tokenizer=tokenizer,
        mask_token=mask_token,
        source=str(directory),
    )
