"""Text-only rows mixed into image-text batches (VL-BERT's pre-training on text corpora).

VL-BERT (Su et al., 2020, §3.2) pre-trains on Conceptual Captions and, at the same time,
on text-only corpora (BooksCorpus, English Wikipedia) with masked language modelling:
jackroos/VL-BERT's ``pretrain/data/datasets/general_corpus.py`` makes a row of a corpus
line and the lines after it until the row is long enough, cut to ``SEQ_LEN`` (64), and
each training step concatenates a batch of such rows after the image-text batch
(``ResNetVLBERTForPretrainingMultitask``; ``BATCH_IMAGES: [32, 32]``), with no visual
input. :class:`TextOnlyRows` does the same for ptm's image-text batches: it appends
``rows_per_batch`` text rows with no region (``visual_mask`` all 0, which
:class:`~ptm_multimodal.vlbert.VlbertModel` reads as a text-only row) and tags every row
with its group (``mlm_row_groups``: 0 image-text, 1 text-only), so the masked LM loss is
the reference's sum of the two groups' means. The objectives' data side (masking) then
runs over the whole batch, text rows included.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.data.lines import iter_lines
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, num_special_tokens

logger = logging.getLogger(__name__)

Batch = dict[str, Tensor]
#: ``mlm_row_groups`` of image-text and of text-only rows.
IMAGE_TEXT_GROUP, TEXT_ONLY_GROUP = 0, 1


class TextOnlyRows:
    """Rows of a tokenized text corpus, drawn per batch and appended to it.

    The corpus is kept as one flat ``int32`` array of word-piece ids and the line offsets
    (a few bytes per token). A row starts at a line drawn uniformly with the batch's
    generator and takes that line and the next ones (wrapping around) until it holds
    ``max_length`` tokens with the tokenizer's specials, as the reference's
    ``GeneralCorpus`` does.

    Args:
        ids: ``int32 (T,)`` every line's ids, without specials, one after the other.
        offsets: ``int64 (N + 1,)`` where line ``i`` is ``ids[offsets[i]:offsets[i + 1]]``.
        tokenizer: adds the specials (``[CLS] ... [SEP]``).
        rows_per_batch: text rows appended to each batch.
        max_length: tokens per text row, specials included.

    Raises:
        ValueError: no non-empty line, or ``max_length`` leaves no room for a word.
    """

    def __init__(
        self,
        ids: np.ndarray,
        offsets: np.ndarray,
        tokenizer: TaskTokenizer,
        *,
        rows_per_batch: int,
        max_length: int,
    ) -> None:
        self.room = max_length - num_special_tokens(tokenizer, pair=False)
        if self.room < 1:
            raise ValueError(f"text-only rows of max_length={max_length} have no room for text")
        if rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be >= 1, got {rows_per_batch}")
        if len(offsets) < 2 or offsets[-1] == 0:
            raise ValueError("the text corpus has no non-empty line")
        self.ids = ids
        self.offsets = offsets
        self.tokenizer = tokenizer
        self.rows_per_batch = rows_per_batch
        self.max_length = max_length

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        tokenizer: TaskTokenizer,
        *,
        rows_per_batch: int,
        max_length: int,
    ) -> TextOnlyRows:
        """Tokenize a text file, one passage per line (blank lines skipped).

        Raises:
            FileNotFoundError: ``path`` is missing.
            ValueError: it has no non-empty line.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"data.text_only.corpus={path} does not exist; give a UTF-8 text file, one "
                "passage per line"
            )
        pieces: list[np.ndarray] = []
        lengths = [0]
        for _, line in iter_lines(path):
            line_ids = tokenizer.tokenize_ids(line.strip()) if line.strip() else []
            if line_ids:
                pieces.append(np.asarray(line_ids, dtype=np.int32))
                lengths.append(len(line_ids))
        if not pieces:
            raise ValueError(f"{path}: no non-empty line; text-only rows need text")
        flat = np.concatenate(pieces)
        unknown = int((flat == tokenizer.vocab_info.unk_id).sum())
        logger.info(
            "text-only rows: %d lines, %d tokens (%d unknown) from %s",
            len(pieces),
            len(flat),
            unknown,
            path,
        )
        if unknown > 0.05 * len(flat):
            logger.warning(
                "%s: %.0f%% of its tokens are [UNK]: the captions' vocabulary does not cover "
                "this text; give a corpus in the captions' language (or a vocabulary that "
                "covers both)",
                path,
                100 * unknown / len(flat),
            )
        return cls(
            flat,
            np.cumsum(lengths),
            tokenizer,
            rows_per_batch=rows_per_batch,
            max_length=max_length,
        )

    @property
    def num_lines(self) -> int:
        return len(self.offsets) - 1

    def row(self, start: int) -> tuple[list[int], list[int]]:
        """``(input_ids, special_tokens_mask)`` of the row beginning at line ``start``."""
        taken: list[int] = []
        line = start
        while len(taken) < self.room:
            taken.extend(self.ids[self.offsets[line] : self.offsets[line + 1]].tolist())
            line = (line + 1) % self.num_lines
        ids, _, special = self.tokenizer.build_inputs(taken[: self.room])
        return ids, special

    def __call__(self, batch: Batch, generator: torch.Generator) -> Batch:
        """``batch`` with ``rows_per_batch`` text-only rows after its rows.

        Text keys are padded to the longer of the two parts; the text rows get zero
        features, boxes and classes, ``visual_mask`` 0, ``match_label`` 1 (their MLM
        labels count) and ``image_index`` -1; ``mlm_row_groups`` tags the two groups.
        """
        starts = torch.randint(self.num_lines, (self.rows_per_batch,), generator=generator)
        built = [self.row(int(s)) for s in starts]
        rows = [ids for ids, _ in built]
        specials = [special for _, special in built]
        width = max(len(r) for r in rows)
        pad_id = self.tokenizer.vocab_info.pad_id

        def padded(values: list[list[int]], fill: int) -> Tensor:
            return torch.tensor([v + [fill] * (width - len(v)) for v in values])

        text = {
            "input_ids": padded(rows, pad_id),
            "attention_mask": padded([[1] * len(r) for r in rows], 0),
            "token_type_ids": padded([[0] * len(r) for r in rows], 0),
            "special_tokens_mask": padded(specials, 1),
        }
        fills = {"input_ids": pad_id, "special_tokens_mask": 1}
        length = max(width, batch["input_ids"].shape[1])
        out = dict(batch)
        for key, rows_tensor in text.items():
            fill = fills.get(key, 0)
            mine = F.pad(batch[key], (0, length - batch[key].shape[1]), value=fill)
            theirs = F.pad(rows_tensor, (0, length - width), value=fill)
            out[key] = torch.cat([mine, theirs.to(mine.dtype)])
        n = self.rows_per_batch
        for key in ("visual_features", "visual_boxes", "visual_mask", "visual_classes"):
            if key in batch:
                value = batch[key]
                out[key] = torch.cat([value, value.new_zeros(n, *value.shape[1:])])
        out["match_label"] = torch.cat([batch["match_label"], batch["match_label"].new_ones(n)])
        out["image_index"] = torch.cat(
            [batch["image_index"], batch["image_index"].new_full((n,), -1)]
        )
        images = batch["input_ids"].shape[0]
        out["mlm_row_groups"] = torch.tensor([IMAGE_TEXT_GROUP] * images + [TEXT_ONLY_GROUP] * n)
        return out
