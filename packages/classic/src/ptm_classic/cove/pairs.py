"""Parallel pairs for CoVe's translation model: English words in (GloVe rows), target words
out, one restartable batch source.

Both sides are split into words as the GloVe tables are (``split_words``: lower-cased word
and punctuation tokens). One model translates into every target language of the data; the
decoder's first input names the language (``<2de>``, ``<2fr>``), so the encoder is trained
by all pairs at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ptm_classic.static.corpus import split_words
from ptm_core.data.parallel_corpus import ParallelCorpus

PAD, UNK, EOS = "<pad>", "<unk>", "</s>"
PAD_ID, UNK_ID, EOS_ID = 0, 1, 2
#: Label value the loss skips (padding).
IGNORE = -100


def start_token(lang: str) -> str:
    """The decoder's first input for translations into ``lang``."""
    return f"<2{lang}>"


@dataclass(frozen=True)
class TranslationExample:
    """One pair as words: the source sentence and the target language and sentence."""

    source: tuple[str, ...]
    target_lang: str
    target: tuple[str, ...]


def translation_examples(
    corpora: Sequence[ParallelCorpus],
    *,
    source_lang: str,
    target_langs: Sequence[str] | None = None,
    max_words: int = 50,
) -> list[TranslationExample]:
    """The pairs that translate out of ``source_lang`` (either side of a corpus), as words.

    Args:
        corpora: parallel corpora (:func:`~ptm_core.data.parallel_corpus.read_parallel_corpora`).
        source_lang: the encoder's language (``en``: the MT-LSTM reads English GloVe).
        target_langs: the languages translated into (``None``: every other side there is).
        max_words: longer sentences are cut to this many words.

    Raises:
        ValueError: no pair translates ``source_lang`` into one of ``target_langs``.
    """
    examples: list[TranslationExample] = []
    found: set[str] = set()
    for corpus in corpora:
        found |= {corpus.source_lang, corpus.target_lang}
        for src_lang, tgt_lang, flip in (
            (corpus.source_lang, corpus.target_lang, False),
            (corpus.target_lang, corpus.source_lang, True),
        ):
            if src_lang != source_lang or (target_langs and tgt_lang not in target_langs):
                continue
            for pair in corpus.pairs:
                source, target = (pair[1], pair[0]) if flip else pair
                examples.append(
                    TranslationExample(
                        tuple(split_words(source)[:max_words]),
                        tgt_lang,
                        tuple(split_words(target)[:max_words]),
                    )
                )
    if not examples:
        wanted = ", ".join(target_langs) if target_langs else "any other language"
        raise ValueError(
            f"no sentence pair translates {source_lang} into {wanted} (the corpora have "
            f"{sorted(found)}); set data.source_lang / data.target_langs to languages of "
            "data.parallel"
        )
    return examples


def target_vocabulary(
    examples: Sequence[TranslationExample], *, top_k: int = 50000, min_count: int = 1
) -> list[str]:
    """``<pad> <unk> </s>``, one start token per target language, then the target words seen
    at least ``min_count`` times, most frequent first (ties alphabetical), at most ``top_k``."""
    counts = Counter(word for example in examples for word in example.target)
    words = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
    starts = sorted({start_token(example.target_lang) for example in examples})
    return [PAD, UNK, EOS, *starts, *words[:top_k]]


class TranslationBatches:
    """A deterministic, restartable batch source of translation pairs.

    Args:
        examples: the pairs.
        source_ids: maps words to the encoder's input rows (GloVe rows:
            ``StaticWordEmbedding.ids``), ``(sentences, width) -> (B, width)``.
        vocabulary: the target words (:func:`target_vocabulary`).
        batch_size: pairs per batch.
        seed: shuffling seed (each epoch: ``seed + epoch``).
        shuffle: False keeps file order (evaluation).

    Batches hold ``source_ids (B, S)``, ``source_mask (B, S)`` bool, ``target_ids (B, T)``
    (the start token, then the target words) and ``target_labels (B, T)`` (the target
    words, then ``</s>``; ``-100`` at padding).
    """

    def __init__(
        self,
        examples: Sequence[TranslationExample],
        source_ids: Callable[[Sequence[Sequence[str]], int], Tensor],
        vocabulary: Sequence[str],
        *,
        batch_size: int = 32,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        if not examples:
            raise ValueError("TranslationBatches: no sentence pairs")
        self.examples, self.source_ids = list(examples), source_ids
        self.rows = {word: i for i, word in enumerate(vocabulary)}
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.examples) // self.batch_size)

    def __len__(self) -> int:
        return len(self.examples)

    def collate(self, chosen: Sequence[TranslationExample]) -> dict[str, Tensor]:
        """One batch of ``chosen`` pairs."""
        width = max(1, max(len(e.source) for e in chosen))
        lengths = torch.tensor([len(e.source) for e in chosen])
        steps = max(len(e.target) for e in chosen) + 1
        target_ids = torch.full((len(chosen), steps), PAD_ID, dtype=torch.long)
        labels = torch.full((len(chosen), steps), IGNORE, dtype=torch.long)
        for b, example in enumerate(chosen):
            words = [self.rows.get(w, UNK_ID) for w in example.target]
            start = self.rows[start_token(example.target_lang)]
            target_ids[b, : len(words) + 1] = torch.tensor([start, *words])
            labels[b, : len(words) + 1] = torch.tensor([*words, EOS_ID])
        return {
            "source_ids": self.source_ids([list(e.source) for e in chosen], width),
            "source_mask": torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1),
            "target_ids": target_ids,
            "target_labels": labels,
        }

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, Tensor]]:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            order = torch.randperm(len(self.examples), generator=generator).tolist()
        else:
            order = list(range(len(self.examples)))
        for index in range(start, self.batches_per_epoch):
            chosen = order[index * self.batch_size : (index + 1) * self.batch_size]
            yield self.collate([self.examples[i] for i in chosen])


__all__ = [
    "EOS_ID",
    "IGNORE",
    "PAD_ID",
    "UNK_ID",
    "TranslationBatches",
    "TranslationExample",
    "start_token",
    "target_vocabulary",
    "translation_examples",
]
