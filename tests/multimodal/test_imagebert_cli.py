"""`ptm pretrain experiment=imagebert_tiny` from the command line: two stages on data of two
qualities, losses fall, final/ reloads as an ImageBERT with its four objectives, `ptm
evaluate`'s scorer reads it, and `experiment=imagebert_vqa_tiny` fine-tunes it on VQA."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from multimodal_cli import finetune_vqa_briefly

from flows.cli import main
from ptm_multimodal import ImageBertModel, load_multimodal
from ptm_multimodal.synthetic import write_synthetic_dataset


@pytest.mark.integration
def test_imagebert_tiny_runs_its_stages_losses_fall_and_it_finetunes(
    tmp_path: Path, one_thread: None, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "run"
    argv = [
        "pretrain",
        "experiment=imagebert_tiny",
        f"trainer.output_dir={out}",
        "trainer.max_steps=80",
        "trainer.log_every=1",
        "trainer.progress=false",
        "trainer.device=cpu",
        "data.stages.0.steps=40",
        "data.stages.0.synthetic.num_images=160",
        "data.stages.1.steps=40",
        "data.stages.1.synthetic.num_images=80",
        "data.stages.1.synthetic.eval_images=20",
        "data.batch_size=16",
    ]
    with caplog.at_level("INFO", logger="ptm_core.data.stages"):
        assert main(argv) == 0
    assert "stage 1/2 'weak' begins at step 0" in caplog.text
    assert "stage 2/2 'clean' begins at step 40" in caplog.text
    # each stage generated its own data; the weak one's captions are partly another scene's
    weak = [json.loads(x) for x in (out / "data" / "weak" / "pairs.jsonl").read_text().splitlines()]
    clean = [
        json.loads(x) for x in (out / "data" / "clean" / "pairs.jsonl").read_text().splitlines()
    ]
    assert (len(weak), len(clean)) == (160, 80)
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "mlm/loss" in r]
    assert len(records) == 80
    for key in ("loss", "mlm/loss"):
        first = statistics.fmean(r[key] for r in records[:10])
        last = statistics.fmean(r[key] for r in records[-10:])
        assert last < first - 0.2, (key, first, last)
    for key in ("region/moc", "region/mrfr", "itm/loss"):
        assert all(math.isfinite(r[key]) for r in records if key in r), key
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["architecture"] == "imagebert" and config["ptm_model"] == "imagebert"
    loaded, _ = load_multimodal(out / "final")
    assert isinstance(loaded.encoder, ImageBertModel)
    assert set(loaded.objectives.objectives) == {"mlm", "region", "itm"}
    assert json.loads((out / "evaluation.json").read_text())["matching"]["num_pairs"] == 40

    from ptm_multimodal.evaluation_kinds import score_imagebert

    pairs = write_synthetic_dataset(tmp_path / "heldout", 24, seed=5)
    scores = score_imagebert(str(out / "final"), str(pairs), seed=0)
    assert 0.0 <= scores["matching/accuracy"] <= 1.0 and 0.0 <= scores["mlm/accuracy"] <= 1.0
    assert math.isfinite(scores["region/moc"]) and math.isfinite(scores["region/mrfr"])

    tuned = finetune_vqa_briefly("imagebert_vqa_tiny", out / "final", tmp_path)
    saved = json.loads((tuned / "final" / "config.json").read_text())
    assert saved["architecture"] == "imagebert" and (tuned / "final" / "task.json").is_file()
