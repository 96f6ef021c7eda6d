"""`ptm pretrain experiment=lxmert_tiny` from the command line, and `ptm export --format hf`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_multimodal import LxmertModel, load_multimodal
from ptm_multimodal.lxmert_loading import load_lxmert

FAST = [
    "trainer.max_steps=3",
    "trainer.log_every=1",
    "trainer.progress=false",
    "data.synthetic.num_images=40",
    "data.synthetic.eval_images=10",
    "data.batch_size=8",
]


@pytest.mark.integration
def test_lxmert_tiny_pretrains_logs_each_task_and_exports_to_transformers(
    tmp_path: Path, one_thread: None
) -> None:
    out = tmp_path / "run"
    assert main(["pretrain", "experiment=lxmert_tiny", f"trainer.output_dir={out}", *FAST]) == 0
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    for key in ("lm/loss", "obj/feat_loss", "obj/label_loss", "itm/loss", "qa/loss"):
        assert all(key in r for r in records), key
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["architecture"] == "lxmert" and config["feature_spec"]["feature_size"] == 32
    # The multimodal loader that `ptm evaluate` uses hands an LXMERT final to its own loader.
    loaded, _ = load_multimodal(out / "final")
    assert isinstance(loaded.encoder, LxmertModel)

    transformers = pytest.importorskip("transformers")
    assert main(["export", "--format", "hf", str(out / "final"), str(tmp_path / "hf")]) == 0
    hf = transformers.LxmertForPreTraining.from_pretrained(tmp_path / "hf").eval()
    wrapped, tokenizer = load_lxmert(out / "final")
    wrapped.eval()
    ids = torch.tensor([tokenizer.encode("a red circle left of a blue square").input_ids])
    g = torch.Generator().manual_seed(0)
    feats, boxes = torch.randn(1, 3, 32, generator=g), torch.rand(1, 3, 4, generator=g)
    with torch.no_grad():
        ours = wrapped.encoder(ids, feats, visual_boxes=boxes)
        theirs = hf(input_ids=ids, visual_feats=feats, visual_pos=boxes)
        lm = wrapped.objectives.objectives["lm"].logits(ours)
        qa = wrapped.objectives.objectives["qa"].logits(ours)
    assert (lm - theirs.prediction_logits).abs().max() <= 1e-5
    assert (qa - theirs.question_answering_score).abs().max() <= 1e-5
