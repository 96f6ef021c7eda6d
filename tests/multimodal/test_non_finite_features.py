"""One NaN or inf in ``features.safetensors`` is refused where the features are read (#31)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from ptm_multimodal import RegionFeatureError, read_region_features
from ptm_multimodal.prepared import prepare_image_text
from ptm_multimodal.region_features import iter_region_features, read_region_index
from ptm_multimodal.synthetic import write_synthetic_dataset


def _poison(directory: Path, tensor: str, image: int, value: float) -> str:
    """Set one value of ``image``'s second region; return that image's id."""
    path = directory / "features.safetensors"
    state = load_file(str(path))
    entry = json.loads((directory / "features.json").read_text(encoding="utf-8"))["images"][image]
    start = sum(
        e["num_regions"]
        for e in json.loads((directory / "features.json").read_text())["images"][:image]
    )
    state[tensor][start + 1, 0] = value
    save_file(state, str(path))
    return str(entry["image_id"])


@pytest.mark.parametrize(("tensor", "value"), [("features", float("nan")), ("boxes", float("inf"))])
def test_every_reader_names_the_file_tensor_and_image(
    tmp_path: Path, tensor: str, value: float
) -> None:
    data = write_synthetic_dataset(tmp_path / "mine", 6, seed=3)
    image_id = _poison(data, tensor, 4, value)
    expected = f"{data / 'features.safetensors'}: tensor {tensor!r} holds a non-finite value"
    with pytest.raises(RegionFeatureError) as err:
        read_region_features(data)
    message = str(err.value)
    assert message.startswith(expected) and repr(image_id) in message and "region 1" in message, (
        message
    )
    with pytest.raises(RegionFeatureError, match="non-finite"):
        list(iter_region_features(read_region_index(data)))
    with pytest.raises(RegionFeatureError, match="non-finite"):
        prepare_image_text(data, tmp_path / "prepared")
