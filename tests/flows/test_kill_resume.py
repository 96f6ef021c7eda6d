"""kill -9 at varied points of pre-training and fine-tuning, then the same command: the final
weights equal an uninterrupted run's bit for bit, and no step is logged twice or lost (#31).

Each family's run is killed several times in a row (during start-up, just after a
checkpoint, between two checkpoints, near the end), restarted after every kill, and
compared with a run that was never interrupted. Data is a user's own (generated), not the
samples. The 32 kills of the four families are ``stress`` (``make test-stress``); the normal
suite kills a toy run (tests/core/training/test_run_folder.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kill_resume import (
    kill_9_at,
    own_corpus,
    own_task,
    own_vocab,
    records,
    same_final_weights,
)

SMALL = [
    "data.max_length=32",
    "data.batch_size=4",
    "trainer.progress=false",
    "trainer.log_every=1",
    "trainer.save_every=4",
    "trainer.max_steps=24",
]
# Startup (no checkpoint yet), mid-interval, right at a save, and near the end.
KILLS: list[float] = [1.5, 2, 4, 6, 9, 13, 17, 21]


def _pretrain(experiment: str, tmp_path: Path, model: list[str]) -> list[str]:
    return [
        "pretrain",
        f"experiment={experiment}",
        *SMALL,
        f"data.corpus={own_corpus(tmp_path / 'corpus.txt')}",
        f"data.tokenizer={own_vocab(tmp_path / 'vocab.txt')}",
        *model,
    ]


def _finetune(tmp_path: Path) -> list[str]:
    return [
        "finetune",
        *own_task(tmp_path / "task"),
        "model=bert_tiny",
        "model.num_layers=1",
        "trainer.progress=false",
        "trainer.log_every=1",
        "trainer.save_every=4",
        "trainer.max_steps=24",
    ]


def _check(args: list[str], tmp_path: Path, kills: list[float]) -> int:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    seen = kill_9_at(args, straight, killed, kills, tmp_path)
    assert len(seen) == len(kills)
    assert records(killed) == records(straight)  # no step twice, none lost, same losses
    assert [r["step"] for r in records(killed)] == list(range(1, 25))
    assert same_final_weights(straight / "final", killed / "final") > 0
    return len(seen)


TINY = ["model.num_layers=1", "model.hidden_size=32", "model.intermediate_size=64"]
FAMILIES = {
    "bert_mlm_nsp": lambda tmp: _pretrain("bert_tiny", tmp, TINY),
    "electra": lambda tmp: _pretrain("electra_tiny", tmp, ["model.num_layers=1"]),
    "bart_seq2seq": lambda tmp: _pretrain(
        "bart_tiny", tmp, ["model.encoder_layers=1", "model.decoder_layers=1"]
    ),
    "bert_finetune": _finetune,
}


@pytest.mark.stress
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_eight_kill_9s_each_resume_bit_identically(family: str, tmp_path: Path) -> None:
    assert _check(FAMILIES[family](tmp_path), tmp_path, KILLS) == 8
