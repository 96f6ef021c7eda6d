"""Reliability of the image-text readers: line splitting, encodings, NUL, duplicates, damage.

Every error must name the file and the line (or entry) and say the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptm_core.checkpoints import CheckpointError
from ptm_multimodal import (
    ImageTextError,
    RegionFeatureError,
    read_image_text_pairs,
    read_region_features,
)
from ptm_multimodal.loading import load_multimodal
from ptm_multimodal.synthetic import write_synthetic_dataset


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_synthetic_dataset(tmp_path / "data", 4, seed=0)


def _ids(directory: Path) -> list[str]:
    index = json.loads((directory / "features.json").read_text(encoding="utf-8"))
    return [entry["image_id"] for entry in index["images"]]


def _pairs(directory: Path, content: str | bytes) -> Path:
    path = directory / "pairs.jsonl"
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def test_caption_with_u2028_keeps_line_numbers(dataset: Path) -> None:
    first, second = _ids(dataset)[:2]
    caption = "a red square\u2028above a blue circle\u2029ok"
    good = json.dumps({"image_id": first, "caption": caption}, ensure_ascii=False)
    path = _pairs(dataset, f"{good}\n{json.dumps({'image_id': second, 'caption': 'x'})}\n")
    assert [p.caption for p in read_image_text_pairs(dataset).pairs] == [caption, "x"]
    _pairs(dataset, f"{good}\n" + json.dumps({"image_id": "nope", "caption": "x"}) + "\n")
    with pytest.raises(ImageTextError) as err:
        read_image_text_pairs(dataset)
    assert str(err.value).startswith(f"{path}:2: field 'image_id' 'nope' has no entry")


def test_invalid_utf8_in_pairs_names_file_and_line(dataset: Path) -> None:
    first = _ids(dataset)[0]
    good = json.dumps({"image_id": first, "caption": "fine"}).encode()
    path = _pairs(dataset, good + b"\n" + good.replace(b"fine", b"fin\xe9") + b"\n")
    with pytest.raises(ImageTextError) as err:
        read_image_text_pairs(dataset)
    message = str(err.value)
    assert message.startswith(f"{path}:2: field 'encoding': not valid UTF-8"), message
    assert "re-encode the file as UTF-8" in message


@pytest.mark.parametrize("field", ["caption", "image_id"])
def test_nul_in_pairs_is_rejected(dataset: Path, field: str) -> None:
    first = _ids(dataset)[0]
    row = {"image_id": first, "caption": "fine"}
    row[field] = row[field][:2] + "\x00" + row[field][2:]
    good = json.dumps({"image_id": first, "caption": "fine"})
    path = _pairs(dataset, f"{good}\n\n{json.dumps(row)}\n")
    with pytest.raises(ImageTextError) as err:
        read_image_text_pairs(dataset)
    message = str(err.value)
    assert message.startswith(f"{path}:3: field '{field}': NUL character"), message


def test_duplicate_image_id_is_reported_as_a_duplicate(dataset: Path) -> None:
    index_path = dataset / "features.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    index["images"].append(dict(index["images"][1]))
    text = json.dumps(index, indent=1) + "\n"
    index_path.write_text(text, encoding="utf-8")
    lines = text.split("\n")
    where = [n for n, line in enumerate(lines, start=1) if '"image_id"' in line]
    dup = index["images"][1]["image_id"]
    with pytest.raises(RegionFeatureError) as err:
        read_region_features(dataset)
    message = str(err.value)
    assert message.startswith(
        f"{index_path}:{where[-1]}: images[4]: field 'image_id': duplicate image_id {dup!r} "
        f"(first at line {where[1]}, images[1])"
    ), message
    assert "runs past" not in message and "regions but" not in message


@pytest.mark.parametrize("keep", [0, 7, 0.5])
def test_truncated_features_file_is_one_clear_error(dataset: Path, keep: float) -> None:
    path = dataset / "features.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)] if isinstance(keep, float) else data[:keep])
    with pytest.raises(RegionFeatureError) as err:
        read_image_text_pairs(dataset)
    message = str(err.value)
    assert message.startswith(f"{path}: cannot read the region tensors"), message
    assert "truncated or damaged" in message and "Regenerate it" in message
    assert "\n" not in message


def test_load_multimodal_without_a_config_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"config\.json: cannot read the config"):
        load_multimodal(tmp_path)


@pytest.mark.integration
def test_truncated_checkpoint_weights_are_one_checkpoint_error(
    tmp_path: Path, one_thread: None
) -> None:
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        [
            "experiment=visualbert_tiny",
            "data=image_text_sample",
            "trainer.max_steps=1",
            "trainer.progress=false",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path}",
        ]
    )
    final = run_composed(cfg).encoder_dir
    weights = final / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CheckpointError) as err:
        load_multimodal(final)
    message = str(err.value)
    assert message.startswith(f"{weights}: cannot read the weights"), message
    assert "damaged or truncated" in message and "\n" not in message
