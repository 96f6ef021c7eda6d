"""Precomputed region features (detector outputs) stored under a spec directory.

Layout (see ``data_specs/image_text/README.md``)::

    features.json          {"format": "ptm-region-features/1", "spec": FeatureSpec,
                            "images": [{"image_id", "width", "height", "num_regions"}, ...]}
    features.safetensors   features (N_total, D) float32, boxes (N_total, 4) float32 pixels,
                           classes (N_total, C) float32 (only when spec.num_classes is set)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import Tensor

from ptm_core.atomic import atomic_write_text, save_safetensors
from ptm_core.data.lines import read_utf8
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.visual_features import VisualFeatures

FORMAT = "ptm-region-features/1"
SPEC_README = "data_specs/image_text/README.md"


class RegionFeatureError(ValueError):
    """A region-feature file is malformed; the message names the file, entry and field."""


def _region_error(
    path: Path, line: int | None, field_name: str, problem: str, fix: str
) -> RegionFeatureError:
    where = str(path) if line is None else f"{path}:{line}"
    return RegionFeatureError(f"{where}: field {field_name!r}: {problem}; {fix}")


@dataclass
class ImageRegions:
    """The regions of one image.

    Attributes:
        features: ``(N, D)``.
        boxes: ``(N, 4)`` pixel boxes ``[x1, y1, x2, y2]``.
        width: image width in pixels.
        height: image height in pixels.
        classes: ``(N, C)`` class distribution (rows sum to 1) or ``None``.
    """

    features: Tensor
    boxes: Tensor
    width: int
    height: int
    classes: Tensor | None = None


@dataclass
class RegionFeatureSet:
    """Region features of many images plus the :class:`FeatureSpec` that made them."""

    spec: FeatureSpec
    images: dict[str, ImageRegions]

    def __getitem__(self, image_id: str) -> ImageRegions:
        return self.images[image_id]

    def __len__(self) -> int:
        return len(self.images)


def write_region_features(directory: str | Path, feature_set: RegionFeatureSet) -> Path:
    """Write ``features.json`` + ``features.safetensors`` into ``directory``.

    The safetensors file is written first, the JSON index last (atomically), so a reader
    never sees an index without its tensors.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = list(feature_set.images)
    regions = [feature_set.images[i] for i in ids]
    tensors = {
        "features": torch.cat([r.features.float() for r in regions]).contiguous(),
        "boxes": torch.cat([r.boxes.float() for r in regions]).contiguous(),
    }
    if feature_set.spec.num_classes is not None:
        tensors["classes"] = torch.cat([r.classes.float() for r in regions]).contiguous()  # type: ignore[union-attr]
    save_safetensors(tensors, directory / "features.safetensors")
    index = {
        "format": FORMAT,
        "spec": feature_set.spec.to_dict(),
        "images": [
            {"image_id": i, "width": r.width, "height": r.height, "num_regions": len(r.features)}
            for i, r in zip(ids, regions, strict=True)
        ],
    }
    atomic_write_text(directory / "features.json", json.dumps(index, indent=1) + "\n")
    return directory


@dataclass(frozen=True)
class RegionEntry:
    """One image of ``features.json``: where its regions lie in the tensors.

    Attributes:
        image_id: the image's id.
        width: image width in pixels.
        height: image height in pixels.
        start: first row of its regions in the ``features``/``boxes`` tensors.
        stop: one past its last row.
        where: ``features.json:<line>: images[<n>]``, for messages.
    """

    image_id: str
    width: int
    height: int
    start: int
    stop: int
    where: str


@dataclass
class RegionIndex:
    """``features.json`` of a region-feature directory, checked, with no tensor loaded."""

    spec: FeatureSpec
    entries: list[RegionEntry]
    index_path: Path
    tensors_path: Path


