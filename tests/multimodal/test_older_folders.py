"""Folders written before the family spec (#32): the network's tensors were ``model.*``
(now ``encoder.*``) and older finals have no ``"ptm_model"``. Finals load, runs resume."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from flows.runner import family_of_folder
from ptm_core.checkpoints import registry as checkpoints
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.training import TrainerConfig
from ptm_core.training.run_folder import architecture_hash, read_fingerprint, write_fingerprint
from ptm_multimodal import ImageTextMatchObjective, visualbert
from ptm_multimodal.loading import load_multimodal

SAMPLE = Path(__file__).resolve().parents[2] / "data_specs" / "image_text" / "sample"
SMALL = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32}
MODEL = partial(visualbert, max_positions=32, **SMALL)
OBJECTIVES = {"mlm": MaskedLMObjective, "itm": ImageTextMatchObjective}


def _older(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {("model." + k[8:] if k.startswith("encoder.") else k): v for k, v in tensors.items()}


def _run(pretrain: Callable[..., Any], out: Path) -> Path:
    trainer = TrainerConfig(
        output_dir=str(out), max_steps=4, save_every=2, learning_rate=1e-3, progress=False
    )
    result = pretrain(
        "visualbert",
        MODEL,
        OBJECTIVES,
        trainer,
        train_dir=str(SAMPLE),
        eval_dir=str(SAMPLE),
        batch_size=4,
        prepare=False,
    )
    return Path(result.encoder_dir)


def test_an_older_final_is_recognised_and_loads_the_same_tensors(
    pretrain: Callable[..., Any], tmp_path: Path, one_thread: None
) -> None:
    final = _run(pretrain, tmp_path / "run")
    older = tmp_path / "older"
    shutil.copytree(final, older)
    save_file(_older(load_file(str(final / "model.safetensors"))), older / "model.safetensors")
    config = json.loads((older / "config.json").read_text())
    del config["ptm_model"]
    (older / "config.json").write_text(json.dumps(config))
    spec = family_of_folder(older)
    assert spec is not None and spec.name == "visualbert"
    new, _ = load_multimodal(final)
    old = checkpoints.load("visualbert", older)
    assert new.state_dict().keys() == old.state_dict().keys()
    for name, tensor in new.state_dict().items():
        assert torch.equal(tensor, old.state_dict()[name]), name


def test_an_older_run_folder_resumes_to_the_uninterrupted_weights(
    pretrain: Callable[..., Any], tmp_path: Path, one_thread: None
) -> None:
    whole = _run(pretrain, tmp_path / "whole")
    expected = load_file(str(whole / "model.safetensors"))
    # The older wrapper: the network as `model`, then the objectives (in the run's order).
    loaded, tokenizer = load_multimodal(whole)
    vocab = tokenizer.vocab_info
    network = MODEL(
        vocab_size=vocab.vocab_size,
        visual_embedding_dim=loaded.encoder.visual_embedding_dim,
        feature_spec=loaded.encoder.feature_spec,
    )
    older_wrapper = nn.Module()
    older_wrapper.model = network
    older_wrapper.objectives = ObjectiveMix(
        {name: build_objective(cls, network, vocab) for name, cls in OBJECTIVES.items()}
    )
    run = tmp_path / "stopped"
    final = _run(pretrain, run)
    # As a run stopped at step 2 before the family spec left it: model.* tensors, and a
    # fingerprint that hashes those names.
    shutil.rmtree(final)
    shutil.rmtree(run / "checkpoints" / "step-00000004")
    (run / "checkpoints" / "latest").write_text("step-00000002\n")
    weights = run / "checkpoints" / "step-00000002" / "model.safetensors"
    older = _older(load_file(str(weights)))
    save_file(older, weights, metadata={"format": "pt"})
    recorded = read_fingerprint(run)
    assert recorded is not None
    keys = dict(recorded["keys"])
    digest = architecture_hash(older_wrapper)
    assert digest != keys["model.architecture"]
    keys["model.architecture"] = digest
    write_fingerprint(run, keys)
    resumed = load_file(str(_run(pretrain, run) / "model.safetensors"))
    assert resumed.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, resumed[name]), name
