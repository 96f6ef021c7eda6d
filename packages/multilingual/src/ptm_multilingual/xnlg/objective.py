"""XNLG's stage-2 objective: cross-lingual and denoising auto-encoding (Chi et al., 2020).

A row is a source sentence in one language and a target sentence the decoder writes in
a language it is told (``decoder_langs``):

- **XAE** (cross-lingual auto-encoding): a parallel pair, source in ``l1``, target its
  translation in ``l2`` (the reference's ``mt_step(l1, l2)``).
- **DAE** (denoising auto-encoding): one sentence, the encoder reads it noised
  (:class:`~ptm_multilingual.xnlg.noise.DenoisingNoise`) and the decoder rebuilds it in
  its own language (``mt_step(l, l)`` with ``add_noise``).

The loss is the decoder's token cross-entropy; each row's tokens are weighted by its kind
(``lambda_mt`` = 1 and ``lambda_ae`` = 0.5 in the reference) and the sum is divided by the
batch's target tokens. The reference alternates XAE and DAE steps; ptm mixes both kinds in
one batch (``xnlg.dae_fraction``), which weights the two gradients the same way per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.objectives.base import IGNORE_INDEX, Batch, ObjectiveOutput
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective, pad_seq2seq
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.xnlg.noise import DenoisingNoise


@dataclass(frozen=True)
class XNLGRow:
    """One stage-2 row (ids without specials).

    Attributes:
        source: the encoder's sentence (for DAE: the clean sentence, noised at collate).
        target: the sentence the decoder writes.
        source_lang, target_lang: language-embedding ids.
        denoise: a DAE row (``source`` is ``target`` and gets noised).
    """

    source: Sequence[int]
    target: Sequence[int]
    source_lang: int
    target_lang: int
    denoise: bool


class XNLGObjective(Seq2SeqObjective):
    """XAE + DAE on :class:`XNLGRow` rows (see the module docstring).

    Args:
        vocab: the shared tokenizer's special ids.
        max_length: tokens per side, specials included.
        word_shuffle, word_dropout, word_blank: the DAE noise
            (:class:`~ptm_multilingual.xnlg.noise.DenoisingNoise`).
        xae_weight, dae_weight: per-token loss weights of the two kinds.

    Batch keys: ``input_ids``, ``attention_mask``, ``langs`` ``(B, S)``;
    ``decoder_input_ids``, ``decoder_attention_mask``, ``labels`` ``(B, T)``;
    ``decoder_langs``, ``xnlg_weight``, ``xnlg_dae`` ``(B,)``.
    """

    name = "xnlg"
    batch_keys = (
        *Seq2SeqObjective.batch_keys,
        "langs",
        "decoder_langs",
        "xnlg_weight",
        "xnlg_dae",
    )

    def __init__(
        self,
        vocab: VocabInfo,
        max_length: int = 64,
        word_shuffle: float = 3.0,
        word_dropout: float = 0.1,
        word_blank: float = 0.1,
        xae_weight: float = 1.0,
        dae_weight: float = 0.5,
    ) -> None:
        super().__init__(vocab)
        if max_length < 3:
            raise ValueError(f"max_length must be >= 3 (start, a word, end), got {max_length}")
        if xae_weight < 0 or dae_weight < 0:
            raise ValueError("xnlg.xae_weight and xnlg.dae_weight must be >= 0")
        self.max_length = max_length
        self.noise = DenoisingNoise(vocab.mask_id, word_shuffle, word_dropout, word_blank)
        self.xae_weight = xae_weight
        self.dae_weight = dae_weight

    def _sentence(self, ids: Sequence[int]) -> list[int]:
        return [self.vocab.cls_id, *list(ids)[: self.max_length - 2], self.vocab.sep_id]

    def make_example(self, source: Any, generator: torch.Generator) -> dict[str, Any]:
        row: XNLGRow = source
        encoder = self._sentence(row.source)
        if row.denoise:
            encoder = self.noise(encoder, generator)
        target = self._sentence(row.target)
        return {
            "input_ids": encoder,
            "decoder_input_ids": target[:-1],
            "labels": target[1:],
            "langs": row.source_lang,
            "decoder_langs": row.target_lang,
            "denoise": row.denoise,
        }

    def collate(  # type: ignore[override]  # rows in, not a token batch
        self, sources: Sequence[XNLGRow], generator: torch.Generator
    ) -> dict[str, Tensor]:
        examples = [self.make_example(row, generator) for row in sources]
        batch = pad_seq2seq(examples, self.vocab.pad_id)
        source_langs = torch.tensor([e["langs"] for e in examples], dtype=torch.long)
        batch["langs"] = source_langs[:, None].expand_as(batch["input_ids"]).contiguous()
        batch["decoder_langs"] = torch.tensor(
            [e["decoder_langs"] for e in examples], dtype=torch.long
        )
        dae = torch.tensor([e["denoise"] for e in examples], dtype=torch.bool)
        batch["xnlg_dae"] = dae
        batch["xnlg_weight"] = torch.where(
            dae, torch.tensor(self.dae_weight), torch.tensor(self.xae_weight)
        )
        return batch

    def forward(self, model_output: Any, batch: Batch) -> ObjectiveOutput:
        """Weighted token cross-entropy; ``xae_loss``/``dae_loss`` are each kind's
        unweighted token mean (0 when the batch has none of that kind)."""
        logits = model_output.logits  # (B, T, V)
        labels = batch["labels"]  # (B, T)
        tokens = F.cross_entropy(
            logits.flatten(0, 1).float(),
            labels.flatten(),
            ignore_index=IGNORE_INDEX,
            reduction="none",
        ).view_as(labels)  # (B, T)
        predicted = labels != IGNORE_INDEX
        weights = batch["xnlg_weight"].to(tokens.dtype)[:, None] * predicted
        loss = (tokens * weights).sum() / predicted.sum().clamp(min=1)
        metrics: dict[str, Tensor] = {}
        with torch.no_grad():
            correct = (logits.argmax(-1) == labels) & predicted
            metrics["accuracy"] = (correct.sum() / predicted.sum().clamp(min=1)).float()
            dae = batch["xnlg_dae"].bool()[:, None] & predicted
            xae = ~batch["xnlg_dae"].bool()[:, None] & predicted
            for name, rows in (("xae_loss", xae), ("dae_loss", dae)):
                metrics[name] = (tokens * rows).sum() / rows.sum().clamp(min=1)
        return ObjectiveOutput(loss=loss, metrics=metrics)


__all__ = ["XNLGObjective", "XNLGRow"]
