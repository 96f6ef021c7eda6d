"""SentiLARE's label-aware masking: whole words, sentiment words twice as often, and the
choice between early fusion and late supervision per example.

Transcribed from the paper's construction (Ke et al., 2020, Sec. 3.3) as the reference
builds it (thu-coai/SentiLARE ``pretrain/data_label.py``, ``Yelp.random_whole_word`` and
``__getitem__``):

- each word (all its pieces together) is chosen with probability ``word_prob`` = 15%, or
  ``sentiment_word_prob`` = 30% when its polarity is not neutral;
- a chosen word is replaced by ``[MASK]`` pieces 80% of the time, by other pieces 10%, and
  kept 10%; a masked or replaced word's POS input becomes "other" and its polarity input
  "neutral" (a kept word keeps both);
- targets at every piece of a chosen word: the original token, and its POS and polarity,
  except that an ordinary (neutral) word tagged "other" has no POS/polarity target;
- per example, with probability ``late_supervision_prob`` = 0.2 (``--task_ratio``) *late
  supervision*: the sentence-label input is "unknown" everywhere and the label is
  predicted at ``[CLS]``; otherwise *early fusion*: the label id is added at every word
  piece (``[CLS]``, ``[SEP]`` and padding stay "unknown") and there is no label target.

One difference: the reference replaces a word with the pieces of a random word of a random
review (padded with ``[MASK]`` or cut to the word's length); here each piece is replaced
by a random real piece of the same batch (the corpus's piece distribution, no ``[MASK]``
padding).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ptm_core.objectives.base import IGNORE_INDEX
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER

WORD_PROB = 0.15
SENTIMENT_WORD_PROB = 0.3
LATE_SUPERVISION_PROB = 0.2
MASK_TOKEN_PROB = 0.8
RANDOM_TOKEN_PROB = 0.1


@dataclass
class LabelAwareMasking:
    """One batch after :func:`label_aware_masking` (shapes ``(B, L)`` unless noted).

    Attributes:
        input_ids: the corrupted tokens.
        pos: POS inputs (masked/replaced words: "other").
        polarity: word-polarity inputs (masked/replaced words: "neutral").
        label_ids: sentence-label inputs (``num_labels`` = unknown).
        token_labels: token targets, ``-100`` where none.
        pos_labels: POS targets, ``-100`` where none.
        polarity_labels: polarity targets, ``-100`` where none.
        label_targets: ``(B,)`` the sentence label on late-supervision rows, else ``-100``.
        late: ``(B,)`` bool, late-supervision rows.
        chosen_words: ``(B, W)`` bool, the words chosen (for the rate tests).
        sentiment_words: ``(B, W)`` bool, the words whose polarity is not neutral.
        action: ``(B, W)`` 0 masked, 1 replaced, 2 kept (chosen words; else 2).
    """

    input_ids: Tensor
    pos: Tensor
    polarity: Tensor
    label_ids: Tensor
    token_labels: Tensor
    pos_labels: Tensor
    polarity_labels: Tensor
    label_targets: Tensor
    late: Tensor
    chosen_words: Tensor
    sentiment_words: Tensor
    action: Tensor


def check_probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"sentilr objective: {name}={value} must be in [0, 1]")


def label_aware_masking(
    input_ids: Tensor,
    word_index: Tensor,
    pos: Tensor,
    polarity: Tensor,
    labels: Tensor,
    *,
    num_labels: int,
    mask_id: int,
    generator: torch.Generator,
    word_prob: float = WORD_PROB,
    sentiment_word_prob: float = SENTIMENT_WORD_PROB,
    late_supervision_prob: float = LATE_SUPERVISION_PROB,
    mask_token_prob: float = MASK_TOKEN_PROB,
    random_token_prob: float = RANDOM_TOKEN_PROB,
) -> LabelAwareMasking:
    """Label-aware masking of a padded batch; inputs are never modified.

    Args:
        input_ids: ``(B, L)`` token ids.
        word_index: ``(B, L)`` the word each piece belongs to (0-based per row), ``-1`` at
            ``[CLS]``, ``[SEP]`` and padding.
        pos: ``(B, L)`` each piece's word's POS id.
        polarity: ``(B, L)`` each piece's word's polarity id.
        labels: ``(B,)`` sentence labels in ``[0, num_labels)``.
        num_labels: sentence classes (the label table has ``num_labels + 1`` rows).
        mask_id: ``[MASK]``.
        generator: the batch's generator (every draw comes from it).
    """
    for name, value in (
        ("word_prob", word_prob),
        ("sentiment_word_prob", sentiment_word_prob),
        ("late_supervision_prob", late_supervision_prob),
        ("mask_token_prob + random_token_prob", mask_token_prob + random_token_prob),
    ):
        check_probability(name, value)
    rows = input_ids.shape[0]
    is_word = word_index >= 0
    index = word_index.clamp(min=0)
    words = int(word_index.max()) + 1 if is_word.any() else 0
    # a word's polarity/POS: that of its pieces (all equal); non-word positions write to
    # a spare last column
    slot = torch.where(is_word, word_index, words)
    word_polarity = torch.full((rows, words + 1), NEUTRAL, dtype=torch.long)
    word_polarity.scatter_(1, slot, polarity)
    present = torch.zeros((rows, words + 1), dtype=torch.bool)
    present.scatter_(1, slot, is_word)
    word_polarity, present = word_polarity[:, :words], present[:, :words]
    sentiment = (word_polarity != NEUTRAL) & present
    rate = torch.where(sentiment, sentiment_word_prob, word_prob)
    chosen = (torch.rand((rows, words), generator=generator) < rate) & present
    draw = torch.rand((rows, words), generator=generator)
    action = torch.full((rows, words), 2, dtype=torch.long)
    action[chosen & (draw < mask_token_prob)] = 0
    action[chosen & (draw >= mask_token_prob) & (draw < mask_token_prob + random_token_prob)] = 1
    late = torch.rand(rows, generator=generator) < late_supervision_prob

    piece_chosen = chosen.gather(1, index) & is_word  # (B, L)
    piece_action = action.gather(1, index)
    changed = piece_chosen & (piece_action < 2)
    token_labels = torch.where(piece_chosen, input_ids, IGNORE_INDEX)
    knows = piece_chosen & (sentiment.gather(1, index) | (pos != OTHER))
    pos_labels = torch.where(knows, pos, IGNORE_INDEX)
    polarity_labels = torch.where(knows, polarity, IGNORE_INDEX)

    corrupted = input_ids.clone()
    corrupted[piece_chosen & (piece_action == 0)] = mask_id
    replaced = piece_chosen & (piece_action == 1)
    if replaced.any():
        pool = input_ids[is_word]  # the batch's real pieces
        picks = torch.randint(len(pool), (int(replaced.sum()),), generator=generator)
        corrupted[replaced] = pool[picks]
    unknown = torch.full_like(input_ids, num_labels)
    label_ids = torch.where(is_word & ~late[:, None], labels[:, None], unknown)
    return LabelAwareMasking(
        input_ids=corrupted,
        pos=torch.where(changed, OTHER, pos),
        polarity=torch.where(changed, NEUTRAL, polarity),
        label_ids=label_ids,
        token_labels=token_labels,
        pos_labels=pos_labels,
        polarity_labels=polarity_labels,
        label_targets=torch.where(late, labels, IGNORE_INDEX),
        late=late,
        chosen_words=chosen,
        sentiment_words=sentiment,
        action=action,
    )
