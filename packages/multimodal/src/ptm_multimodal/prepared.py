"""Prepared image-text pairs: caption tokens and visual features in shards, written once.

Extracting or copying features is the expensive step, so it happens once, into a folder
keyed by a fingerprint of the inputs, the feature extractor and its settings; every later
run opens that folder and reads each pair per index, so memory does not grow with the
number of pairs.

Layout (format ``ptm-image-text/1``)::

    <dir>/manifest.json                 written last, atomically
    <dir>/vocab.txt | tokenizer.json    the tokenizer the caption ids come from (the data
                                        folder's, :mod:`ptm_multimodal.caption_tokenizer`)
    <dir>/shards/text-<k>.safetensors   pairs [k * P, (k + 1) * P): ``input_ids`` (T,)
                                        uint16/uint32, ``special_tokens_mask`` (T,) uint8,
                                        ``offsets`` (n + 1,) int64 local token offsets,
                                        ``image`` (n,) int64 global image number,
                                        ``caption_hash`` (n,) int64 (equal captions, equal hash)
    <dir>/shards/features-<k>.safetensors
                                        images [k * I, (k + 1) * I): ``features`` (R, D) and
                                        ``boxes`` (R, 4) float32 (pixels), ``classes`` (R, C)
                                        when the detector gives them, ``offsets`` (m + 1,)
                                        int64 (each image's first region and count), ``sizes``
                                        (m, 2) int64 width, height
    <dir>/shards/<name>.json            the shard's record (count, size, sha256), written
                                        after the shard: a shard with a valid record is done

``manifest.json``: ``{"format", "fingerprint", "inputs", "settings", "feature_spec",
"dtype", "text_shards": [{"name", "pairs", "tokens", "size", "sha256"}],
"feature_shards": [{"name", "images", "regions", "size", "sha256"}], "totals"}``.

Each image is stored once however many captions it has. Shards are written atomically
(:func:`ptm_core.atomic.save_safetensors`) and their content depends only on the inputs,
so a run killed at any point resumes with the shards it finished, and the result equals a
clean run. Features come from ``features.json`` + ``features.safetensors`` beside
``pairs.jsonl`` (precomputed regions, streamed one image at a time), or from the images
themselves through a timm backbone (:class:`GridExtraction`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import load_file as load_numpy
from safetensors.numpy import save as save_numpy

from ptm_core.atomic import atomic_write_bytes, atomic_write_text
from ptm_core.data.errors import DataError
from ptm_core.data.lines import iter_lines
from ptm_core.data.prepare import preparation_lock, remove_temporary_files
from ptm_core.data.prepared import token_dtype
from ptm_core.data.sources import file_sha256
from ptm_multimodal.caption_tokenizer import (
    caption_tokenizer_file,
    copy_caption_tokenizer,
    load_caption_tokenizer,
)
from ptm_multimodal.data import (
    CaptionTokens,
    ImageTextError,
    ImageTextPair,
    _image_text_error,
    parse_pair_line,
)
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.region_features import (
    ImageRegions,
    RegionEntry,
    _unreadable,
    check_boxes,
    check_finite_regions,
    check_region_shapes,
    read_region_index,
)

if TYPE_CHECKING:
    from ptm_core.finetune.data.task_tokenizer import TaskTokenizer

logger = logging.getLogger(__name__)

FORMAT = "ptm-image-text/1"
MANIFEST = "manifest.json"
SHARDS_DIR = "shards"
PAIRS_PER_SHARD = 8192
IMAGES_PER_SHARD = 1024
_OPEN_SHARDS = 16  # shards kept open per process (text arrays loaded, features mapped)


class PreparedImageTextError(DataError):
    """A prepared image-text folder is missing, of another format, or damaged.

    Arguments and message format: :class:`ptm_core.data.errors.DataError`.
    """


def _rebuild(path: Path) -> str:
    return (
        f"delete {path.name} and run again (or run `python -m ptm_multimodal.prepared "
        "DATA_DIR --output DIR`): only the missing shard is rebuilt"
    )


@dataclass(frozen=True)
class GridExtraction:
    """Settings to extract grid features from the images named in ``pairs.jsonl``.

    Args:
        backbone: a timm model name (``"resnet10t"``, ...).
        image_size: images are resized to ``image_size x image_size`` RGB.
        pool: adaptive-pool the feature map to ``(h, w)`` cells (``None``: keep it).
        weights: a local weights file; ``None`` initialises the backbone from ``seed``.
        seed: the initialisation seed of a backbone without ``weights``.
        batch_size: images per forward pass.
    """

    backbone: str
    image_size: int = 224
    pool: tuple[int, int] | None = None
    weights: str | None = None
    seed: int = 0
    batch_size: int = 32

    def build(self) -> Any:
        """The :class:`~ptm_multimodal.grid_features.GridFeatureExtractor` (eval mode)."""
        from ptm_multimodal.grid_features import GridFeatureExtractor

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            extractor = GridFeatureExtractor(
                self.backbone, weights=self.weights, pool=None if self.pool is None else self.pool
            )
        return extractor.eval()

    def key(self) -> dict[str, Any]:
        """What the features depend on (the weights file by content)."""
        key = asdict(self)
        key.pop("batch_size")
        key["pool"] = None if self.pool is None else list(self.pool)
        if self.weights is not None:
            key["weights"] = file_sha256(Path(self.weights))
        return key


# ---------------------------------------------------------------------- fingerprint


def image_text_fingerprint(
    directory: str | os.PathLike[str],
    *,
    max_length: int = 32,
    extraction: GridExtraction | None = None,
    pairs_per_shard: int = PAIRS_PER_SHARD,
    images_per_shard: int = IMAGES_PER_SHARD,
) -> str:
    """SHA-256 of the inputs' contents, the feature extractor and the settings.

    Inputs: ``pairs.jsonl`` and ``vocab.txt`` (or ``tokenizer.json``), plus ``features.json`` and
    ``features.safetensors`` (precomputed features) or, with ``extraction``, the images'
    sizes and modification times (hashing every image would cost as much as a pass of the
    backbone).
    """
    root = Path(directory)
    inputs: dict[str, Any] = {"pairs.jsonl": file_sha256(_required(root / "pairs.jsonl"))}
    caption_file = caption_tokenizer_file(root)
    # vocab.txt keeps its key: folders prepared before tokenizer.json keep their fingerprint.
    inputs[caption_file.name] = file_sha256(caption_file)
    if extraction is None:
        for name in ("features.json", "features.safetensors"):
            inputs[name] = file_sha256(_required(root / name))
    else:
        digest = hashlib.sha256()
        for _, image_id, path in _image_paths(root):
            stat = path.stat()
            digest.update(f"{image_id}\0{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        inputs["images"] = digest.hexdigest()
    key = {
        "format": FORMAT,
        "inputs": inputs,
        "extraction": None if extraction is None else extraction.key(),
        "settings": {
            "max_length": max_length,
            "pairs_per_shard": pairs_per_shard,
            "images_per_shard": images_per_shard,
        },
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _required(path: Path) -> Path:
    if not path.is_file():
        raise ImageTextError(f"{path}: missing; see data_specs/image_text/README.md")
    return path


def _iter_pairs(root: Path) -> Iterator[tuple[int, ImageTextPair]]:
    path = _required(root / "pairs.jsonl")
    for number, line in iter_lines(path, _image_text_error):
        pair = parse_pair_line(path, number, line)
        if pair is not None:
            yield number, pair


def _image_paths(root: Path) -> Iterator[tuple[int, str, Path]]:
    """``(line, image_id, file)`` of each image, at its first pair (extraction mode)."""
    pairs = root / "pairs.jsonl"
    seen: set[str] = set()
    for number, pair in _iter_pairs(root):
        if pair.image_id in seen:
            continue
        seen.add(pair.image_id)
        if pair.image is None:
            raise _image_text_error(
                pairs,
                number,
                "image",
                f"missing for image_id {pair.image_id!r}, and features are extracted from "
                "the images",
                'add "image": "<path relative to the dataset>" to the line, or use '
                "precomputed features (features.json + features.safetensors, extraction=None)",
            )
        path = root / pair.image
        if not path.is_file():
            raise _image_text_error(
                pairs,
                number,
                "image",
                f"{path} does not exist",
                "add the image file, correct the path (relative to the dataset folder), or "
                "drop the line",
            )
        yield number, pair.image_id, path


# ---------------------------------------------------------------------- writing


def _shard_done(out: Path, name: str, fingerprint: str) -> dict[str, Any] | None:
    """The record of a shard finished for these inputs whose file is intact, else ``None``."""
    record_path = out / SHARDS_DIR / f"{name}.json"
    shard = out / SHARDS_DIR / f"{name}.safetensors"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if (
            record["fingerprint"] == fingerprint
            and shard.stat().st_size == record["size"]
            and file_sha256(shard) == record["sha256"]
        ):
            return dict(record)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _write_shard(
    out: Path, name: str, fingerprint: str, arrays: dict[str, np.ndarray], **counts: int
) -> dict:
    data = save_numpy({k: np.ascontiguousarray(v) for k, v in arrays.items()})
    atomic_write_bytes(out / SHARDS_DIR / f"{name}.safetensors", data)
    digest = hashlib.sha256(data).hexdigest()
    record = {
        "name": name,
        **counts,
        "size": len(data),
        "sha256": digest,
        "fingerprint": fingerprint,
    }
    atomic_write_text(out / SHARDS_DIR / f"{name}.json", json.dumps(record, sort_keys=True) + "\n")
    return record


def _chunks(items: Sequence[Any], size: int) -> Iterator[tuple[int, Sequence[Any]]]:
    for k, start in enumerate(range(0, len(items), size)):
        yield k, items[start : start + size]


def _feature_arrays(regions: Sequence[ImageRegions], with_classes: bool) -> dict[str, np.ndarray]:
    counts = [len(r.features) for r in regions]
    offsets = np.zeros(len(regions) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    arrays = {
        "features": torch.cat([r.features.float() for r in regions]).numpy(),
        "boxes": torch.cat([r.boxes.float() for r in regions]).numpy(),
        "offsets": offsets,
        "sizes": np.asarray([[r.width, r.height] for r in regions], dtype=np.int64),
    }
    if with_classes:
        arrays["classes"] = torch.cat([r.classes.float() for r in regions]).numpy()  # type: ignore[union-attr]
    return arrays


def _prepare_regions(
    root: Path, out: Path, per_shard: int, fingerprint: str
) -> tuple[FeatureSpec, list, list]:
    """Copy precomputed region features into feature shards, one shard of images at a time."""
    index = read_region_index(root)
    handle = None
    records = []
    try:
        for k, entries in _chunks(index.entries, per_shard):
            name = f"features-{k:05d}"
            record = _shard_done(out, name, fingerprint)
            if record is None:
                if handle is None:
                    try:
                        handle = safe_open(str(index.tensors_path), framework="pt")
                    except Exception as exc:  # a cut-off file: safetensors' own error type
                        raise _unreadable(index.tensors_path, exc) from None
                    slices = {key: handle.get_slice(key) for key in handle.keys()}  # noqa: SIM118
                    shapes = {key: tuple(s.get_shape()) for key, s in slices.items()}
                    check_region_shapes(index, shapes)
                regions = [_read_entry(slices, e, index.spec, index.tensors_path) for e in entries]
                arrays = _feature_arrays(regions, index.spec.num_classes is not None)
                record = _write_shard(
                    out,
                    name,
                    fingerprint,
                    arrays,
                    images=len(entries),
                    regions=int(arrays["offsets"][-1]),
                )
            records.append(record)
    finally:
        del handle
    return index.spec, [e.image_id for e in index.entries], records


def _read_entry(slices: dict, entry: RegionEntry, spec: FeatureSpec, path: Path) -> ImageRegions:
    try:
        boxes = slices["boxes"][entry.start : entry.stop]
        features = slices["features"][entry.start : entry.stop]
        classes = (
            slices["classes"][entry.start : entry.stop] if spec.num_classes is not None else None
        )
    except Exception as exc:
        raise _unreadable(path, exc) from None
    check_boxes(entry, boxes)
    check_finite_regions(entry, path, {"features": features, "boxes": boxes})
    return ImageRegions(features, boxes, entry.width, entry.height, classes)


def _load_image(path: Path, size: int) -> torch.Tensor:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            rgb = image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    except (OSError, UnidentifiedImageError) as exc:
        raise ImageTextError(
            f"{path}: cannot read the image ({exc}); replace the file or drop its pairs"
        ) from None
    return torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1)


def _prepare_grid(
    root: Path, out: Path, per_shard: int, extraction: GridExtraction, fingerprint: str
) -> tuple[FeatureSpec, list, list]:
    """Run the backbone over every image once and store its grid cells as regions."""
    images = [(image_id, path) for _, image_id, path in _image_paths(root)]
    extractor = None
    records = []
    for k, chunk in _chunks(images, per_shard):
        name = f"features-{k:05d}"
        record = _shard_done(out, name, fingerprint)
        if record is None:
            extractor = extractor or extraction.build()
            regions: list[ImageRegions] = []
            for start in range(0, len(chunk), extraction.batch_size):
                part = chunk[start : start + extraction.batch_size]
                pixels = torch.stack([_load_image(p, extraction.image_size) for _, p in part])
                with torch.no_grad():
                    feats = extractor(pixels.float() / 255.0)
                for row in range(len(part)):
                    regions.append(
                        ImageRegions(
                            feats.features[row].float(),
                            feats.boxes[row].float(),
                            extraction.image_size,
                            extraction.image_size,
                        )
                    )
            arrays = _feature_arrays(regions, with_classes=False)
            record = _write_shard(
                out,
                name,
                fingerprint,
                arrays,
                images=len(chunk),
                regions=int(arrays["offsets"][-1]),
            )
        records.append(record)
    spec = (extractor or extraction.build()).feature_spec()
    spec = FeatureSpec(
        extractor=f"{spec.extractor}:{extraction.image_size}px",
        feature_size=spec.feature_size,
        extractor_hash=spec.extractor_hash,
    )
    return spec, [image_id for image_id, _ in images], records


def caption_hash(caption: str) -> int:
    """A signed 64-bit digest of a caption's text (negatives need a *different* caption)."""
    return int.from_bytes(
        hashlib.blake2b(caption.encode(), digest_size=8).digest(), "little", signed=True
    )