def read_region_index(directory: str | Path) -> RegionIndex:
    """Read and check ``features.json`` (entries, spec) without loading a tensor.

    Raises:
        RegionFeatureError: missing files, invalid UTF-8 or JSON, another format, a bad
            spec, or a bad or repeated entry (``features.json:line``).
    """
    directory = Path(directory)
    index_path = directory / "features.json"
    tensors_path = directory / "features.safetensors"
    for path in (index_path, tensors_path):
        if not path.is_file():
            raise RegionFeatureError(
                f"{path}: missing; a region-feature directory needs features.json and "
                "features.safetensors (see data_specs/image_text/README.md)"
            )
    text = read_utf8(index_path, _region_error)
    try:
        index = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RegionFeatureError(f"{index_path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(index, dict):
        raise RegionFeatureError(f"{index_path}: not a JSON object; see {SPEC_README}")
    if index.get("format") != FORMAT:
        raise RegionFeatureError(
            f"{index_path}: field 'format' is {index.get('format')!r}, expected {FORMAT!r}"
        )
    try:
        spec = FeatureSpec.from_dict(index.get("spec", {}), source=f"{index_path}: spec")
    except ValueError as exc:
        raise RegionFeatureError(str(exc)) from None
    entries: list[RegionEntry] = []
    first_seen: dict[str, str] = {}
    start = 0
    search_from = 0
    line = 1  # lines are counted on from the previous entry: linear, not quadratic
    for number, entry in enumerate(index.get("images", [])):
        label, where = f"images[{number}]", f"{index_path}: images[{number}]"
        # The entry's line: where its "image_id" key sits (entries are in file order).
        pos = text.find('"image_id"', search_from)
        if pos >= 0:
            line += text.count("\n", search_from, pos)
            search_from = pos + 1
            label, where = f"line {line}, {label}", f"{index_path}:{line}: {label}"
        if not isinstance(entry, dict):
            raise RegionFeatureError(f"{where}: not a JSON object")
        for key in ("image_id", "width", "height", "num_regions"):
            if key not in entry:
                raise RegionFeatureError(f"{where}: field {key!r} is missing")
        image_id = str(entry["image_id"])
        # Checked before the region counts: a repeated entry would otherwise surface as a
        # confusing "regions run past the tensors" error.
        if image_id in first_seen:
            raise RegionFeatureError(
                f"{where}: field 'image_id': duplicate image_id {image_id!r} (first at "
                f"{first_seen[image_id]}); list each image once"
            )
        first_seen[image_id] = label
        end = start + int(entry["num_regions"])
        entries.append(
            RegionEntry(image_id, int(entry["width"]), int(entry["height"]), start, end, where)
        )
        start = end
    return RegionIndex(spec=spec, entries=entries, index_path=index_path, tensors_path=tensors_path)


def _unreadable(tensors_path: Path, exc: Exception) -> RegionFeatureError:
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())
    return RegionFeatureError(
        f"{tensors_path}: cannot read the region tensors ({reason}); the file is truncated "
        "or damaged. Regenerate it by running the feature extraction again "
        "(write_region_features), or `python -m ptm_multimodal.synthetic DIR` for a "
        "synthetic set"
    )


def check_region_shapes(index: RegionIndex, shapes: dict[str, tuple[int, ...]]) -> None:
    """Check the tensors' shapes (``name -> shape``) against ``features.json``.

    Raises:
        RegionFeatureError: a missing tensor, a feature width other than
            ``spec.feature_size``, classes that disagree with ``spec.num_classes``, or
            region counts that disagree with the tensors; the message names the file, the
            field and the fix.
    """
    spec, index_path, tensors_path = index.spec, index.index_path, index.tensors_path
    features, boxes = shapes.get("features"), shapes.get("boxes")
    if features is None or boxes is None:
        raise RegionFeatureError(f"{tensors_path}: needs tensors 'features' and 'boxes'")
    if len(features) != 2 or features[1] != spec.feature_size:
        raise RegionFeatureError(
            f"{tensors_path}: field 'features' has shape {tuple(features)} but "
            f"{index_path} spec.feature_size is {spec.feature_size}; re-extract the features "
            f"with {spec.extractor!r}, or correct spec.feature_size in {index_path.name} if "
            "the tensors are right"
        )
    if len(boxes) != 2 or boxes[1] != 4 or boxes[0] != features[0]:
        raise RegionFeatureError(
            f"{tensors_path}: field 'boxes' has shape {tuple(boxes)}; expected "
            f"({features[0]}, 4), one [x1, y1, x2, y2] box per region"
        )
    classes = shapes.get("classes")
    if spec.num_classes is not None and (classes is None or classes[1] != spec.num_classes):
        raise RegionFeatureError(
            f"{tensors_path}: spec.num_classes is {spec.num_classes} but 'classes' is "
            f"{None if classes is None else tuple(classes)}"
        )
    total = features[0]
    for entry in index.entries:
        if entry.stop > total:
            raise RegionFeatureError(
                f"{entry.where}: field 'num_regions' runs past the {total} stored regions"
            )
    stored = index.entries[-1].stop if index.entries else 0
    if stored != total:
        raise RegionFeatureError(
            f"{index_path}: the images list {stored} regions but the tensors hold {total}"
        )


def check_boxes(entry: RegionEntry, boxes: Tensor) -> None:
    """Raise :class:`RegionFeatureError` when a box of ``entry`` lies outside its image."""
    w, h = entry.width, entry.height
    if len(boxes) and (
        bool((boxes < 0).any()) or bool((boxes[:, 2] > w).any()) or bool((boxes[:, 3] > h).any())
    ):
        raise RegionFeatureError(f"{entry.where}: a box lies outside the {w}x{h} image")


