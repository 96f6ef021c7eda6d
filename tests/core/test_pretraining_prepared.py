"""Pre-training from prepared (memory-mapped) data (issue 14).

- A raw corpus is prepared into the cache and trained on; preparing it explicitly and
  training on the prepared directory gives the same batches, so the same losses and weights
  (text encoders with NSP pairs and static masks, with single segments, and seq2seq).
- ``kill -9`` during training, then the same command again: bit-identical to a run that was
  never interrupted, with batches built in a DataLoader worker.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ptm_core import bert_encoder
from ptm_core.data.prepare import prepare_corpus
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective
from ptm_core.training import TrainerConfig
from tests.core.family_runs import pretrain_text

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"

ENCODER = functools.partial(
    bert_encoder, hidden_size=32, num_layers=1, num_heads=2, max_positions=64
)
OBJECTIVES = {
    "pairs": {"mlm": MaskedLMObjective, "nsp": NextSentenceObjective},  # static masks, NSP
    "single": {"mlm": functools.partial(MaskedLMObjective, mode="dynamic")},
}


def _trainer(out: Path, **overrides: object) -> TrainerConfig:
    settings: dict = {
        "output_dir": str(out),
        "max_steps": 4,
        "log_every": 1,
        "save_every": 4,
        "progress": False,
        "learning_rate": 1e-3,
        "seed": 3,
    }
    settings.update(overrides)
    return TrainerConfig(**settings)


def _losses(run: Path) -> list[float]:
    return [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines()]


def _same_weights(a: Path, b: Path) -> None:
    x, y = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert x.keys() == y.keys()
    for name in x:
        assert torch.equal(x[name], y[name]), name


@pytest.mark.integration
@pytest.mark.parametrize("layout", ["pairs", "single"])
def test_raw_and_prepared_paths_train_identically(tmp_path: Path, layout: str) -> None:
    common = {
        "encoder": ENCODER,
        "objectives": OBJECTIVES[layout],
        "max_length": 64,
        "batch_size": 8,
        "seed": 3,
    }
    raw = pretrain_text(
        CORPUS,
        tokenizer=VOCAB,
        cache_dir=tmp_path / "cache",
        trainer=_trainer(tmp_path / "raw"),
        **common,
    )
    prepared = prepare_corpus(CORPUS, tmp_path / "prepared", tokenizer=VOCAB)
    again = pretrain_text(
        prepared=prepared.directory, trainer=_trainer(tmp_path / "prep"), **common
    )
    assert raw.num_examples == again.num_examples > 0
    assert _losses(tmp_path / "raw") == _losses(tmp_path / "prep")
    _same_weights(raw.encoder_dir, again.encoder_dir)
    # The raw corpus was prepared once, into the cache, and is reused.
    cached = list((tmp_path / "cache").iterdir())
    assert len(cached) == 1 and (cached[0] / "manifest.json").is_file()
    pretrain_text(
        CORPUS,
        tokenizer=VOCAB,
        cache_dir=tmp_path / "cache",
        trainer=_trainer(tmp_path / "raw2"),
        **common,
    )
    assert list((tmp_path / "cache").iterdir()) == cached
    assert _losses(tmp_path / "raw2") == _losses(tmp_path / "raw")


@pytest.mark.integration
def test_seq2seq_raw_and_prepared_paths_train_identically(tmp_path: Path) -> None:
    from ptm_core.encoders import build_encoder_decoder
    from ptm_core.objectives import BartDenoisingObjective
    from tests.core.family_runs import pretrain_seq2seq

    model = functools.partial(
        build_encoder_decoder,
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )
    common = {
        "model": model,
        "objective": BartDenoisingObjective,
        "max_length": 64,
        "batch_size": 8,
        "seed": 1,
    }
    raw = pretrain_seq2seq(
        CORPUS,
        tokenizer=VOCAB,
        cache_dir=tmp_path / "cache",
        trainer=_trainer(tmp_path / "raw"),
        **common,
    )
    prepared = prepare_corpus(CORPUS, tmp_path / "prepared", tokenizer=VOCAB)
    again = pretrain_seq2seq(
        prepared=prepared.directory, trainer=_trainer(tmp_path / "prep"), **common
    )
    assert raw.num_examples == again.num_examples > 0
    assert _losses(tmp_path / "raw") == _losses(tmp_path / "prep")
    _same_weights(raw.encoder_dir, again.encoder_dir)


RUN = """
import functools, sys
from pathlib import Path
from ptm_core import bert_encoder
from ptm_core.families import get
from ptm_core.families.core_settings import TextData, TextSettings
from ptm_core.families.runner import PretrainRun, run_pretraining
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective
from ptm_core.training import TrainerConfig
out, prepared = Path(sys.argv[1]), sys.argv[2]
data = TextData(prepared=prepared, max_length=64, batch_size=8, num_workers=1)
run_pretraining(get("encoder"), PretrainRun(
    settings=TextSettings(data=data),
    model=functools.partial(bert_encoder, hidden_size=32, num_layers=1, num_heads=2, max_positions=64),
    objectives={"mlm": MaskedLMObjective, "nsp": NextSentenceObjective},
    weights={},
    trainer=TrainerConfig(output_dir=str(out), max_steps=40, save_every=5, log_every=1,
                          progress=False, learning_rate=1e-3, seed=3),
    seed=3,
))
"""


@pytest.mark.integration
@pytest.mark.slow
def test_kill_9_during_training_then_resume_is_bit_identical(tmp_path: Path) -> None:
    prepared = prepare_corpus(CORPUS, tmp_path / "prepared", tokenizer=VOCAB).directory
    script = tmp_path / "run.py"
    script.write_text(RUN)
    straight = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "straight"), str(prepared)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert straight.returncode == 0, straight.stderr[-3000:]

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [sys.executable, str(script), str(killed), str(prepared)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (killed / "checkpoints" / "step-00000015").is_dir():
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / "final").exists()
    resumed = subprocess.run(
        [sys.executable, str(script), str(killed), str(prepared)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _same_weights(tmp_path / "straight" / "final", killed / "final")
    losses = _losses(tmp_path / "straight")
    assert _losses(killed) == losses and len(losses) == 40
