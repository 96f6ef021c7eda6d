"""Image-text pairs (``data_specs/image_text``) and their deterministic, resumable batches."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
from torch import Tensor

from ptm_core.data.batches import iter_built_in_workers
from ptm_core.data.lines import iter_lines
from ptm_core.data.text_cells import check_text, loads_json
from ptm_core.seeding import generator_for
from ptm_multimodal.boxes import encode_boxes

if TYPE_CHECKING:
    from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_multimodal.region_features import (
    ImageRegions,
    RegionFeatureSet,
    read_region_features,
    stack_regions,
)

Batch = dict[str, Tensor]
BatchTransform = Callable[[Batch, torch.Generator], Batch]


class ImageTextError(ValueError):
    """A malformed ``pairs.jsonl``; the message names the file, line and field."""


@dataclass
class ImageTextPair:
    """One caption of one image (``image`` is a path relative to the dataset, optional)."""

    image_id: str
    caption: str
    image: str | None = None


@dataclass
class ImageTextDataset:
    """Captions plus the region features of their images."""

    pairs: list[ImageTextPair]
    features: RegionFeatureSet
    root: Path | None = None


def _image_text_error(
    path: Path, line: int | None, field_name: str, problem: str, fix: str
) -> ImageTextError:
    where = str(path) if line is None else f"{path}:{line}"
    return ImageTextError(f"{where}: field {field_name!r}: {problem}; {fix}")


def parse_pair_line(path: Path, number: int, line: str) -> ImageTextPair | None:
    """One line of ``pairs.jsonl`` as a pair (``None`` for a blank line).

    Raises:
        ImageTextError: invalid JSON, not an object, a missing, empty or NUL-holding
            ``image_id``/``caption``, or an ``image`` that is not a string
            (``file:line: field ...``).
    """
    if not line.strip():
        return None
    row = loads_json(
        path,
        number,
        line,
        'write one {"image_id": ..., "caption": ...} per line',
        _image_text_error,
    )
    if not isinstance(row, dict):
        raise ImageTextError(
            f"{path}:{number}: not a JSON object; write one "
            '{"image_id": ..., "caption": ...} per line'
        )
    for key in ("image_id", "caption"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ImageTextError(f"{path}:{number}: field {key!r} must be a non-empty string")
        if "\x00" in row[key]:
            raise _image_text_error(
                path,
                number,
                key,
                f"NUL character (\\x00) at character {row[key].index(chr(0)) + 1}",
                "remove it",
            )
        check_text(path, number, key, row[key], _image_text_error)
    image = row.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise _image_text_error(
            path, number, "image", f"{image!r} is not a path", "give a path relative to the dataset"
        )
    return ImageTextPair(row["image_id"], row["caption"], image)


def read_image_text_pairs(directory: str | Path) -> ImageTextDataset:
    """Read ``pairs.jsonl`` and the region features beside it, validating both.

    ``pairs.jsonl`` is streamed line by line, split on ``\\n`` only (a U+2028 inside a
    caption is text, not a line break).

    Raises:
        ImageTextError: a bad line (``file:line: field ...``): invalid UTF-8 or JSON, a
            missing, empty or NUL-holding ``image_id``/``caption``, or a caption whose
            image has no features.
        RegionFeatureError: the features beside it are malformed, damaged or truncated.
    """
    directory = Path(directory)
    path = directory / "pairs.jsonl"
    if not path.is_file():
        raise ImageTextError(f"{path}: missing; see data_specs/image_text/README.md")
    features = read_region_features(directory)
    pairs: list[ImageTextPair] = []
    for number, line in iter_lines(path, _image_text_error):
        pair = parse_pair_line(path, number, line)
        if pair is None:
            continue
        if pair.image_id not in features.images:
            raise ImageTextError(
                f"{path}:{number}: field 'image_id' {pair.image_id!r} has no entry in "
                f"{directory / 'features.json'}; extract features for it or drop the line"
            )
        pairs.append(pair)
    if not pairs:
        raise ImageTextError(f"{path}: no pairs")
    return ImageTextDataset(pairs=pairs, features=features, root=directory)


@dataclass
class CaptionTokens:
    """One encoded caption (``[CLS] caption [SEP]``); all lists have the same length."""

    input_ids: list[int]
    attention_mask: list[int]
    token_type_ids: list[int]
    special_tokens_mask: list[int]


@runtime_checkable
class PairRows(Protocol):
    """Image-text pairs by index, as :class:`ImageTextBatches` reads them.

    Two implementations: :class:`InMemoryPairs` (a dataset read whole, captions encoded up
    front) and :class:`~ptm_multimodal.prepared.PreparedImageText` (shards on disk, read
    per index). Both must give equal values for equal pairs.
    """

    def __len__(self) -> int: ...

    def caption_key(self, index: int) -> object:
        """A value equal for two pairs exactly when their caption texts are equal."""
        ...

    def caption(self, index: int) -> CaptionTokens:
        """The encoded caption of pair ``index``."""
        ...

    def regions(self, index: int) -> ImageRegions:
        """The regions of pair ``index``'s image."""
        ...