def _prepare_text(
    root: Path,
    out: Path,
    tokenizer: TaskTokenizer,
    image_numbers: dict[str, int],
    *,
    max_length: int,
    per_shard: int,
    dtype: np.dtype,
    features_file: Path,
    fingerprint: str,
) -> list[dict[str, Any]]:
    """Encode every caption once into text shards; check every pair names a known image."""
    pairs_path = root / "pairs.jsonl"
    records: list[dict[str, Any]] = []
    pending: list[ImageTextPair] = []

    def flush() -> None:
        name = f"text-{len(records):05d}"
        record = _shard_done(out, name, fingerprint)
        if record is None:
            ids: list[np.ndarray] = []
            special: list[np.ndarray] = []
            # encoded in slices: a TokenizedText (pieces, offsets) costs far more than its ids
            for start in range(0, len(pending), 512):
                part = [p.caption for p in pending[start : start + 512]]
                for e in tokenizer.encode_batch(part, max_length=max_length):
                    ids.append(np.asarray(e.input_ids, dtype))
                    special.append(np.asarray(e.special_tokens_mask, np.uint8))
            offsets = np.zeros(len(ids) + 1, dtype=np.int64)
            np.cumsum([len(i) for i in ids], out=offsets[1:])
            arrays = {
                "input_ids": np.concatenate(ids),
                "special_tokens_mask": np.concatenate(special),
                "offsets": offsets,
                "image": np.asarray([image_numbers[p.image_id] for p in pending], np.int64),
                "caption_hash": np.asarray([caption_hash(p.caption) for p in pending], np.int64),
            }
            record = _write_shard(
                out, name, fingerprint, arrays, pairs=len(pending), tokens=int(offsets[-1])
            )
        records.append(record)
        pending.clear()

    for number, pair in _iter_pairs(root):
        if pair.image_id not in image_numbers:
            raise ImageTextError(
                f"{pairs_path}:{number}: field 'image_id' {pair.image_id!r} has no entry in "
                f"{features_file}; extract features for it or drop the line"
            )
        pending.append(pair)
        if len(pending) == per_shard:
            flush()
    if pending:
        flush()
    if not records:
        raise ImageTextError(f"{pairs_path}: no pairs")
    return records


