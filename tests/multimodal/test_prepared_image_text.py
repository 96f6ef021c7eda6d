"""Prepared image-text pairs: same batches as the raw path, checksums, errors, crash resume."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from flows.config import compose_config
from ptm_core.objectives import ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal import ImageTextBatches, ImageTextError, RegionFeatureError
from ptm_multimodal import prepared as prepared_module
from ptm_multimodal.data import read_image_text_pairs
from ptm_multimodal.prepared import (
    GridExtraction,
    PreparedImageText,
    PreparedImageTextError,
    open_image_text,
    prepare_image_text,
)
from ptm_multimodal.synthetic import write_synthetic_dataset

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_specs" / "image_text" / "sample"
# Small shards, so that batches cross shard boundaries on the 16-pair sample.
SMALL = {"pairs_per_shard": 5, "images_per_shard": 3}


def _assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


@pytest.fixture
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(SAMPLE / "vocab.txt")


@pytest.mark.parametrize("experiment", ["visualbert_tiny", "vilbert_tiny"])
def test_prepared_and_raw_paths_give_identical_batches(
    experiment: str, tmp_path: Path, tokenizer: WordPieceTokenizer
) -> None:
    cfg = compose_config([f"experiment={experiment}", "data=image_text_sample"])
    vocab = tokenizer.vocab_info
    model = instantiate(cfg.model)(vocab_size=vocab.vocab_size, visual_embedding_dim=32)
    nodes = cfg.objective.objectives
    mix = ObjectiveMix(
        {n: build_objective(instantiate(v), model, vocab) for n, v in nodes.items()}
    )  # the presets' data side: masking, region masking
    prepared = prepare_image_text(SAMPLE, tmp_path / "prepared", max_length=32, **SMALL)
    assert len(prepared.manifest["text_shards"]) == 4
    assert len(prepared.manifest["feature_shards"]) == 6
    settings = {"negative_prob": 0.5, "transform": mix.collate, "seed": 7}
    raw = ImageTextBatches(read_image_text_pairs(SAMPLE), tokenizer, 4, max_length=32, **settings)
    new = ImageTextBatches(prepared, tokenizer, 4, **settings)
    assert raw.batches_per_epoch == new.batches_per_epoch == 4
    for epoch in range(2):
        for a, b in zip(raw.iter_batches(epoch), new.iter_batches(epoch), strict=True):
            _assert_same(a, b)
    # Worker processes open the shards themselves and build the same batches.
    workers = ImageTextBatches(prepared, tokenizer, 4, num_workers=2, **settings)
    for a, b in zip(raw.iter_batches(1, 1), workers.iter_batches(1, 1), strict=True):
        _assert_same(a, b)


def test_prepared_pairs_pickle_without_open_shards(tmp_path: Path) -> None:
    prepared = prepare_image_text(SAMPLE, tmp_path / "p", **SMALL)
    before = [prepared.regions(i).features for i in range(len(prepared))]
    copy = pickle.loads(pickle.dumps(prepared))
    assert not copy._features and not copy._texts
    for i, features in enumerate(before):
        torch.testing.assert_close(copy.regions(i).features, features, rtol=0, atol=0)
        assert copy.caption(i) == prepared.caption(i)


def test_second_open_reuses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = open_image_text(SAMPLE, cache_dir=tmp_path)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("features were copied again")

    monkeypatch.setattr(prepared_module, "_prepare_regions", fail)
    monkeypatch.setattr(prepared_module, "_prepare_text", fail)
    second = open_image_text(SAMPLE, cache_dir=tmp_path)
    assert second.directory == first.directory and len(second) == 16
    # another max_length is another fingerprint, hence another folder
    monkeypatch.undo()
    assert open_image_text(SAMPLE, cache_dir=tmp_path, max_length=8).directory != first.directory


def test_corrupted_feature_shard_is_caught_by_its_checksum(
    tmp_path: Path, tokenizer: WordPieceTokenizer
) -> None:
    out = tmp_path / "prepared"
    clean = prepare_image_text(SAMPLE, out, **SMALL)
    shard = out / "shards" / "features-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # a flipped bit inside the tensors, same size
    shard.write_bytes(bytes(data))
    with pytest.raises(PreparedImageTextError) as caught:
        prepare_image_text(SAMPLE, out, **SMALL)
    message = str(caught.value)
    assert str(shard) in message and "sha256" in message and "checksum" in message
    assert "delete features-00002.safetensors and run again" in message
    # The fix works: the damaged shard alone is rebuilt.
    shard.unlink()
    repaired = prepare_image_text(SAMPLE, out, **SMALL)
    assert repaired.manifest == clean.manifest
    assert PreparedImageText.open(out).regions(7).features.shape[1] == 32


def _copy_sample(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(SAMPLE, target)
    return target


def test_wrong_feature_size_names_the_file_field_and_fix(tmp_path: Path) -> None:
    data = _copy_sample(tmp_path)
    index = json.loads((data / "features.json").read_text())
    index["spec"]["feature_size"] = 16
    (data / "features.json").write_text(json.dumps(index))
    with pytest.raises(RegionFeatureError) as caught:
        prepare_image_text(data, tmp_path / "out")
    message = str(caught.value)
    assert str(data / "features.safetensors") in message
    assert "field 'features' has shape (41, 32)" in message
    assert "spec.feature_size is 16" in message and "re-extract the features" in message
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_unknown_image_id_names_the_line(tmp_path: Path) -> None:
    data = _copy_sample(tmp_path)
    with open(data / "pairs.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"image_id": "nowhere", "caption": "a red circle"}\n')
    with pytest.raises(ImageTextError, match=r"pairs\.jsonl:17: field 'image_id' 'nowhere'"):
        prepare_image_text(data, tmp_path / "out")


def test_grid_features_are_extracted_once_and_a_missing_image_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    data = write_synthetic_dataset(tmp_path / "scenes", 5, seed=3, size=32, images=True)
    extraction = GridExtraction("resnet10t", image_size=32, pool=(2, 2), batch_size=2)
    prepared = open_image_text(data, extraction=extraction, cache_dir=tmp_path / "cache")
    assert len(prepared) == 5 and prepared.spec.extractor.startswith("timm:resnet10t:grid")
    regions = prepared.regions(4)
    assert regions.features.shape == (4, prepared.spec.feature_size)
    assert regions.boxes.shape == (4, 4) and (regions.width, regions.height) == (32, 32)

    def no_backbone(self: GridExtraction) -> None:
        raise AssertionError("the backbone ran again")

    monkeypatch.setattr(GridExtraction, "build", no_backbone)
    again = open_image_text(data, extraction=extraction, cache_dir=tmp_path / "cache")
    torch.testing.assert_close(again.regions(4).features, regions.features, rtol=0, atol=0)
    monkeypatch.undo()

    (data / "images" / "scene3-00002.png").unlink()
    with pytest.raises(ImageTextError) as caught:
        open_image_text(data, extraction=extraction, cache_dir=tmp_path / "cache")
    message = str(caught.value)
    assert f"{data / 'pairs.jsonl'}:3: field 'image'" in message
    assert "scene3-00002.png does not exist" in message and "add the image file" in message


KILLED_RUN = """
import os, signal, sys
from ptm_multimodal import prepared