class InMemoryPairs:
    """A dataset read whole (:func:`read_image_text_pairs`), captions encoded up front.

    Memory grows with the dataset; for large sets prepare them once instead
    (:func:`~ptm_multimodal.prepared.prepare_image_text`).
    """

    def __init__(
        self, dataset: ImageTextDataset, tokenizer: TaskTokenizer, max_length: int = 32
    ) -> None:
        self.dataset = dataset
        captions = [p.caption for p in dataset.pairs]
        self.encoded = tokenizer.encode_batch(captions, max_length=max_length) if captions else []
        self.images = [dataset.features[p.image_id] for p in dataset.pairs]

    def __len__(self) -> int:
        return len(self.dataset.pairs)

    def caption_key(self, index: int) -> object:
        return self.dataset.pairs[index].caption

    def caption(self, index: int) -> CaptionTokens:
        t = self.encoded[index]
        return CaptionTokens(t.input_ids, t.attention_mask, t.token_type_ids, t.special_tokens_mask)

    def regions(self, index: int) -> ImageRegions:
        return self.images[index]


class ImageTextBatches:
    """Batches of captions and regions, with swapped-caption negatives.

    For every example, with probability ``negative_prob`` the caption is replaced by the
    caption of another image (a different caption text) and ``match_label`` is 0, else 1
    (VisualBERT's sentence-image and ViLBERT's alignment prediction). Batch ``i`` of epoch
    ``e`` depends only on ``(seed, e, i)``, so the trainer can resume by position, DDP ranks
    build only their own batches, and worker processes may build them in any order.

    Batch keys: ``input_ids``, ``attention_mask``, ``token_type_ids``,
    ``special_tokens_mask`` ``(B, L)``; ``visual_features`` ``(B, R, D)``,
    ``visual_boxes`` ``(B, R, 5)`` (:func:`encode_boxes`), ``visual_mask`` ``(B, R)``,
    ``visual_classes`` ``(B, R, C)`` when the features have classes; ``match_label``
    ``(B,)``; ``image_index`` ``(B,)`` (position of the image in the dataset).

    Args:
        dataset: the pairs: a dataset read whole (encoded here with ``tokenizer``), or
            :class:`PairRows` such as a prepared set, read per index.
        tokenizer: encodes captions (needed for a dataset read whole).
        batch_size: examples per batch.
        negative_prob: fraction of swapped captions.
        transform: the objectives' dynamic data side (masking).
        seed: base seed.
        max_length: caption token limit (a prepared set was cut when it was prepared).
        shuffle: shuffle each epoch.
        pad_id: padding id (default: the tokenizer's).
        num_workers: ``torch.utils.data.DataLoader`` worker processes that build batches
            off the training loop; 0 builds them in the training process.
        pin_memory: page-lock batches for faster copies to a GPU (with workers).
        prefetch_factor: batches each worker prepares ahead.
        extra_rows: rows appended to every batch before ``transform``, given the batch's
            seeded generator (VL-BERT's text-only rows,
            :class:`~ptm_multimodal.text_rows.TextOnlyRows`).
    """

    def __init__(
        self,
        dataset: ImageTextDataset | PairRows,
        tokenizer: TaskTokenizer | None = None,
        batch_size: int = 64,
        *,
        negative_prob: float = 0.5,
        transform: BatchTransform | None = None,
        seed: int = 0,
        max_length: int = 32,
        shuffle: bool = True,
        pad_id: int | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        prefetch_factor: int = 4,
        extra_rows: BatchTransform | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if isinstance(dataset, ImageTextDataset):
            if tokenizer is None:
                raise ValueError("a dataset read whole needs the tokenizer that encodes captions")
            self.pairs: PairRows = InMemoryPairs(dataset, tokenizer, max_length)
        else:
            self.pairs = dataset
        if pad_id is None:
            if tokenizer is None:
                raise ValueError("give pad_id or the tokenizer")
            pad_id = tokenizer.vocab_info.pad_id
        self.batch_size = batch_size
        self.negative_prob = negative_prob
        self.transform = transform
        self.seed = seed
        self.shuffle = shuffle
        self.pad_id = pad_id
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor
        self.extra_rows = extra_rows
        self._order_cache: tuple[int, Tensor] | None = None

    @property
    def dataset(self) -> ImageTextDataset:
        """The dataset read whole (only for :class:`InMemoryPairs`)."""
        if not isinstance(self.pairs, InMemoryPairs):
            raise AttributeError("these batches read prepared pairs; use .pairs")
        return self.pairs.dataset

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.pairs) // self.batch_size)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def build(
        self, indices: list[int], captions: list[int], generator: torch.Generator | None
    ) -> Batch:
        """A batch of images ``indices`` with the captions of pairs ``captions``."""
        texts = [self.pairs.caption(c) for c in captions]
        length = max(len(t.input_ids) for t in texts)

        def pad(values: list[int], fill: int) -> list[int]:
            return values + [fill] * (length - len(values))

        visual = stack_regions([self.pairs.regions(i) for i in indices])
        batch: Batch = {
            "input_ids": torch.tensor([pad(t.input_ids, self.pad_id) for t in texts]),
            "attention_mask": torch.tensor([pad(t.attention_mask, 0) for t in texts]),
            "token_type_ids": torch.tensor([pad(t.token_type_ids, 0) for t in texts]),
            "special_tokens_mask": torch.tensor([pad(t.special_tokens_mask, 1) for t in texts]),
            "visual_features": visual.features,
            "visual_boxes": encode_boxes(
                visual.boxes, visual.image_sizes[:, None, 0], visual.image_sizes[:, None, 1]
            ),
            "visual_mask": visual.mask,
            "match_label": torch.tensor(
                [
                    int(self.pairs.caption_key(c) == self.pairs.caption_key(i))
                    for i, c in zip(indices, captions, strict=True)
                ]
            ),
            "image_index": torch.tensor(indices),
        }
        if visual.classes is not None:
            batch["visual_classes"] = visual.classes
        if self.extra_rows is not None and generator is not None:
            batch = self.extra_rows(batch, generator)
        if self.transform is not None and generator is not None:
            batch = self.transform(batch, generator)
        return batch

    def order(self, epoch: int) -> Tensor:
        """``int64 (N,)`` pair indices in the order epoch ``epoch`` visits them (kept for
        the last epoch asked)."""
        if self._order_cache is not None and self._order_cache[0] == epoch:
            return self._order_cache[1]
        n = len(self.pairs)
        order = (
            torch.randperm(n, generator=generator_for(self.seed, epoch))
            if self.shuffle
            else torch.arange(n)
        )
        self._order_cache = (epoch, order)
        return order

    def batch(self, epoch: int, index: int) -> Batch:
        """Batch ``index`` of ``epoch``."""
        n = len(self.pairs)
        chosen = self.order(epoch)[index * self.batch_size : (index + 1) * self.batch_size].tolist()
        generator = generator_for(self.seed, epoch, index, "negatives")
        captions = []
        for i in chosen:
            c = i
            if n > 1 and float(torch.rand((), generator=generator)) < self.negative_prob:
                key = self.pairs.caption_key(i)
                for _ in range(20):  # a different caption text, not just another index
                    c = int(torch.randint(n, (), generator=generator))
                    if self.pairs.caption_key(c) != key:
                        break
            captions.append(c)
        return self.build(chosen, captions, generator_for(self.seed, epoch, index, "collate"))

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        """Yield the batches of ``epoch`` from position ``start`` on."""
        return self.iter_indices(epoch, range(start, self.batches_per_epoch))

    def iter_indices(self, epoch: int, indices: Iterable[int]) -> Iterator[Batch]:
        """Yield batches ``indices`` of ``epoch`` in that order, built in worker processes
        when ``num_workers > 0`` (a DDP rank asks for its own indices only)."""
        indices = list(indices)
        if self.num_workers == 0 or len(indices) < 2:
            for index in indices:
                yield self.batch(epoch, index)
            return
        yield from iter_built_in_workers(
            functools.partial(self.batch, epoch),
            indices,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            prefetch_factor=self.prefetch_factor,
            seed=self.seed,
        )
