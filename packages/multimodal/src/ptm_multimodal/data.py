"""Image-text pairs (``data_specs/image_text``) and their deterministic, resumable batches."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ptm_core.data.lines import iter_lines
from ptm_core.seeding import generator_for
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal.boxes import encode_boxes
from ptm_multimodal.region_features import RegionFeatureSet, read_region_features, stack_regions

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
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImageTextError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
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
        if row["image_id"] not in features.images:
            raise ImageTextError(
                f"{path}:{number}: field 'image_id' {row['image_id']!r} has no entry in "
                f"{directory / 'features.json'}; extract features for it or drop the line"
            )
        pairs.append(ImageTextPair(row["image_id"], row["caption"], row.get("image")))
    if not pairs:
        raise ImageTextError(f"{path}: no pairs")
    return ImageTextDataset(pairs=pairs, features=features, root=directory)


class ImageTextBatches:
    """Batches of captions and regions, with swapped-caption negatives.

    For every example, with probability ``negative_prob`` the caption is replaced by the
    caption of another image (a different caption text) and ``match_label`` is 0, else 1
    (VisualBERT's sentence-image and ViLBERT's alignment prediction). Batch ``i`` of epoch
    ``e`` depends only on ``(seed, e, i)``, so the trainer can resume by position.

    Batch keys: ``input_ids``, ``attention_mask``, ``token_type_ids``,
    ``special_tokens_mask`` ``(B, L)``; ``visual_features`` ``(B, R, D)``,
    ``visual_boxes`` ``(B, R, 5)`` (:func:`encode_boxes`), ``visual_mask`` ``(B, R)``,
    ``visual_classes`` ``(B, R, C)`` when the features have classes; ``match_label``
    ``(B,)``; ``image_index`` ``(B,)`` (position of the image in the dataset).

    Args:
        dataset: the pairs and features.
        tokenizer: encodes captions.
        batch_size: examples per batch.
        negative_prob: fraction of swapped captions.
        transform: the objectives' dynamic data side (masking).
        seed: base seed.
        max_length: caption token limit.
        shuffle: shuffle each epoch.
    """

    def __init__(
        self,
        dataset: ImageTextDataset,
        tokenizer: WordPieceTokenizer,
        batch_size: int,
        *,
        negative_prob: float = 0.5,
        transform: BatchTransform | None = None,
        seed: int = 0,
        max_length: int = 32,
        shuffle: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.negative_prob = negative_prob
        self.transform = transform
        self.seed = seed
        self.shuffle = shuffle
        self.pad_id = tokenizer.vocab_info.pad_id
        self.encoded = [tokenizer.encode(p.caption, max_length=max_length) for p in dataset.pairs]
        self.regions = [dataset.features[p.image_id] for p in dataset.pairs]

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.dataset.pairs) // self.batch_size)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def build(
        self, indices: list[int], captions: list[int], generator: torch.Generator | None
    ) -> Batch:
        """A batch of images ``indices`` with the captions of pairs ``captions``."""
        texts = [self.encoded[c] for c in captions]
        length = max(len(t.input_ids) for t in texts)

        def pad(values: list[int], fill: int) -> list[int]:
            return values + [fill] * (length - len(values))

        visual = stack_regions([self.regions[i] for i in indices])
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
                    int(self.dataset.pairs[c].caption == self.dataset.pairs[i].caption)
                    for i, c in zip(indices, captions, strict=True)
                ]
            ),
            "image_index": torch.tensor(indices),
        }
        if visual.classes is not None:
            batch["visual_classes"] = visual.classes
        if self.transform is not None and generator is not None:
            batch = self.transform(batch, generator)
        return batch

    def batch(self, epoch: int, index: int) -> Batch:
        """Batch ``index`` of ``epoch``."""
        n = len(self.dataset.pairs)
        order = (
            torch.randperm(n, generator=generator_for(self.seed, epoch)).tolist()
            if self.shuffle
            else list(range(n))
        )
        chosen = order[index * self.batch_size : (index + 1) * self.batch_size]
        generator = generator_for(self.seed, epoch, index, "negatives")
        captions = []
        for i in chosen:
            c = i
            if n > 1 and float(torch.rand((), generator=generator)) < self.negative_prob:
                for _ in range(20):  # a different caption text, not just another index
                    c = int(torch.randint(n, (), generator=generator))
                    if self.dataset.pairs[c].caption != self.dataset.pairs[i].caption:
                        break
            captions.append(c)
        return self.build(chosen, captions, generator_for(self.seed, epoch, index, "collate"))

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        for index in range(start, self.batches_per_epoch):
            yield self.batch(epoch, index)
