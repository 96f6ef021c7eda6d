"""Synthetic grounded scenes, the image-text spec reader, batches and the metrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal import (
    ImageTextBatches,
    ImageTextError,
    matching_accuracy,
    read_image_text_pairs,
    retrieval_recall,
)
from ptm_multimodal.synthetic import COLORS, SHAPES, make_scene, render, synthetic_dataset

SAMPLE = Path(__file__).resolve().parents[2] / "data_specs" / "image_text" / "sample"


def test_scenes_are_deterministic_and_captions_are_true() -> None:
    for index in range(50):
        scene = make_scene(index, seed=4)
        assert scene == make_scene(index, seed=4)
        subject, obj = scene.shapes[:2]
        words = scene.caption.split()
        assert words[1:3] == [subject.color, subject.shape]
        assert words[-2:] == [obj.color, obj.shape]
        sx, sy = (subject.box[0] + subject.box[2]) / 2, (subject.box[1] + subject.box[3]) / 2
        ox, oy = (obj.box[0] + obj.box[2]) / 2, (obj.box[1] + obj.box[3]) / 2
        relation = " ".join(words[3:-3])
        holds = {"left of": sx < ox, "right of": sx > ox, "above": sy < oy, "below": sy > oy}
        assert holds[relation], scene
    assert make_scene(0, seed=4).caption != make_scene(0, seed=5).caption or (
        make_scene(0, seed=4).shapes != make_scene(0, seed=5).shapes
    )


def test_rendered_shapes_have_their_colour_at_the_centre() -> None:
    scene = make_scene(3, seed=0)
    image = render(scene)
    assert image.shape == (3, 64, 64) and image.dtype == torch.uint8
    for shape in scene.shapes:
        x1, y1, x2, y2 = shape.box
        # a point inside every shape kind (the triangle is narrow at the top)
        pixel = image[:, (y1 + 3 * y2) // 4, (x1 + x2) // 2]
        assert tuple(pixel.tolist()) == COLORS[shape.color], shape


def test_synthetic_detector_encodes_colour_shape_and_class() -> None:
    scenes, feature_set = synthetic_dataset(20, seed=0)
    correct = total = 0
    for scene in scenes:
        regions = feature_set[scene.image_id]
        for feature, box, classes in zip(
            regions.features, regions.boxes, regions.classes, strict=True
        ):
            shape = next(s for s in scene.shapes if tuple(box.int().tolist()) == s.box)
            correct += int(feature[: len(COLORS)].argmax()) == list(COLORS).index(shape.color)
            correct += int(
                feature[len(COLORS) : len(COLORS) + len(SHAPES)].argmax()
            ) == SHAPES.index(shape.shape)
            correct += int(classes.argmax()) == shape.class_id
            total += 3
            assert float(classes.sum()) == pytest.approx(1.0, abs=1e-5)
    assert correct / total > 0.9


def test_sample_spec_reads(caption_tokenizer: WordPieceTokenizer) -> None:
    dataset = read_image_text_pairs(SAMPLE)
    assert len(dataset.pairs) == 16 and dataset.features.spec.feature_size == 32
    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE / "vocab.txt")
    assert tokenizer.vocab_info.vocab_size == caption_tokenizer.vocab_info.vocab_size
    assert all("[UNK]" not in tokenizer.encode(p.caption).tokens for p in dataset.pairs)


def test_bad_pairs_name_file_line_and_field(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "d")
    pairs = tmp_path / "d" / "pairs.jsonl"
    lines = pairs.read_text().splitlines()
    lines[2] = json.dumps({"image_id": "nope", "caption": "a red circle"})
    pairs.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImageTextError, match=r"pairs\.jsonl:3: field 'image_id' 'nope'"):
        read_image_text_pairs(tmp_path / "d")
    lines[2] = json.dumps({"image_id": "scene7-00002"})
    pairs.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImageTextError, match=r"pairs\.jsonl:3: field 'caption'"):
        read_image_text_pairs(tmp_path / "d")


def test_batches_swap_half_the_captions_deterministically(
    synthetic_dirs: tuple[Path, Path], caption_tokenizer: WordPieceTokenizer
) -> None:
    dataset = read_image_text_pairs(synthetic_dirs[0])
    data = ImageTextBatches(dataset, caption_tokenizer, 50, seed=3)
    labels = torch.cat([b["match_label"] for b in data.iter_batches(0)])
    assert len(labels) == 400 and 0.4 < float(labels.float().mean()) < 0.6
    again = data.batch(0, 2)
    torch.testing.assert_close(
        again["input_ids"], next(iter(data.iter_batches(0, start=2)))["input_ids"]
    )
    assert again["visual_boxes"].shape[-1] == 5 and float(again["visual_boxes"].max()) <= 1.0


class _OracleNetwork(torch.nn.Module):
    """Scores a pair by whether the caption is the image's own (through image_index)."""

    def __init__(self, data: ImageTextBatches, constant: bool = False) -> None:
        super().__init__()
        self.captions = {i: p.caption for i, p in enumerate(data.dataset.pairs)}
        self.tokenizer_ids = {tuple(e.input_ids): i for i, e in enumerate(data.pairs.encoded)}
        self.constant = constant

    def forward(self, input_ids: torch.Tensor, image_index: torch.Tensor) -> torch.Tensor:
        if self.constant:
            return torch.zeros(len(input_ids))
        out = []
        for ids, image in zip(input_ids, image_index, strict=True):
            caption = self.tokenizer_ids[tuple(i for i in ids.tolist() if i != 0)]
            out.append(1.0 if self.captions[caption] == self.captions[int(image)] else -1.0)
        return torch.tensor(out)


class _ScoreAsLogits(torch.nn.Module):
    """An ``itm`` objective whose two logits differ by the network's score."""

    def logits(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.stack([-scores / 2, scores / 2], dim=1)


def _Oracle(data: ImageTextBatches, constant: bool = False) -> PretrainingModel:
    return PretrainingModel(
        _OracleNetwork(data, constant),
        ObjectiveMix({"itm": _ScoreAsLogits()}),  # type: ignore[dict-item]
        input_keys=("input_ids", "image_index"),
    )


def test_metrics_on_an_oracle_and_a_constant_scorer(
    synthetic_dirs: tuple[Path, Path], caption_tokenizer: WordPieceTokenizer
) -> None:
    data = ImageTextBatches(
        read_image_text_pairs(synthetic_dirs[1]), caption_tokenizer, 64, shuffle=False
    )
    oracle = _Oracle(data)
    assert matching_accuracy(oracle, data).accuracy == 1.0
    assert matching_accuracy(oracle, data, shuffle_images=True).accuracy < 0.6
    recall = retrieval_recall(oracle, data)
    captions = [p.caption for p in data.dataset.pairs]
    unique = sum(captions.count(c) == 1 for c in captions) / len(captions)
    # a caption shared by several images ties with them, and ties count against it
    assert recall.recall[1] == pytest.approx(unique) and recall.recall[5] == 1.0
    assert recall.chance[5] == 0.05
    flat = retrieval_recall(_Oracle(data, constant=True), data)
    assert flat.recall[5] == 0.0  # ties count against the caption
    assert matching_accuracy(_Oracle(data, constant=True), data).accuracy == 0.5
