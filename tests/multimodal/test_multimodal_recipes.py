"""The visualbert/vilbert presets run end to end and record the feature spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from flows.config import compose_config
from flows.runner import run_composed
from ptm_multimodal import (
    FeatureMismatchError,
    FeatureSpec,
    check_checkpoint_features,
    load_multimodal,
)
from ptm_multimodal.synthetic import detector_spec

FAST = [
    "trainer.max_steps=4",
    "trainer.save_every=2",
    "trainer.log_every=2",
    "trainer.progress=false",
    "trainer.device=cpu",
    "data.batch_size=8",
    "data.synthetic.num_images=24",
    "data.synthetic.eval_images=8",
]


@pytest.mark.integration
@pytest.mark.parametrize("experiment", ["visualbert_tiny", "vilbert_tiny"])
def test_preset_runs_and_every_checkpoint_records_the_feature_spec(
    experiment: str, tmp_path: Path, one_thread: None
) -> None:
    cfg = compose_config([f"experiment={experiment}", *FAST, f"trainer.output_dir={tmp_path}"])
    result = run_composed(cfg)
    spec = detector_spec()
    for directory in (result.encoder_dir, result.last_checkpoint):
        config = json.loads((directory / "config.json").read_text())
        assert FeatureSpec.from_dict(config["feature_spec"]) == spec, directory
        assert config["architecture"] == experiment.removesuffix("_tiny")
    assert load_file(str(result.encoder_dir / "model.safetensors"))
    assert (result.encoder_dir / "vocab.txt").exists()
    evaluation = result.evaluation
    assert evaluation["matching"]["chance"] == 0.5 and evaluation["retrieval"]["num_images"] == 8
    assert len(result.metrics_path.read_text().splitlines()) == 2
    assert json.loads((tmp_path / "evaluation.json").read_text()) == json.loads(
        json.dumps(evaluation)
    )

    reloaded, tokenizer = load_multimodal(result.encoder_dir, features=spec)
    assert type(reloaded.encoder).__name__.lower().startswith(experiment.split("_")[0])
    assert tokenizer.vocab_info.vocab_size == reloaded.encoder.vocab_size
    check_checkpoint_features(result.encoder_dir, spec, source="same data")
    wider = FeatureSpec(spec.extractor, 2 * spec.feature_size, spec.extractor_hash)
    with pytest.raises(FeatureMismatchError, match=r"feature_size 64 in other\.json"):
        check_checkpoint_features(result.encoder_dir, wider, source="other.json")
    grid = FeatureSpec("timm:resnet10t:grid", spec.feature_size, "0" * 16)
    with pytest.raises(FeatureMismatchError, match="extractor 'timm:resnet10t:grid'"):
        check_checkpoint_features(result.encoder_dir, grid, source="grid.json")
    with pytest.raises(FeatureMismatchError, match="feature_size 64"):
        load_multimodal(result.encoder_dir, features=wider)


@pytest.mark.integration
def test_sample_spec_trains_a_step(tmp_path: Path, one_thread: None) -> None:
    cfg = compose_config(
        [
            "experiment=visualbert_tiny",
            "data=image_text_sample",
            *FAST[:5],
            f"trainer.output_dir={tmp_path}",
        ]
    )
    result = run_composed(cfg)
    assert result.evaluation["matching"]["num_pairs"] == 32
