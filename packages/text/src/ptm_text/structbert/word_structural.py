"""StructBERT's word-structural objective: shuffle trigrams, predict the original order."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.tokenization import VocabInfo

LABELS_KEY = "word_structural_labels"


def eligible_positions(
    special_tokens_mask: Tensor, mlm_labels: Tensor | None, attention_mask: Tensor | None = None
) -> Tensor:
    """Tokens a shuffled n-gram may cover: not special, not padding, not an MLM target.

    Args:
        special_tokens_mask: ``(B, L)`` 1 at [CLS], [SEP], [PAD].
        mlm_labels: ``(B, L)`` MLM targets (``-100`` where none), or ``None`` (no MLM).
        attention_mask: ``(B, L)`` 0 at padding, or ``None``.

    Returns:
        ``(B, L)`` bool.
    """
    eligible = ~special_tokens_mask.bool()
    if mlm_labels is not None:
        eligible &= mlm_labels == IGNORE_INDEX
    if attention_mask is not None:
        eligible &= attention_mask.bool()
    return eligible


def select_ngrams(
    eligible: Tensor, rate: float, generator: torch.Generator, ngram: int = 3
) -> Tensor:
    """Non-overlapping n-grams of eligible tokens covering ``rate`` of them, per row.

    Row ``b`` with ``n`` eligible tokens gets ``k = floor(rate * n / ngram + u)`` n-grams,
    ``u ~ U(0, 1)`` (the unbiased rounding of ``select_positions``: the expected share of
    eligible tokens covered is exactly ``rate``). The n-grams are drawn uniformly among the
    windows whose ``ngram`` tokens are all eligible, one at a time, skipping windows that
    overlap one already chosen; a row runs out only when its free windows do.

    Args:
        eligible: ``(B, L)`` bool, tokens that may be covered.
        rate: share of eligible tokens to cover.
        generator: the seeded source of randomness.
        ngram: window length (3: StructBERT's trigrams).

    Returns:
        ``(B, L)`` bool, True at the first position of each chosen n-gram.
    """
    rows, length = eligible.shape
    starts = torch.zeros_like(eligible)
    if length < ngram:
        return starts
    windows = eligible[:, : length - ngram + 1].clone()  # (B, L - n + 1)
    for offset in range(1, ngram):
        windows &= eligible[:, offset : length - ngram + 1 + offset]
    counts = eligible.sum(dim=1)
    jitter = torch.rand(counts.shape, generator=generator)
    wanted = torch.floor(counts.float() * rate / ngram + jitter).long().tolist()
    keys = torch.rand(windows.shape, generator=generator)
    for row in range(rows):
        if wanted[row] <= 0:
            continue
        candidates = windows[row].nonzero().squeeze(1)
        order = candidates[keys[row, candidates].argsort()].tolist()
        taken = [False] * length
        chosen = 0
        for start in order:
            if any(taken[start : start + ngram]):
                continue
            taken[start : start + ngram] = [True] * ngram
            starts[row, start] = True
            chosen += 1
            if chosen == wanted[row]:
                break
    return starts


def shuffle_ngrams(
    input_ids: Tensor, starts: Tensor, generator: torch.Generator, ngram: int = 3
) -> tuple[Tensor, Tensor]:
    """Permute the tokens of each chosen n-gram; the labels are the original tokens.

    Each n-gram gets a permutation drawn uniformly among the ``ngram! - 1`` that are not
    the identity, so every chosen n-gram is out of order (tokens that repeat inside it can
    still leave it looking unchanged).

    Args:
        input_ids: ``(B, L)`` ids (not modified).
        starts: ``(B, L)`` bool first positions (:func:`select_ngrams`).
        generator: the seeded source of randomness.
        ngram: window length.

    Returns:
        ``(shuffled_ids, labels)``, both ``(B, L)``; labels hold the original id at every
        position of a shuffled n-gram and ``-100`` elsewhere.
    """
    shuffled = input_ids.clone()
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    rows, cols = starts.nonzero(as_tuple=True)
    identity = torch.arange(ngram)
    for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
        order = identity
        while torch.equal(order, identity):
            order = torch.randperm(ngram, generator=generator)
        span = input_ids[row, col : col + ngram]
        shuffled[row, col : col + ngram] = span[order]
        labels[row, col : col + ngram] = span
    return shuffled, labels


class WordStructuralObjective(Objective):
    """StructBERT's word-structural objective (Wang et al., 2019, Sec. 2.2).

    Data side (:meth:`collate`, every batch): among the tokens left unmasked by MLM, choose
    non-overlapping trigrams covering ``rate`` (5%) of them (:func:`select_ngrams`),
    shuffle each one (:func:`shuffle_ngrams`) and keep the original token of every shuffled
    position as its label. Loss side: the final hidden state of each shuffled position ->
    a vocabulary softmax (:class:`MaskedLMHead`, decoder tied to the token embeddings as
    MLM's) -> cross-entropy against the original token, i.e. "reconstruct the right order".

    The paper says "5% of the unmasked trigrams"; ptm reads it as trigrams covering 5% of
    the unmasked tokens (the unmasked text cut into trigrams, 5% of them shuffled).

    Put it *after* the MLM objective in the mix: it reads ``mlm_labels`` to keep away from
    MLM's targets (without MLM every non-special token is eligible). Its loss refuses a
    batch where a shuffled position is also an MLM target (MLM listed after it).

    Args:
        vocab: the tokenizer's special ids and vocabulary size.
        hidden_size: width of the states the head reads.
        vocab_size: rows of the output projection (the encoder's token table).
        tie_to: the token table the decoder weight is tied to (``None``: untied).
        activation: the head transform's activation (the encoder's).
        layer_norm_eps: the head transform's LayerNorm epsilon (the encoder's).
        rate: share of unmasked, non-special tokens covered by shuffled n-grams.
        ngram: shuffled span length (3, trigrams: the paper found 4 no better).

    Batch keys: reads ``input_ids``, ``special_tokens_mask``, ``attention_mask`` and
    ``mlm_labels`` (if present); writes ``input_ids`` (shuffled) and
    ``word_structural_labels`` ``(B, L)``.
    """

    name = "word_structural"
    batch_keys = (LABELS_KEY,)

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        rate: float = 0.05,
        ngram: int = 3,
    ) -> None:
        super().__init__()
        if not 0.0 < rate < 1.0:
            raise ValueError(f"word_structural rate must be in (0, 1), got {rate}")
        if ngram < 2:
            raise ValueError(f"word_structural ngram must be at least 2 to shuffle, got {ngram}")
        if vocab.vocab_size != vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{vocab_size}; build the encoder with the tokenizer's size"
            )
        self.vocab = vocab
        self.rate = rate
        self.ngram = ngram
        self.head = MaskedLMHead(
            hidden_size,
            vocab_size,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            tie_to=tie_to,
        )

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        eligible = eligible_positions(
            batch["special_tokens_mask"], batch.get("mlm_labels"), batch.get("attention_mask")
        )
        starts = select_ngrams(eligible, self.rate, generator, self.ngram)
        ids, labels = shuffle_ngrams(batch["input_ids"], starts, generator, self.ngram)
        return {**batch, "input_ids": ids, LABELS_KEY: labels}

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch[LABELS_KEY]
        selected = labels != IGNORE_INDEX
        mlm_labels = batch.get("mlm_labels")
        if mlm_labels is not None and bool((selected & (mlm_labels != IGNORE_INDEX)).any()):
            raise ValueError(
                "word_structural shuffled tokens that MLM then chose as targets: list the mlm "
                "objective before word_structural in objective.objectives"
            )
        hidden = encoder_output.last_hidden_state  # (B, L, D)
        logits = self.head(hidden[selected])  # (N, V)
        targets = labels[selected]
        loss = (
            F.cross_entropy(logits.float(), targets)
            if targets.numel()
            else logits.sum() * 0.0  # nothing shuffled in this batch: zero, with a graph
        )
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "accuracy": accuracy(logits, targets),
                "predictions": torch.tensor(float(targets.numel())),
            },
        )