def check_finite_regions(entry: RegionEntry, path: Path, tensors: dict[str, Tensor]) -> None:
    """Raise :class:`RegionFeatureError` when a feature or box of ``entry`` is NaN or inf.

    Checked once, where an image's rows are read, so training never meets them: one NaN
    feature turns every loss of its batch into NaN.
    """
    for name, values in tensors.items():
        if values.is_floating_point() and len(values) and not bool(values.isfinite().all()):
            row = int((~values.reshape(len(values), -1).isfinite()).any(dim=1).nonzero()[0])
            raise RegionFeatureError(
                f"{path}: tensor {name!r} holds a non-finite value (NaN or inf) in region {row} "
                f"of image {entry.image_id!r} ({entry.where}); recompute that image's features"
            )


def iter_region_features(index: RegionIndex) -> Iterator[tuple[RegionEntry, ImageRegions]]:
    """Yield every image's regions, read one image at a time from the safetensors file.

    Nothing but one image's rows is in memory at once (``safe_open`` slices), so a
    feature file of any size streams.

    Raises:
        RegionFeatureError: as :func:`check_region_shapes`, a box outside its image, or a
            truncated or damaged tensor file.
    """
    try:
        handle = safe_open(str(index.tensors_path), framework="pt")
    except Exception as exc:  # safetensors raises its own error type for a cut-off file
        raise _unreadable(index.tensors_path, exc) from None
    with handle:
        slices = {key: handle.get_slice(key) for key in handle.keys()}  # noqa: SIM118
        check_region_shapes(index, {k: tuple(v.get_shape()) for k, v in slices.items()})
        classes = slices.get("classes") if index.spec.num_classes is not None else None
        for entry in index.entries:
            try:
                box = slices["boxes"][entry.start : entry.stop]
                features = slices["features"][entry.start : entry.stop]
                cls = None if classes is None else classes[entry.start : entry.stop]
            except Exception as exc:
                raise _unreadable(index.tensors_path, exc) from None
            check_boxes(entry, box)
            check_finite_regions(entry, index.tensors_path, {"features": features, "boxes": box})
            yield (
                entry,
                ImageRegions(
                    features=features,
                    boxes=box,
                    width=entry.width,
                    height=entry.height,
                    classes=cls,
                ),
            )


def read_region_features(directory: str | Path) -> RegionFeatureSet:
    """Read and validate a region-feature directory.

    Raises:
        RegionFeatureError: missing files, invalid UTF-8 or JSON, a bad or repeated index
            entry (``features.json:line``), a truncated or damaged ``features.safetensors``,
            tensor shapes that disagree with ``spec.feature_size``/``num_classes``, or boxes
            outside the image.
    """
    index = read_region_index(directory)
    try:
        tensors = load_file(str(index.tensors_path))
    except Exception as exc:  # safetensors raises its own error type for a cut-off file
        raise _unreadable(index.tensors_path, exc) from None
    check_region_shapes(index, {k: tuple(v.shape) for k, v in tensors.items()})
    features, boxes = tensors["features"], tensors["boxes"]
    classes = tensors.get("classes") if index.spec.num_classes is not None else None
    images: dict[str, ImageRegions] = {}
    for entry in index.entries:
        box = boxes[entry.start : entry.stop]
        check_boxes(entry, box)
        check_finite_regions(
            entry,
            index.tensors_path,
            {"features": features[entry.start : entry.stop], "boxes": box},
        )
        images[entry.image_id] = ImageRegions(
            features=features[entry.start : entry.stop],
            boxes=box,
            width=entry.width,
            height=entry.height,
            classes=None if classes is None else classes[entry.start : entry.stop],
        )
    return RegionFeatureSet(spec=index.spec, images=images)


def stack_regions(regions: Sequence[ImageRegions], *, with_classes: bool = True):
    """Pad a list of :class:`ImageRegions` into a :class:`VisualFeatures` batch."""
    batch, most = len(regions), max(1, max(len(r.features) for r in regions))
    dim = regions[0].features.shape[1]
    features = torch.zeros(batch, most, dim)
    boxes = torch.zeros(batch, most, 4)
    mask = torch.zeros(batch, most, dtype=torch.bool)
    has_classes = with_classes and all(r.classes is not None for r in regions)
    classes = torch.zeros(batch, most, regions[0].classes.shape[1]) if has_classes else None  # type: ignore[union-attr]
    for i, r in enumerate(regions):
        n = len(r.features)
        features[i, :n] = r.features
        boxes[i, :n] = r.boxes
        mask[i, :n] = True
        if classes is not None:
            classes[i, :n] = r.classes  # type: ignore[assignment]
    sizes = torch.tensor([[r.width, r.height] for r in regions], dtype=torch.float32)
    return VisualFeatures(
        features=features, boxes=boxes, image_sizes=sizes, mask=mask, classes=classes
    )
