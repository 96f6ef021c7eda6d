"""XNLG from the command line on a generated language pair (not the samples): stage 1
(``experiment=xnlg_stage1_tiny``, XLM's MLM + TLM), stage 2 (``experiment=xnlg_tiny``) whose
losses fall, its ``final/`` reloads as XNLG, and ``experiment=xnlg_zero_shot`` fine-tunes on
``xq`` and generates ``xz`` zero-shot with BLEU/ROUGE in ``eval.json``."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from xnlg_generated import corpora, headline_task

from flows.cli import main
from ptm_multilingual.xnlg import XNLGModel


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models run fastest (and deterministically) on one thread of a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SMALL = ["model.hidden_size=32", "model.intermediate_size=64", "model.num_layers=2"]
COMMON = ["trainer.progress=false", "trainer.device=cpu"]


@pytest.mark.integration
def test_xnlg_stages_from_the_cli(tmp_path: Path, one_thread: None) -> None:
    data = corpora(tmp_path / "data")
    inputs = [
        f"data.corpus={data / 'mono'}",
        f"data.parallel={data / 'parallel'}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "data.batch_size=16",
    ]
    stage1 = tmp_path / "stage1"
    argv = ["pretrain", "experiment=xnlg_stage1_tiny", *inputs, *SMALL, *COMMON]
    argv += ["data.directions=[xq-xz,xz-xq]", "data.vocab_size=120", "trainer.max_steps=30"]
    assert main([*argv, f"trainer.output_dir={stage1}"]) == 0

    stage2 = tmp_path / "stage2"
    argv = ["pretrain", "experiment=xnlg_tiny", f"init_from={stage1 / 'final'}", *inputs]
    argv += [*COMMON, "trainer.max_steps=60", "trainer.log_every=1", "trainer.learning_rate=3e-3"]
    assert main([*argv, f"trainer.output_dir={stage2}"]) == 0
    records = [json.loads(x) for x in (stage2 / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "xnlg/loss" in r]
    assert len(records) == 60
    for key in ("xnlg/xae_loss", "xnlg/dae_loss"):
        first = statistics.fmean(r[key] for r in records[:10])
        last = statistics.fmean(r[key] for r in records[-10:])
        assert last < first - 0.3, (key, first, last)
    config = json.loads((stage2 / "final" / "config.json").read_text())
    assert config["ptm_model"] == "xnlg" and config["languages"] == ["xq", "xz"]
    model = XNLGModel.from_pretrained(stage2 / "final")
    assert len(model.decoder.layers) == 2
    # the frozen encoder left stage 2 as stage 1 wrote it
    from ptm_multilingual.model import XLMEncoder

    before = XLMEncoder.from_pretrained(stage1 / "final").state_dict()
    after = model.encoder.state_dict()
    assert all(before[k].equal(after[k]) for k in before)

    task = headline_task(tmp_path / "task")
    tuned = tmp_path / "tuned"
    argv = ["pretrain", "experiment=xnlg_zero_shot", f"init_from={stage2 / 'final'}", *COMMON]
    argv += [
        f"xnlg_finetune.train_file={task['train']}",
        "xnlg_finetune.train_lang=xq",
        "~xnlg_finetune.dev",  # the preset's xa/xb files give way to generated ones
        f"+xnlg_finetune.dev={{xq:{task['xq']},xz:{task['xz']}}}",
        "trainer.max_steps=6",
        "trainer.save_every=6",
        f"trainer.output_dir={tuned}",
    ]
    assert main(argv) == 0
    scores = json.loads((tuned / "eval.json").read_text())
    for lang in ("xq", "xz"):
        for metric in ("bleu", "rouge1", "rouge2", "rougeL"):
            assert math.isfinite(scores[f"dev/{lang}/{metric}"])
        assert len((tuned / "generations" / f"{lang}.txt").read_text().splitlines()) == 10
    assert (tuned / "final" / "xnlg_task.json").is_file()
    tuned_model = XNLGModel.from_pretrained(tuned / "final")
    # xnlg_finetune.train=encoder_layers: the decoder is stage 2's
    assert tuned_model.decoder.state_dict()["layers.0.cross_attention.q_proj.weight"].equal(
        model.decoder.state_dict()["layers.0.cross_attention.q_proj.weight"]
    )


def test_stage2_without_init_from_says_to_run_stage1(tmp_path: Path) -> None:
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        ["experiment=xnlg_tiny", f"trainer.output_dir={tmp_path / 'run'}", *COMMON]
    )
    with pytest.raises(ValueError, match="experiment=xnlg_stage1_tiny"):
        run_composed(cfg)
