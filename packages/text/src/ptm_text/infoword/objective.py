"""InfoWord's DIM objective: InfoNCE between a sentence with an n-gram masked and that
n-gram, with the other n-grams of the batch as negatives (Kong et al., 2020)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput
from ptm_core.tokenization import VocabInfo
from ptm_text.infoword.head import InfoWordScoreHead
from ptm_text.infoword.ngrams import choose_ngrams, ngram_length_distribution

INFOWORD_KEYS = ("infoword_ngram_ids", "infoword_ngram_mask", "infoword_has_ngram")


def info_nce(scores: Tensor, excluded: Tensor | None = None) -> Tensor:
    """InfoNCE with in-batch negatives: ``-mean_i log softmax_k(scores[i, k])[i]``.

    Row ``i`` scores sentence ``i`` against every n-gram of the batch; its own n-gram
    (the diagonal) is the positive, the others the negatives. At equal scores the loss is
    ``log N``; ``log N - loss`` is the InfoNCE lower bound on the mutual information.

    Args:
        scores: ``(N, N)`` ``g_ω(x̂_i, y_k)``.
        excluded: ``(N, N)`` bool, pairs left out of the denominators (an n-gram of
            another row that is the same token sequence as row ``i``'s is its positive,
            not a negative); never on the diagonal.

    Returns:
        0-d loss (float32).
    """
    scores = scores.float()
    if excluded is not None:
        scores = scores.masked_fill(excluded, -math.inf)
    targets = torch.arange(len(scores), device=scores.device)
    return F.cross_entropy(scores, targets)


def same_ngram(ngram_ids: Tensor) -> Tensor:
    """``(N, N)`` bool: rows ``i != k`` whose n-grams are the same token sequence."""
    same = (ngram_ids[:, None, :] == ngram_ids[None, :, :]).all(dim=-1)
    return same & ~torch.eye(len(ngram_ids), dtype=torch.bool, device=ngram_ids.device)


class InfoWordObjective(Objective):
    """InfoWord's DIM term (Kong et al., 2020, "A Mutual Information Maximization
    Perspective of Language Representation Learning", Sec. 4); its total loss is
    ``λ_MLM L_MLM + λ_DIM L_DIM``: list it after a masked-LM objective in one mix.

    Data side (:meth:`collate`, seeded): per row, one contiguous n-gram ``x_{i:j}`` among
    the tokens that are neither special nor already chosen by the masked LM (its
    ``mlm_labels``), ``n`` uniform in ``1..max_ngram`` (or clipped geometric), replaced by
    ``[MASK]`` in the sentence (``x̂_{i:j}``) and written apart as ``[CLS] x_{i:j} [SEP]``
    (:func:`~ptm_text.infoword.ngrams.choose_ngrams`).

    Loss side: the global view is the shared encoder's final ``[CLS]`` state of the
    masked sentence (the mix's one encoder pass); the local view is the same encoder's
    ``[CLS]`` state of the n-gram encoded alone (a second, short pass). The critic
    :class:`~ptm_text.infoword.head.InfoWordScoreHead` scores every sentence against every
    n-gram of the batch and :func:`info_nce` takes the diagonal as positives.

    Args:
        vocab: the tokenizer's special ids.
        encoder: the shared encoder (referenced, not owned: its weights stay the encoder's).
        hidden_size: width of the encoder states.
        max_ngram: longest n-gram.
        geometric_p: ``None``: n-gram lengths uniform in ``1..max_ngram``; a number:
            SpanBERT's clipped geometric with that parameter.
        projection_size: width of the critic's projections (default ``hidden_size``).

    Batch keys: writes ``input_ids`` (n-gram masked), ``infoword_ngram_ids`` and
    ``infoword_ngram_mask`` ``(B, max_ngram + 2)``, ``infoword_has_ngram`` ``(B,)``.
    """

    name = "infoword"
    batch_keys = INFOWORD_KEYS

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        encoder: nn.Module,
        hidden_size: int,
        max_ngram: int = 5,
        geometric_p: float | None = None,
        projection_size: int | None = None,
    ) -> None:
        super().__init__()
        ngram_length_distribution(max_ngram, geometric_p)  # validates both
        self.vocab = vocab
        self.max_ngram = max_ngram
        self.geometric_p = geometric_p
        # Not a sub-module: the encoder belongs to the pre-training model (one copy of its
        # weights in checkpoints and in heads.safetensors).
        self.__dict__["encoder"] = encoder
        self.head = InfoWordScoreHead(hidden_size, projection_size)

    @property
    def text_encoder(self) -> nn.Module:
        """The shared encoder that encodes the n-grams alone."""
        return self.__dict__["encoder"]

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if "document_ids" in batch:
            raise ValueError(
                "InfoWord reads each row's [CLS] as its sentence summary, and packed rows "
                "hold several sentences; set data.pack=false"
            )
        free = ~batch["special_tokens_mask"].bool()
        if "mlm_labels" in batch:
            free &= batch["mlm_labels"] == IGNORE_INDEX
        choice = choose_ngrams(
            batch["input_ids"],
            free,
            self.vocab,
            generator,
            max_ngram=self.max_ngram,
            geometric_p=self.geometric_p,
        )
        return {
            **batch,
            "input_ids": choice.input_ids,
            "infoword_ngram_ids": choice.ngram_ids,
            "infoword_ngram_mask": choice.ngram_mask,
            "infoword_has_ngram": choice.has_ngram,
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        missing = [key for key in INFOWORD_KEYS if key not in batch]
        if missing:
            raise KeyError(
                f"InfoWordObjective needs batch keys {missing}, written by its own data side "
                "(collate); build batches through the objective mix"
            )
        if "mlm_labels" in batch and bool((batch["mlm_labels"] == self.vocab.mask_id).any()):
            raise ValueError(
                "the masked LM chose positions InfoWord had already replaced by [MASK] (its "
                "targets are [MASK]): list the mlm objective before infoword in "
                "objective.objectives"
            )
        hidden = encoder_output.last_hidden_state  # (B, L, D)
        has = batch["infoword_has_ngram"].bool()
        ngram_ids = batch["infoword_ngram_ids"][has]  # (N, n + 2)
        if len(ngram_ids) < 2:  # no negative to contrast with: zero, with a graph
            zero = hidden.sum() * 0.0
            nothing = zero.detach()
            return ObjectiveOutput(
                loss=zero, metrics={"accuracy": nothing, "negatives": nothing, "mi_bound": nothing}
            )
        global_states = hidden[has, 0]  # (N, D)
        local = self.text_encoder(
            ngram_ids, attention_mask=batch["infoword_ngram_mask"][has]
        ).last_hidden_state[:, 0]  # (N, D)
        scores = self.head(global_states, local).float()  # (N, N)
        excluded = same_ngram(ngram_ids)
        loss = info_nce(scores, excluded)
        with torch.no_grad():
            kept = scores.masked_fill(excluded, -math.inf)
            negatives = (~excluded).sum(dim=1).float() - 1.0
            accuracy = (kept.argmax(dim=1) == torch.arange(len(kept), device=kept.device)).float()
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "accuracy": accuracy.mean(),
                "negatives": negatives.mean(),
                # The InfoNCE bound: I(x̂; x_{i:j}) >= log(1 + negatives) - loss.
                "mi_bound": (torch.log1p(negatives).mean() - loss).detach(),
            },
        )
