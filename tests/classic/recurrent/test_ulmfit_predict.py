"""`ptm predict` on a ULMFiT classifier (ptm-classic's fine-tuned folder, found through the
family's task loader): the same predictions as the recipe's unbatched path."""

from __future__ import annotations

import json
from pathlib import Path

from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from ptm_classic.recurrent.ulmfit import finetune_ulmfit
from ptm_core.finetune.predict_output import predict_file
from ptm_core.finetune.recipe import predict
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

ROOT = Path(__file__).resolve().parents[3]
DEV = ROOT / "data_specs/gain_tasks/sentiment_dev.tsv"


def test_predict_on_a_ulmfit_classifier(tmp_path: Path) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(
        ROOT / "data_specs/text_corpus/sample-vocab.txt", lowercase=True
    )
    config = AWDLSTMConfig(
        vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=24, num_layers=2
    )
    lm_dir = AWDLSTMLanguageModel(config).save_pretrained(
        tmp_path / "lm", extra_writers=[tokenizer.save]
    )
    task = TaskSpec(
        name="gain_sentiment",
        kind="classification",
        train=str(ROOT / "data_specs/gain_tasks/sentiment_train.tsv"),
        dev=str(DEV),
        max_length=32,
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"), max_steps=2, progress=False, device="cpu"
    )
    final = finetune_ulmfit(task, model_dir=lm_dir, trainer=trainer).encoder_dir
    stats = predict_file(final, DEV, tmp_path / "out.jsonl", batch_size=7)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    _, expected = predict(final, DEV)
    assert stats.examples == len(records) == len(expected)
    assert [r["prediction"] for r in records] == expected
    assert all(set(r["scores"]) == {"0", "1"} for r in records)
