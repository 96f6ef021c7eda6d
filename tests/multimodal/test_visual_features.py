"""Box encoding, timm grid features, region-feature files and the feature-mismatch error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ptm_multimodal import (
    FeatureMismatchError,
    FeatureSpec,
    GridFeatureExtractor,
    RegionFeatureError,
    encode_boxes,
    grid_boxes,
    grid_feature_set,
    read_region_features,
    vilbert,
    visualbert,
    write_region_features,
)
from ptm_multimodal.synthetic import make_scene, render, synthetic_dataset


def test_box_encoding_is_normalised_corners_and_area_fraction() -> None:
    boxes = torch.tensor([[0.0, 0.0, 64.0, 32.0], [16.0, 8.0, 32.0, 24.0]])
    encoded = encode_boxes(boxes, 64, 32)
    expected = torch.tensor([[0, 0, 1, 1, 1.0], [0.25, 0.25, 0.5, 0.75, 16 * 16 / (64 * 32)]])
    torch.testing.assert_close(encoded, expected)


def test_grid_boxes_tile_the_image_row_major() -> None:
    boxes = grid_boxes(2, 3, 64, 96)
    assert boxes.shape == (6, 4)
    torch.testing.assert_close(boxes[0], torch.tensor([0.0, 0.0, 32.0, 32.0]))
    torch.testing.assert_close(boxes[5], torch.tensor([64.0, 32.0, 96.0, 64.0]))
    assert float(encode_boxes(boxes, 96, 64)[:, 4].sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("backbone", ["resnet10t", "test_vit"])
def test_timm_grid_features_give_one_box_per_cell(backbone: str) -> None:
    extractor = GridFeatureExtractor(backbone).eval()
    size = 64 if backbone == "resnet10t" else 160
    images = torch.rand(2, 3, size, size)
    with torch.no_grad():
        out = extractor(images)
    cells = out.features.shape[1]
    assert out.features.shape == (2, cells, extractor.feature_size)
    assert out.boxes.shape == (2, cells, 4) and bool(out.mask.all())
    # the cells cover the image exactly once
    area = encode_boxes(out.boxes[0], size, size)[:, 4].sum()
    assert float(area) == pytest.approx(1.0)
    spec = extractor.feature_spec()
    assert spec.extractor == f"timm:{backbone}:grid" and spec.feature_size == extractor.feature_size


def test_grid_extractor_loads_local_weights_and_hash_follows_them(tmp_path: Path) -> None:
    torch.manual_seed(0)
    first = GridFeatureExtractor("resnet10t")
    path = tmp_path / "weights.safetensors"
    save_file({k: v.contiguous() for k, v in first.backbone.state_dict().items()}, str(path))
    torch.manual_seed(1)
    other = GridFeatureExtractor("resnet10t")
    loaded = GridFeatureExtractor("resnet10t", weights=path)
    assert loaded.feature_spec() == first.feature_spec()
    assert other.feature_spec().extractor_hash != first.feature_spec().extractor_hash
    with pytest.raises(FileNotFoundError, match="does not exist"):
        GridFeatureExtractor("resnet10t", weights=tmp_path / "missing.pth")
    with pytest.raises(ValueError, match="unknown timm backbone"):
        GridFeatureExtractor("resnet_does_not_exist")


def test_grid_features_of_rendered_scenes_round_trip_through_the_spec(tmp_path: Path) -> None:
    scenes = [make_scene(i, seed=0) for i in range(3)]
    extractor = GridFeatureExtractor("resnet10t", pool=(2, 2))
    feature_set = grid_feature_set({s.image_id: render(s) for s in scenes}, extractor)
    write_region_features(tmp_path, feature_set)
    back = read_region_features(tmp_path)
    assert back.spec == extractor.feature_spec()
    first = scenes[0].image_id
    torch.testing.assert_close(back[first].features, feature_set[first].features)
    assert back[first].boxes.shape == (4, 4) and back[first].classes is None


def test_region_features_round_trip_with_classes(tmp_path: Path) -> None:
    _, feature_set = synthetic_dataset(5, seed=3)
    write_region_features(tmp_path, feature_set)
    back = read_region_features(tmp_path)
    assert back.spec == feature_set.spec and len(back) == 5
    for image_id, regions in feature_set.images.items():
        torch.testing.assert_close(back[image_id].features, regions.features)
        torch.testing.assert_close(back[image_id].classes, regions.classes)


def test_malformed_region_files_name_file_and_field(tmp_path: Path) -> None:
    _, feature_set = synthetic_dataset(2, seed=3)
    write_region_features(tmp_path, feature_set)
    index = json.loads((tmp_path / "features.json").read_text())
    index["spec"]["feature_size"] = 16
    (tmp_path / "features.json").write_text(json.dumps(index))
    with pytest.raises(RegionFeatureError, match=r"features\.safetensors.*feature_size is 16"):
        read_region_features(tmp_path)
    index["spec"]["feature_size"] = 32
    del index["images"][1]["width"]
    (tmp_path / "features.json").write_text(json.dumps(index))
    with pytest.raises(RegionFeatureError, match=r"images\[1\]: field 'width' is missing"):
        read_region_features(tmp_path)


SPEC = FeatureSpec("synthetic-detector-v1", 32, "abc", num_classes=18)


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (FeatureSpec("synthetic-detector-v1", 16, "abc"), "feature_size 16 .* expects 32"),
        (FeatureSpec("timm:resnet10t:grid", 32, "abc"), "extractor 'timm:resnet10t:grid'"),
        (FeatureSpec("synthetic-detector-v1", 32, "def"), "extractor_hash def"),
    ],
)
def test_feature_mismatch_raises_the_documented_error(other: FeatureSpec, message: str) -> None:
    for model in (
        visualbert(
            vocab_size=30,
            visual_embedding_dim=32,
            hidden_size=16,
            num_layers=1,
            num_heads=2,
            max_positions=8,
            feature_spec=SPEC,
        ),
        vilbert(
            vocab_size=30,
            visual_embedding_dim=32,
            hidden_size=16,
            num_layers=1,
            num_heads=2,
            image_hidden_size=16,
            image_num_layers=1,
            image_num_heads=2,
            co_hidden_size=16,
            co_num_heads=2,
            co_attention_after=[[1, 1]],
            max_positions=8,
            feature_spec=SPEC,
        ),
    ):
        with pytest.raises(FeatureMismatchError, match=message):
            model.check_features(other, source="data/features.json")
        model.check_features(SPEC)  # the same spec passes


def test_wrong_feature_width_in_forward_raises_the_documented_error() -> None:
    model = visualbert(
        vocab_size=30,
        visual_embedding_dim=32,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        max_positions=8,
        box_position=False,
    )
    with pytest.raises(FeatureMismatchError, match="16-d but this model takes 32-d"):
        model(torch.tensor([[2, 5, 3]]), torch.zeros(1, 2, 16))
