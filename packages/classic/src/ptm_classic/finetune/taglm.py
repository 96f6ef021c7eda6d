"""TagLM (Peters et al., 2017): frozen LM embeddings beside word embeddings in a tagger.

:class:`TagLMTagger` runs a BiLSTM(-CRF) over the word-level input layer of
:mod:`ptm_classic.finetune.word_features` (static vectors, a char CNN, frozen biLM or
Transformer states under a learned scalar mix); :class:`WordBatches` feeds it. The same
features feed the sentence classifier of :mod:`ptm_classic.finetune.word_classifier`;
:mod:`ptm_classic.finetune.taglm_io` saves and loads both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ptm_classic.finetune.word_features import WordFeatures, run_bilstm
from ptm_core.finetune.feature_based import IGNORE_INDEX, TaggerOutput, _is_bio
from ptm_core.heads.crf import LinearChainCRF


class TagLMTagger(nn.Module):
    """A BiLSTM(-CRF) sequence tagger over :class:`WordFeatures` (TagLM, Peters et al., 2017)::

        [static(w); chars(w); LM(w)] -> dropout -> BiLSTM -> linear -> CRF (or softmax)

    Only the static vectors (when not frozen), the char CNN, the LM's scalar mix, the
    BiLSTM, the linear layer and the CRF learn; the LM stays frozen.

    Args:
        features: the word-level input layer.
        num_labels: ``T``, the number of tags.
        label_names: tag names by index.
        crf: a linear-chain CRF (Lample et al., 2016) on top; False = per-word softmax.
        constraint: the CRF's ``"bio"`` constraint, ``None``, or ``"auto"`` (BIO names).
        lstm_hidden: hidden units per direction.
        lstm_layers: stacked BiLSTM layers.
        dropout: dropout on the features (and between LSTM layers).

    Shapes:
        ``forward(batch)``: ``features.encode``'s tensors plus optional ``labels (B, W)``
        (``-100`` past each sentence). Returns a
        :class:`~ptm_core.finetune.feature_based.TaggerOutput` whose ``logits`` are
        ``(B, W, T)`` and ``predictions`` ``(B, W)`` (``-100`` at padding words).
    """

    kind = "tagging"

    def __init__(
        self,
        features: WordFeatures,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        crf: bool = True,
        constraint: str | None = "auto",
        lstm_hidden: int = 100,
        lstm_layers: int = 1,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if label_names is not None and len(label_names) != num_labels:
            raise ValueError(
                f"label_names has {len(label_names)} names but num_labels is {num_labels}"
            )
        if constraint == "auto":
            constraint = "bio" if label_names is not None and _is_bio(label_names) else None
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.settings: dict[str, Any] = {
            "crf": crf,
            "constraint": constraint,
            "lstm_hidden": lstm_hidden,
            "lstm_layers": lstm_layers,
            "dropout": dropout,
        }
        self.features = features
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            features.output_dim,
            lstm_hidden,
            num_layers=lstm_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if lstm_layers > 1 else 0.0,
        )
        self.emissions = nn.Linear(2 * lstm_hidden, num_labels)
        self.crf = (
            LinearChainCRF(num_labels, tag_names=label_names, constraint=constraint)
            if crf
            else None
        )

    def encode(
        self, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[int]] | None = None
    ) -> dict[str, Tensor]:
        """A batch for :meth:`forward`; ``tags`` (one index per word) become ``labels``."""
        batch = self.features.encode(sentences)
        if tags is not None:
            labels = torch.full(batch["word_mask"].shape, IGNORE_INDEX, dtype=torch.long)
            for b, row in enumerate(tags):
                if len(row) != len(sentences[b]):
                    raise ValueError(
                        f"sentence {b} has {len(sentences[b])} words but {len(row)} tags"
                    )
                if row:
                    labels[b, : len(row)] = torch.tensor(list(row))
            batch["labels"] = labels
        return batch

    def forward(self, batch: dict[str, Tensor]) -> TaggerOutput:
        word_mask = batch["word_mask"].bool()
        words = self.features(batch)
        emissions = self.emissions(run_bilstm(self.lstm, self.dropout(words), word_mask))
        if self.crf is not None:
            tags = self.crf.decode(emissions.detach(), word_mask)
        else:
            tags = emissions.detach().argmax(-1)
        predictions = tags.masked_fill(~word_mask, IGNORE_INDEX)
        labels = batch.get("labels")
        loss: Tensor | None = None
        metrics: dict[str, Tensor] = {}
        if labels is not None:
            gold = labels.masked_fill(~word_mask, 0)
            if self.crf is not None:
                log_likelihood = self.crf.log_likelihood(emissions, gold, word_mask)  # (B,)
                has_words = (word_mask.sum(1) > 0).float()
                loss = -(log_likelihood * has_words).sum() / has_words.sum().clamp(min=1.0)
            else:
                loss = nn.functional.cross_entropy(
                    emissions.flatten(0, 1), labels.masked_fill(~word_mask, IGNORE_INDEX).flatten()
                )
            correct = (tags == gold) & word_mask
            metrics["accuracy"] = (correct.sum() / word_mask.sum().clamp(min=1)).detach().float()
        return TaggerOutput(loss=loss, logits=emissions, metrics=metrics, predictions=predictions)

    @torch.no_grad()
    def tag(self, sentences: Sequence[Sequence[str]]) -> list[list[int]]:
        """Best tag indices of each word (call ``.eval()`` first for deterministic output)."""
        out = self(self.encode(sentences))
        assert out.predictions is not None
        return [out.predictions[b, : len(s)].tolist() for b, s in enumerate(sentences)]


class WordBatches:
    """A deterministic, restartable :class:`~ptm_core.training.protocols.BatchSource` of
    word-level examples, encoded by a model's ``encode(sentences, labels)``.

    Args:
        encode: ``model.encode`` (``TagLMTagger`` or ``WordClassifier``).
        sentences: the examples' words.
        labels: per example, a tag index per word (tagging) or a class index.
        batch_size: examples per batch.
        seed: shuffling seed (each epoch: ``seed + epoch``).
        shuffle: False keeps file order (evaluation).
    """

    def __init__(
        self,
        encode: Any,
        sentences: Sequence[Sequence[str]],
        labels: Sequence[Any] | None,
        *,
        batch_size: int = 16,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        if not sentences:
            raise ValueError("WordBatches: no examples")
        self.encode, self.sentences, self.labels = encode, list(sentences), labels
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.sentences) // self.batch_size)

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, Tensor]]:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            order = torch.randperm(len(self.sentences), generator=generator).tolist()
        else:
            order = list(range(len(self.sentences)))
        for index in range(start, self.batches_per_epoch):
            chosen = order[index * self.batch_size : (index + 1) * self.batch_size]
            labels = None if self.labels is None else [self.labels[i] for i in chosen]
            yield self.encode([self.sentences[i] for i in chosen], labels)
