"""``ptm pretrain init_from=<Hugging Face BertForPreTraining folder>`` continues pre-training
with the folder's own tokenizer and its MLM/NSP heads: the loss of step 1 equals
transformers' loss on the batch the run saw."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from hf_folders import SAMPLE_VOCAB, sample_wordpiece, saved

from flows.cli import main
from ptm_core.models.pretraining import PretrainingModel


def _hf_vocabulary() -> list[str]:
    """Not the data preset's vocabulary (the sample's 2,240 pieces): its first 1,200."""
    return SAMPLE_VOCAB.read_text(encoding="utf-8").splitlines()[:1200]


def _hf_bert_for_pretraining(directory: Path) -> Any:
    tokenizer = sample_wordpiece()
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    return saved(transformers.BertForPreTraining(config), directory, tokenizer)


def _run(hf_dir: Path, run: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, torch.Tensor]:
    """``ptm pretrain`` for one step; returns the first batch the model saw."""
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
            f"init_from={hf_dir}",
            "trainer.max_steps=1",
            "trainer.log_every=1",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
            "data.batch_size=4",
            "data.max_length=64",
            # The first loss is compared with transformers' fp32 loss to 1e-5: a check of
            # the imported weights and heads, so the step runs in fp32, not bf16 autocast.
            "trainer.precision=fp32",
        ]
    )
    assert code == 0
    return seen[0]


def test_hf_bert_for_pretraining_continues_with_its_heads_and_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    hf_dir, run = tmp_path / "hf", tmp_path / "run"
    model = _hf_bert_for_pretraining(hf_dir)
    with caplog.at_level(logging.INFO):
        batch = _run(hf_dir, run, monkeypatch)
    assert "random init" not in caplog.text
    # The checkpoint's own tokenizer (tokenizer.json as transformers wrote it) is the run's.
    assert (run / "tokenizer" / "tokenizer.json").read_bytes() != b""
    kept = (run / "tokenizer" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert kept == _hf_vocabulary()

    first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert first["step"] == 1
    with torch.no_grad():
        expected = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"].long(),
            token_type_ids=batch["token_type_ids"],
            labels=batch["mlm_labels"],
            next_sentence_label=batch["next_sentence_label"],
        ).loss
    assert (batch["mlm_labels"] != -100).any()
    assert first["loss"] == pytest.approx(expected.item(), abs=1e-5)

    # Fresh heads give another loss: the comparison above can fail.
    fresh = transformers.BertForPreTraining(model.config).eval()
    fresh.bert.load_state_dict(model.bert.state_dict())
    with torch.no_grad():
        other = fresh(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"].long(),
            token_type_ids=batch["token_type_ids"],
            labels=batch["mlm_labels"],
            next_sentence_label=batch["next_sentence_label"],
        ).loss
    assert abs(other.item() - expected.item()) > 1e-3


def test_an_init_from_folder_without_tokenizer_says_which_tokenizer_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_dir = tmp_path / "hf"
    config = transformers.BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    transformers.BertForPreTraining(config).save_pretrained(hf_dir)
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            f"init_from={hf_dir}",
            "trainer.max_steps=1",
            f"trainer.output_dir={tmp_path / 'run'}",
            f"data.cache_dir={tmp_path / 'cache'}",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "vocab_size is 99" in err and "has no tokenizer files" in err
    assert "data.tokenizer=" in err
