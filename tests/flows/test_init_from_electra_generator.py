"""``ptm pretrain init_from=<ElectraForMaskedLM folder> objective=mlm`` continues ELECTRA's
generator with its own MLM head (step 1's loss is transformers' on the batch the run saw),
and ``ptm export --format hf`` writes an ``ElectraForMaskedLM`` again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from flows.cli import main
from ptm_core.models.pretraining import PretrainingModel

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"


def _generator(directory: Path) -> Any:
    lines = SAMPLE_VOCAB.read_text(encoding="utf-8").splitlines()[:1200]
    tokenizer = transformers.BertTokenizer(
        vocab={token: i for i, token in enumerate(lines)}, do_lower_case=True
    )
    config = transformers.ElectraConfig(
        vocab_size=len(lines),
        embedding_size=16,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    model = transformers.ElectraForMaskedLM(config)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # the head off its init (zero bias, unit norm) so a lost one shows
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=g))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model.eval()


def test_an_electra_generator_continues_with_its_head_and_exports_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_dir, run = tmp_path / "hf", tmp_path / "run"
    model = _generator(hf_dir)
    seen: list[dict[str, torch.Tensor]] = []
    forward = PretrainingModel.forward

    def recording(self: PretrainingModel, batch: dict[str, torch.Tensor]) -> Any:
        if not seen:
            seen.append({k: v.detach().clone() for k, v in batch.items() if torch.is_tensor(v)})
        return forward(self, batch)

    monkeypatch.setattr(PretrainingModel, "forward", recording)
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            "objective=mlm",
            f"init_from={hf_dir}",
            "trainer.max_steps=1",
            "trainer.log_every=1",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
            "data.batch_size=4",
            "data.max_length=64",
            "trainer.precision=fp32",
        ]
    )
    assert code == 0
    batch = seen[0]
    first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    with torch.no_grad():
        expected = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"].long(),
            token_type_ids=batch["token_type_ids"],
            labels=batch["mlm_labels"],
        ).loss
    assert (batch["mlm_labels"] != -100).any()
    assert first["loss"] == pytest.approx(expected.item(), abs=1e-5)

    capsys.readouterr()
    assert main(["export", "--format", "hf", str(run / "final"), str(tmp_path / "out")]) == 0
    assert "ElectraForMaskedLM" in capsys.readouterr().out
    exported = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out")
    assert type(exported) is transformers.ElectraForMaskedLM
