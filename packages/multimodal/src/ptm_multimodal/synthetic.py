"""A synthetic grounded image-text dataset: coloured shapes in spatial relations.

Every scene holds two to three shapes; the caption names two of them and how they are
placed (``"a red circle left of a blue square"``). Images are rendered with torch (no
files needed), and a *synthetic detector* turns each shape into a region: a noisy feature
vector that encodes colour and shape, its pixel box, and a class distribution over the
``len(COLORS) * len(SHAPES)`` colour-shape classes. Everything is a pure function of the
seed, so pre-training and evaluation run offline and reproducibly.

Run ``python -m ptm_multimodal.synthetic OUT_DIR --num-images 32`` to write a dataset in
the ``data_specs/image_text`` layout.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ptm_core.atomic import atomic_write_text
from ptm_multimodal.feature_spec import FeatureSpec, hash_text
from ptm_multimodal.region_features import ImageRegions, RegionFeatureSet, write_region_features

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 180, 60),
    "blue": (40, 70, 220),
    "yellow": (230, 210, 40),
    "purple": (150, 60, 190),
    "orange": (240, 140, 30),
}
SHAPES = ("circle", "square", "triangle")
RELATIONS = ("left of", "right of", "above", "below")
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
DETECTOR_NAME = "synthetic-detector-v1"
DETECTOR_FEATURE_SIZE = 32
NUM_CLASSES = len(COLORS) * len(SHAPES)


def vocabulary() -> list[str]:
    """Every token a synthetic caption uses, specials first (a BERT ``vocab.txt``)."""
    words = ["a", "of", "left", "right", "above", "below", *COLORS, *SHAPES]
    return [*SPECIAL_TOKENS, *words]


@dataclass
class Shape:
    """One object: colour and shape names, pixel box ``[x1, y1, x2, y2]``."""

    color: str
    shape: str
    box: tuple[int, int, int, int]

    @property
    def class_id(self) -> int:
        return list(COLORS).index(self.color) * len(SHAPES) + SHAPES.index(self.shape)


@dataclass
class Scene:
    """A rendered scene and its matching caption."""

    image_id: str
    shapes: list[Shape]
    caption: str
    size: int


def _place(rng: random.Random, size: int, relation: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Centres of the subject and object so that ``subject <relation> object`` holds."""
    margin, half = size // 8, size // 2
    lo, hi = margin + size // 10, size - margin - size // 10
    near = (lo, half - size // 10)
    far = (half + size // 10, hi)
    cross = rng.randint(lo, hi), rng.randint(lo, hi)
    a = rng.randint(*near)
    b = rng.randint(*far)
    if relation == "left of":
        return (a, cross[0]), (b, cross[1])
    if relation == "right of":
        return (b, cross[0]), (a, cross[1])
    if relation == "above":
        return (cross[0], a), (cross[1], b)
    return (cross[0], b), (cross[1], a)


def make_scene(index: int, seed: int, size: int = 64) -> Scene:
    """Scene ``index`` of the dataset drawn from ``seed`` (deterministic)."""
    rng = random.Random(f"{seed}:{index}")
    kinds = rng.sample([(c, s) for c in COLORS for s in SHAPES], 3)
    relation = rng.choice(RELATIONS)
    (sx, sy), (ox, oy) = _place(rng, size, relation)
    radius = size // 10
    shapes = [
        Shape(kinds[0][0], kinds[0][1], (sx - radius, sy - radius, sx + radius, sy + radius)),
        Shape(kinds[1][0], kinds[1][1], (ox - radius, oy - radius, ox + radius, oy + radius)),
    ]
    if rng.random() < 0.5:  # a distractor the caption does not mention, in a free corner
        corners = [
            (radius + 1, radius + 1),
            (size - radius - 1, radius + 1),
            (radius + 1, size - radius - 1),
            (size - radius - 1, size - radius - 1),
        ]
        corners.sort(
            key=lambda c: -min(abs(c[0] - x) + abs(c[1] - y) for x, y in ((sx, sy), (ox, oy)))
        )
        cx, cy = corners[0]
        small = radius * 2 // 3
        shapes.append(
            Shape(kinds[2][0], kinds[2][1], (cx - small, cy - small, cx + small, cy + small))
        )
    caption = f"a {kinds[0][0]} {kinds[0][1]} {relation} a {kinds[1][0]} {kinds[1][1]}"
    return Scene(image_id=f"scene{seed}-{index:05d}", shapes=shapes, caption=caption, size=size)


def render(scene: Scene) -> Tensor:
    """Draw a scene: ``(3, size, size)`` uint8 on a light grey background."""
    size = scene.size
    image = torch.full((3, size, size), 235, dtype=torch.uint8)
    ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for shape in scene.shapes:
        x1, y1, x2, y2 = shape.box
        cx, cy, r = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2
        if shape.shape == "circle":
            inside = (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r
        elif shape.shape == "square":
            inside = (xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2)
        else:  # upward triangle inside the box
            rel = (ys - y1) / max(y2 - y1, 1)
            inside = (ys >= y1) & (ys < y2) & ((xs - cx).abs() <= rel * r)
        color = torch.tensor(COLORS[shape.color], dtype=torch.uint8)[:, None]
        image[:, inside] = color
    return image


def detect(scene: Scene, generator: torch.Generator) -> ImageRegions:
    """The synthetic detector: one region per shape.

    Feature ``(32,)``: one-hot colour (6) and shape (3) plus Gaussian noise (std 0.3) on
    every dimension; class distribution: softmax of ``4 * one_hot(class) + N(0, 1)``.
    """
    n = len(scene.shapes)
    features = torch.randn(n, DETECTOR_FEATURE_SIZE, generator=generator) * 0.3
    logits = torch.randn(n, NUM_CLASSES, generator=generator)
    for i, shape in enumerate(scene.shapes):
        features[i, list(COLORS).index(shape.color)] += 1.0
        features[i, len(COLORS) + SHAPES.index(shape.shape)] += 1.0
        logits[i, shape.class_id] += 4.0
    order = torch.randperm(n, generator=generator)  # detectors return regions unordered
    boxes = torch.tensor([s.box for s in scene.shapes], dtype=torch.float32)
    return ImageRegions(
        features=features[order],
        boxes=boxes[order],
        width=scene.size,
        height=scene.size,
        classes=logits.softmax(-1)[order],
    )


def detector_spec() -> FeatureSpec:
    """The :class:`FeatureSpec` of :func:`detect`."""
    return FeatureSpec(
        extractor=DETECTOR_NAME,
        feature_size=DETECTOR_FEATURE_SIZE,
        extractor_hash=hash_text(f"{DETECTOR_NAME}:{sorted(COLORS)}:{SHAPES}:noise0.3"),
        num_classes=NUM_CLASSES,
    )


def synthetic_dataset(num_images: int, seed: int = 0, size: int = 64):
    """Scenes and their detector regions.

    Returns:
        ``(scenes, feature_set)``.
    """
    scenes = [make_scene(i, seed, size) for i in range(num_images)]
    generator = torch.Generator().manual_seed(seed)
    images = {s.image_id: detect(s, generator) for s in scenes}
    return scenes, RegionFeatureSet(spec=detector_spec(), images=images)


def noisy_caption(scene: Scene, seed: int, caption_noise: float) -> str:
    """The caption a weakly-supervised (web alt-text) pair would carry.

    With probability ``caption_noise`` (a pure function of ``seed`` and the scene) the
    caption is that of an unrelated scene, so it does not describe the image; otherwise
    the scene's own.
    """
    if not 0.0 <= caption_noise <= 1.0:
        raise ValueError(f"caption_noise must be in [0, 1], got {caption_noise}")
    rng = random.Random(f"{seed}:noise:{scene.image_id}")
    if rng.random() >= caption_noise:
        return scene.caption
    while True:
        other = make_scene(rng.randrange(1 << 30), seed + 7919, scene.size).caption
        if other != scene.caption:
            return other


def write_synthetic_dataset(
    directory: str | Path,
    num_images: int,
    *,
    seed: int = 0,
    size: int = 64,
    images: bool = False,
    caption_noise: float = 0.0,
) -> Path:
    """Write a dataset in the ``data_specs/image_text`` layout.

    Files: ``pairs.jsonl`` (one caption per image: its own, or with probability
    ``caption_noise`` an unrelated scene's, see :func:`noisy_caption`), ``features.json``
    + ``features.safetensors`` (synthetic detector regions), ``vocab.txt`` and, with
    ``images=True``, ``images/<image_id>.png``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    scenes, feature_set = synthetic_dataset(num_images, seed, size)
    write_region_features(directory, feature_set)
    lines = []
    for scene in scenes:
        caption = noisy_caption(scene, seed, caption_noise) if caption_noise else scene.caption
        row = {"image_id": scene.image_id, "caption": caption}
        if images:
            from PIL import Image

            (directory / "images").mkdir(exist_ok=True)
            rel = f"images/{scene.image_id}.png"
            Image.fromarray(render(scene).permute(1, 2, 0).numpy()).save(directory / rel)
            row["image"] = rel
        lines.append(json.dumps(row))
    atomic_write_text(directory / "vocab.txt", "\n".join(vocabulary()) + "\n")
    atomic_write_text(directory / "pairs.jsonl", "\n".join(lines) + "\n")
    return directory


def write_text_corpus(path: str | Path, num_lines: int, *, seed: int = 0) -> Path:
    """A text-only corpus over the scenes' vocabulary: each line one to three scene
    descriptions (of scenes no image shows), for VL-BERT's text-only rows."""
    rng = random.Random(f"text:{seed}")
    lines = []
    for i in range(num_lines):
        count = rng.randint(1, 3)
        lines.append(" ".join(make_scene(i * 3 + k, seed + 104729).caption for k in range(count)))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--num-images", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--images", action="store_true", help="also write PNG files")
    parser.add_argument(
        "--caption-noise",
        type=float,
        default=0.0,
        help="fraction of images whose caption is an unrelated scene's (web-like pairs)",
    )
    args = parser.parse_args(argv)
    write_synthetic_dataset(
        args.out_dir,
        args.num_images,
        seed=args.seed,
        size=args.size,
        images=args.images,
        caption_noise=args.caption_noise,
    )


if __name__ == "__main__":
    main()


# Fine-tuning tasks over the same scenes. Two colours per shape never occur in a
# fine-tuning training image; the dev questions and statements are about exactly those
# colour-shape combinations. Pre-training captions (``make_scene`` with any seed) contain
# all 18, so only a model that learnt word-region alignment in pre-training has seen them.
HELD_OUT_COMBOS: tuple[tuple[str, str], ...] = (
    ("red", "circle"),
    ("green", "circle"),
    ("blue", "square"),
    ("yellow", "square"),
    ("purple", "triangle"),
    ("orange", "triangle"),
)
# What a careless annotator answers instead (the VQA-style answer noise).
CONFUSABLE: dict[str, str] = {
    "red": "orange",
    "orange": "red",
    "yellow": "orange",
    "green": "yellow",
    "blue": "purple",
    "purple": "blue",
    "circle": "square",
    "square": "circle",
    "triangle": "square",
}
NUM_ANNOTATORS = 10
ANNOTATOR_NOISE = 0.15


def _held_out(shape: Shape) -> bool:
    return (shape.color, shape.shape) in HELD_OUT_COMBOS


def _annotators(rng: random.Random, answer: str) -> list[str]:
    """Ten annotators' answers: each gives the confusable answer with probability 0.15."""
    return [
        CONFUSABLE[answer] if rng.random() < ANNOTATOR_NOISE else answer
        for _ in range(NUM_ANNOTATORS)
    ]


def vqa_questions(scene: Scene, rng: random.Random) -> list[tuple[Shape, dict[str, object]]]:
    """The unambiguous questions about ``scene``: ``(target object, row)`` pairs.

    ``"what color is the <shape>"`` when one object has that shape, ``"what shape is the
    <color> object"`` when one object has that colour; ``answers`` are ten annotators'.
    """
    rows: list[tuple[Shape, dict[str, object]]] = []
    for target in scene.shapes:
        if sum(s.shape == target.shape for s in scene.shapes) == 1:
            question = f"what color is the {target.shape}"
            rows.append((target, {"question": question, "answers": _annotators(rng, target.color)}))
        if sum(s.color == target.color for s in scene.shapes) == 1:
            question = f"what shape is the {target.color} object"
            rows.append((target, {"question": question, "answers": _annotators(rng, target.shape)}))
    return rows


def match_statement(scene: Scene, rng: random.Random, split: str = "train") -> tuple[str, str]:
    """A true or false statement about ``scene``: its caption, or the caption with one
    named object's colour or shape changed to a pair no object in the scene has.

    For ``split="train"`` no statement names a :data:`HELD_OUT_COMBOS` pair; for ``"dev"``
    every statement names one (a false one keeps the caption's held-out object).
    """

    def allowed(pairs: list[tuple[str, str]]) -> bool:
        held = any(p in HELD_OUT_COMBOS for p in pairs)
        return held if split == "dev" else not held

    named = [(s.color, s.shape) for s in scene.shapes[:2]]
    present = {(s.color, s.shape) for s in scene.shapes}
    options = []
    for which, (color, shape) in enumerate(named):
        changed = [(c, shape) for c in COLORS if c != color]
        changed += [(color, s) for s in SHAPES if s != shape]
        for new in changed:
            pairs = [new if i == which else p for i, p in enumerate(named)]
            if new not in present and allowed(pairs):
                options.append((which, new))
    if rng.random() < 0.5 or not options:
        return scene.caption, "true"
    which, new = rng.choice(options)
    words = scene.caption.split()
    start = 1 if which == 0 else len(words) - 2  # "a C S <relation> a C S"
    words[start : start + 2] = list(new)
    return " ".join(words), "false"


def _task_scenes(seed: int, count: int, split: str, size: int) -> list[Scene]:
    """``count`` scenes of ``seed``: for ``train`` none holds a held-out combination; for
    ``dev`` each caption names one."""
    scenes: list[Scene] = []
    index = 0
    while len(scenes) < count:
        scene = make_scene(index, seed, size)
        index += 1
        if (split == "train" and not any(_held_out(s) for s in scene.shapes)) or (
            split == "dev" and any(_held_out(s) for s in scene.shapes[:2])
        ):
            scenes.append(scene)
    return scenes


def write_synthetic_tasks(
    directory: str | Path,
    *,
    train_images: int = 32,
    dev_images: int = 24,
    seed: int = 11,
    size: int = 64,
) -> Path:
    """Write the two fine-tuning tasks of ``data_specs/image_text`` (deterministic).

    Files: ``features.json`` + ``features.safetensors`` (the regions of every task image),
    ``vqa_{train,dev}.jsonl`` (``{"id", "image_id", "question", "answers": [10]}``) and
    ``match_{train,dev}.jsonl`` (``{"id", "image_id", "text", "label": "true"|"false"}``),
    ``vocab.txt``. Training images come from ``seed`` and never show a
    :data:`HELD_OUT_COMBOS` combination; dev images come from ``seed + 1`` and every dev
    question or statement is about one (only held-out objects are asked about).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": _task_scenes(seed, train_images, "train", size),
        "dev": _task_scenes(seed + 1, dev_images, "dev", size),
    }
    generator = torch.Generator().manual_seed(seed)
    images = {s.image_id: detect(s, generator) for scenes in splits.values() for s in scenes}
    write_region_features(directory, RegionFeatureSet(spec=detector_spec(), images=images))
    for split, scenes in splits.items():
        rng = random.Random(f"tasks:{seed}:{split}")
        vqa: list[str] = []
        match: list[str] = []
        for scene in scenes:
            for target, row in vqa_questions(scene, rng):
                if _held_out(target) == (split == "dev"):
                    qid = f"{scene.image_id}-q{len(vqa)}"
                    vqa.append(json.dumps({"id": qid, "image_id": scene.image_id, **row}))
            text, label = match_statement(scene, rng, split)
            sid = f"{scene.image_id}-s"
            match.append(
                json.dumps({"id": sid, "image_id": scene.image_id, "text": text, "label": label})
            )
        atomic_write_text(directory / f"vqa_{split}.jsonl", "\n".join(vqa) + "\n")
        atomic_write_text(directory / f"match_{split}.jsonl", "\n".join(match) + "\n")
    atomic_write_text(directory / "vocab.txt", "\n".join(vocabulary()) + "\n")
    return directory