def prepare_image_text(
    directory: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    max_length: int = 32,
    extraction: GridExtraction | None = None,
    pairs_per_shard: int = PAIRS_PER_SHARD,
    images_per_shard: int = IMAGES_PER_SHARD,
    fingerprint: str | None = None,
) -> PreparedImageText:
    """Prepare a ``data_specs/image_text`` folder once into ``output_dir``.

    Finished shards are kept (a killed run resumes with them); a folder whose manifest has
    this fingerprint and whose shards are all there is opened as it is.

    Args:
        directory: ``pairs.jsonl``, ``vocab.txt`` and either ``features.json`` +
            ``features.safetensors`` or the images named by each pair's ``image``.
        output_dir: the prepared folder (see the module docstring).
        max_length: caption token limit, special tokens included.
        extraction: extract grid features from the images with these settings; ``None``
            copies the precomputed region features.
        pairs_per_shard: pairs per text shard.
        images_per_shard: images per feature shard.
        fingerprint: :func:`image_text_fingerprint` when already computed.

    Returns:
        The prepared pairs, open (every shard's checksum verified).

    Raises:
        ImageTextError: a bad line of ``pairs.jsonl`` (file:line and field), a missing or
            unreadable image (extraction).
        RegionFeatureError: bad precomputed features (file, field and fix).
        PreparedImageTextError: a damaged shard of an earlier preparation.
    """
    root, out = Path(directory), Path(output_dir)
    if fingerprint is None:
        fingerprint = image_text_fingerprint(
            root,
            max_length=max_length,
            extraction=extraction,
            pairs_per_shard=pairs_per_shard,
            images_per_shard=images_per_shard,
        )
    with preparation_lock(out):
        remove_temporary_files(out)
        manifest = _read_manifest_if_current(out, fingerprint)
        if manifest is not None:
            return PreparedImageText.open(out)
        (out / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
        caption_file = caption_tokenizer_file(root)
        tokenizer = load_caption_tokenizer(caption_file)
        if extraction is None:
            spec, image_ids, feature_records = _prepare_regions(
                root, out, images_per_shard, fingerprint
            )
            features_file = root / "features.json"
        else:
            spec, image_ids, feature_records = _prepare_grid(
                root, out, images_per_shard, extraction, fingerprint
            )
            features_file = root / "pairs.jsonl"
        image_numbers = {image_id: n for n, image_id in enumerate(image_ids)}
        dtype = token_dtype(tokenizer.vocab_info.vocab_size)
        text_records = _prepare_text(
            root,
            out,
            tokenizer,
            image_numbers,
            max_length=max_length,
            per_shard=pairs_per_shard,
            dtype=dtype,
            features_file=features_file,
            fingerprint=fingerprint,
        )
        del image_numbers, image_ids
        copy_caption_tokenizer(caption_file, out)
        manifest = {
            "format": FORMAT,
            "fingerprint": fingerprint,
            "inputs": str(root.resolve()),
            "settings": {
                "max_length": max_length,
                "pairs_per_shard": pairs_per_shard,
                "images_per_shard": images_per_shard,
                "extraction": None if extraction is None else extraction.key(),
            },
            "feature_spec": spec.to_dict(),
            "dtype": dtype.name,
            "text_shards": text_records,
            "feature_shards": feature_records,
            "totals": {
                "pairs": sum(r["pairs"] for r in text_records),
                "tokens": sum(r["tokens"] for r in text_records),
                "images": sum(r["images"] for r in feature_records),
                "regions": sum(r["regions"] for r in feature_records),
            },
        }
        atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        kept = {r["name"] for r in text_records + feature_records}
        for stale in (out / SHARDS_DIR).iterdir():  # shards of earlier inputs in this folder
            if stale.name.split(".")[0] not in kept and not stale.name.startswith("."):
                stale.unlink()
        logger.info("prepared %s into %s: %s", root, out, manifest["totals"])
        # every shard was just written or checked
        return PreparedImageText(out, manifest)


def _read_manifest_if_current(out: Path, fingerprint: str) -> dict[str, Any] | None:
    """The manifest when it has ``fingerprint`` and every shard file is there."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("fingerprint") != fingerprint:
        return None
    shards = manifest.get("text_shards", []) + manifest.get("feature_shards", [])
    if all((out / SHARDS_DIR / f"{s['name']}.safetensors").is_file() for s in shards):
        return manifest
    return None


def image_text_cache_dir(cache_root: str | os.PathLike[str], fingerprint: str) -> Path:
    """``<cache_root>/image-text-<first 16 hex digits of the fingerprint>``."""
    return Path(cache_root) / f"image-text-{fingerprint[:16]}"


def open_image_text(
    directory: str | os.PathLike[str],
    *,
    max_length: int = 32,
    extraction: GridExtraction | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> PreparedImageText:
    """Prepare ``directory`` into the cache (once) and open it.

    The folder is ``<cache_dir>/image-text-<fingerprint>`` (default cache:
    ``$PTM_CACHE_DIR/prepared`` or ``~/.cache/ptm/prepared``): the same inputs, extractor
    and settings always find the features extracted before.
    """
    if cache_dir is None:
        from ptm_core.pretraining import default_cache_dir

        cache_dir = default_cache_dir()
    fingerprint = image_text_fingerprint(directory, max_length=max_length, extraction=extraction)
    target = image_text_cache_dir(cache_dir, fingerprint)
    return prepare_image_text(
        directory, target, max_length=max_length, extraction=extraction, fingerprint=fingerprint
    )


# ---------------------------------------------------------------------- reading


class PreparedImageText:
    """Prepared pairs opened read-only: :class:`~ptm_multimodal.data.PairRows` per index.

    Opening reads the manifest and two ``int64 (K + 1,)`` arrays of shard bases. A text
    shard's small arrays are loaded when first read, a feature shard is memory-mapped
    (``safe_open``) and sliced per image; at most 16 shards of each kind stay open. The
    object pickles without its open shards, so DataLoader workers open their own.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.directory = directory
        self.manifest = manifest
        self.spec = FeatureSpec.from_dict(manifest["feature_spec"], source=str(directory))
        self._text_names = [s["name"] for s in manifest["text_shards"]]
        self._feature_names = [s["name"] for s in manifest["feature_shards"]]
        self._pair_bases = _bases([s["pairs"] for s in manifest["text_shards"]])
        self._image_bases = _bases([s["images"] for s in manifest["feature_shards"]])
        self._texts: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._features: OrderedDict[int, tuple[Any, np.ndarray, np.ndarray]] = OrderedDict()

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, verify: bool = True) -> PreparedImageText:
        """Open a prepared folder, checking every shard's size and (``verify``) SHA-256.

        Raises:
            PreparedImageTextError: no manifest, another format, or a missing, truncated or
                damaged shard (named, with the fix).
        """
        path = Path(directory)
        manifest_path = path / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PreparedImageTextError(
                manifest_path,
                None,
                "manifest",
                f"cannot be read ({exc})",
                "prepare the pairs (python -m ptm_multimodal.prepared DATA_DIR --output DIR)",
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise PreparedImageTextError(
                manifest_path,
                None,
                "format",
                f"not {FORMAT!r}",
                "prepare the pairs again with this version of ptm",
            )
        for shard in manifest["text_shards"] + manifest["feature_shards"]:
            file = path / SHARDS_DIR / f"{shard['name']}.safetensors"
            if not file.is_file():
                raise PreparedImageTextError(file, None, "path", "shard is missing", _rebuild(file))
            if file.stat().st_size != shard["size"]:
                raise PreparedImageTextError(
                    file,
                    None,
                    "size",
                    f"holds {file.stat().st_size} bytes, the manifest says {shard['size']}",
                    _rebuild(file),
                )
            if verify and file_sha256(file) != shard["sha256"]:
                raise PreparedImageTextError(
                    file,
                    None,
                    "sha256",
                    "checksum does not match the manifest's (the shard is damaged or was changed)",
                    _rebuild(file),
                )
        return cls(path, manifest)

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    @property
    def vocab_path(self) -> Path:
        """The ``vocab.txt`` or ``tokenizer.json`` the caption ids come from."""
        return caption_tokenizer_file(self.directory)

    @property
    def num_images(self) -> int:
        return int(self._image_bases[-1])

    def __len__(self) -> int:
        return int(self._pair_bases[-1])

    def __repr__(self) -> str:
        return f"PreparedImageText({str(self.directory)!r}, pairs={len(self)}, images={self.num_images})"

    def _text(self, index: int) -> tuple[dict[str, np.ndarray], int]:
        if not 0 <= index < len(self):
            raise IndexError(f"pair {index} out of range [0, {len(self)})")
        k = int(np.searchsorted(self._pair_bases, index, side="right")) - 1
        shard = self._texts.get(k)
        if shard is None:
            shard = load_numpy(
                str(self.directory / SHARDS_DIR / f"{self._text_names[k]}.safetensors")
            )
            self._texts[k] = shard
            if len(self._texts) > _OPEN_SHARDS:
                self._texts.popitem(last=False)
        else:
            self._texts.move_to_end(k)
        return shard, index - int(self._pair_bases[k])

    def caption_key(self, index: int) -> object:
        shard, local = self._text(index)
        return int(shard["caption_hash"][local])

    def caption(self, index: int) -> CaptionTokens:
        shard, local = self._text(index)
        start, stop = int(shard["offsets"][local]), int(shard["offsets"][local + 1])
        n = stop - start
        return CaptionTokens(
            input_ids=shard["input_ids"][start:stop].tolist(),
            attention_mask=[1] * n,
            token_type_ids=[0] * n,
            special_tokens_mask=shard["special_tokens_mask"][start:stop].tolist(),
        )

    def image_of(self, index: int) -> int:
        """The image number of pair ``index``."""
        shard, local = self._text(index)
        return int(shard["image"][local])

    def regions(self, index: int) -> ImageRegions:
        image = self.image_of(index)
        k = int(np.searchsorted(self._image_bases, image, side="right")) - 1
        opened = self._features.get(k)
        if opened is None:
            handle = safe_open(
                str(self.directory / SHARDS_DIR / f"{self._feature_names[k]}.safetensors"),
                framework="pt",
            )
            opened = (
                handle,
                handle.get_tensor("offsets").numpy(),
                handle.get_tensor("sizes").numpy(),
            )
            self._features[k] = opened
            if len(self._features) > _OPEN_SHARDS:
                self._features.popitem(last=False)
        else:
            self._features.move_to_end(k)
        handle, offsets, sizes = opened
        local = image - int(self._image_bases[k])
        start, stop = int(offsets[local]), int(offsets[local + 1])
        classes = (
            handle.get_slice("classes")[start:stop] if self.spec.num_classes is not None else None
        )
        return ImageRegions(
            features=handle.get_slice("features")[start:stop],
            boxes=handle.get_slice("boxes")[start:stop],
            width=int(sizes[local, 0]),
            height=int(sizes[local, 1]),
            classes=classes,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_texts"] = OrderedDict()  # open shards are per process
        state["_features"] = OrderedDict()
        return state


def _bases(counts: list[int]) -> np.ndarray:
    bases = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=bases[1:])
    return bases


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="a data_specs/image_text folder")
    parser.add_argument("--output", help="the prepared folder (default: the cache)")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--backbone", help="extract grid features with this timm backbone")
    parser.add_argument("--image-size", type=int, default=224)
    args = parser.parse_args(argv)
    extraction = None if args.backbone is None else GridExtraction(args.backbone, args.image_size)
    if args.output is None:
        prepared = open_image_text(args.data_dir, max_length=args.max_length, extraction=extraction)
    else:
        prepared = prepare_image_text(
            args.data_dir, args.output, max_length=args.max_length, extraction=extraction
        )
    print(prepared)


if __name__ == "__main__":
    main()


__all__ = [
    "FORMAT",
    "GridExtraction",
    "PreparedImageText",
    "PreparedImageTextError",
    "caption_hash",
    "image_text_cache_dir",
    "image_text_fingerprint",
    "open_image_text",
    "prepare_image_text",
]
