"""`ptm pretrain experiment=elmo_tiny` trains the biLM and writes a loadable final/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_classic.recurrent.bilm import load_bilm, read_vocabulary
from ptm_classic.recurrent.char_cnn import characters_to_ids


@pytest.mark.integration
def test_elmo_tiny_trains_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "pretrain",
            "experiment=elmo_tiny",
            "trainer.max_steps=3",
            "trainer.log_every=1",
            "trainer.progress=false",
            "data.batch_size=4",
            f"trainer.output_dir={out}",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert str(out / "final") in printed
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(r["lm/perplexity"] > 1 and "lm/forward_nll" in r for r in records)
    # The end table's row: `  heldout_perplexity  123.4567` (4 decimals).
    row = next(x for x in printed.splitlines() if x.strip().startswith("heldout_perplexity "))
    shown = float(row.split()[-1])
    assert shown > 1
    saved = json.loads((out / "eval.json").read_text())
    assert saved["heldout_perplexity"] == pytest.approx(shown, rel=1e-3)
    assert saved["heldout_rows"] == 23  # every 20th of the sample's 453 rows
    bilm = load_bilm(out / "final")
    vocab = read_vocabulary(out / "final")
    assert vocab[:3] == ["<unk>", "<s>", "</s>"] and len(vocab) == bilm.config.vocab_size
    ids = characters_to_ids([["Curie", "won", "Nobelprize-ish"]])
    states = bilm.layer_states(ids, ids[..., 0] != 0)
    assert len(states) == 3 and states[2].shape == (1, 3, 128)
    assert all(torch.isfinite(s).all() for s in states)
