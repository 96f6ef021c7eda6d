"""`ptm pretrain experiment=vlbert_tiny` from the command line: its losses fall, its
final/ reloads as a VL-BERT, and `experiment=vlbert_vqa_tiny` fine-tunes it on VQA."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from multimodal_cli import finetune_vqa_briefly

from flows.cli import main
from ptm_multimodal import VlbertModel, load_multimodal


@pytest.mark.integration
def test_vlbert_tiny_losses_fall_and_it_finetunes_on_vqa(tmp_path: Path, one_thread: None) -> None:
    out = tmp_path / "run"
    argv = [
        "pretrain",
        "experiment=vlbert_tiny",
        f"trainer.output_dir={out}",
        "trainer.max_steps=60",
        "trainer.log_every=1",
        "trainer.progress=false",
        "trainer.device=cpu",
        "data.synthetic.num_images=120",
        "data.synthetic.eval_images=0",
        "data.batch_size=16",
    ]
    assert main(argv) == 0
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "mlm/loss" in r]
    assert len(records) == 60
    assert not any("itm/loss" in r for r in records)  # VL-BERT has no matching task
    for key in ("loss", "mlm/loss"):
        first = statistics.fmean(r[key] for r in records[:10])
        last = statistics.fmean(r[key] for r in records[-10:])
        assert last < first - 0.2, (key, first, last)
    assert all(math.isfinite(r["mvrc/loss"]) and r["mvrc/regions"] > 0 for r in records)
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["architecture"] == "vlbert" and config["ptm_model"] == "vlbert"
    loaded, _ = load_multimodal(out / "final")
    assert isinstance(loaded.encoder, VlbertModel)
    assert set(loaded.objectives.objectives) == {"mlm", "mvrc"}
    # `ptm evaluate`'s scorer: VL-BERT's own objectives on held-out pairs, no matching.
    from ptm_multimodal.evaluation_kinds import score_vlbert
    from ptm_multimodal.synthetic import write_synthetic_dataset

    pairs = write_synthetic_dataset(tmp_path / "heldout", 24, seed=5)
    scores = score_vlbert(str(out / "final"), str(pairs), seed=0)
    assert 0.0 <= scores["mlm/accuracy"] <= 1.0 and math.isfinite(scores["mvrc/loss"])
    assert not any(key.startswith("itm") for key in scores)

    tuned = finetune_vqa_briefly("vlbert_vqa_tiny", out / "final", tmp_path)
    saved = json.loads((tuned / "final" / "config.json").read_text())
    assert saved["architecture"] == "vlbert" and (tuned / "final" / "task.json").is_file()