calls = 0
original = prepared.atomic_write_bytes

def dying(path, data):
    global calls
    calls += 1
    if calls == int(sys.argv[3]):
        # half of the shard in a temporary file, as a crash mid-write leaves it
        tmp = path.parent / f".{path.name}.crash.tmp"
        tmp.write_bytes(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return original(path, data)

prepared.atomic_write_bytes = dying
prepared.prepare_image_text(sys.argv[1], sys.argv[2], pairs_per_shard=5, images_per_shard=3)
"""


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def test_kill_9_during_preparation_then_rerun_equals_a_clean_run(tmp_path: Path) -> None:
    die_at = 3  # writing the third of six feature shards; no text shard written yet
    killed = tmp_path / "killed"
    script = tmp_path / "killed_run.py"
    script.write_text(textwrap.dedent(KILLED_RUN))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, str(script), str(SAMPLE), str(killed), str(die_at)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == -9, run.stderr
    assert not (killed / "manifest.json").exists()
    assert list((killed / "shards").glob(".*.tmp"))  # the half-written shard is there
    done_before = sorted(p.name for p in (killed / "shards").glob("*.json"))
    assert done_before  # some shards were finished before the kill

    resumed = prepare_image_text(SAMPLE, killed, **SMALL)
    clean = prepare_image_text(SAMPLE, tmp_path / "clean", **SMALL)
    assert _files(killed) == _files(tmp_path / "clean")
    assert resumed.manifest == clean.manifest


def test_a_folder_reused_for_changed_inputs_keeps_no_stale_shard(tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare_image_text(SAMPLE, out, **SMALL)
    data = _copy_sample(tmp_path)
    lines = (data / "pairs.jsonl").read_text(encoding="utf-8").splitlines()
    (data / "pairs.jsonl").write_text("\n".join(lines[:12]) + "\n", encoding="utf-8")
    changed = prepare_image_text(data, out, **SMALL)
    assert len(changed) == 12
    assert _files(out) == _files(prepare_image_text(data, tmp_path / "clean", **SMALL).directory)
