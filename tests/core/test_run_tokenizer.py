"""A failed resume must never destroy the run's tokenizer (issue 20, defect 3).

Reproduced: a run trains its own vocabulary (tokenizer=None); a second command in the
same output directory with another vocabulary fails at the checkpoint check, but had
already overwritten ``tokenizer/``, so the original command then failed too.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from ptm_core import bert_encoder
from ptm_core.data import read_text_corpus
from ptm_core.objectives import MaskedLMObjective
from ptm_core.pretraining import keep_run_tokenizer
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from tests.core.family_runs import pretrain_text

CORPUS = (
    Path(__file__).resolve().parents[2] / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
)
OTHER_VOCAB = CORPUS.parent.parent / "sample-vocab.txt"


def _pretrain(output_dir: Path, tokenizer: Path | None, max_steps: int) -> Path:
    result = pretrain_text(
        CORPUS,
        encoder=functools.partial(
            bert_encoder, hidden_size=32, num_layers=1, num_heads=2, max_positions=64
        ),
        objectives={"mlm": MaskedLMObjective},
        trainer=TrainerConfig(
            output_dir=str(output_dir), max_steps=max_steps, save_every=1, progress=False
        ),
        tokenizer=tokenizer,
        vocab_size=300,
        max_length=64,
        batch_size=8,
    )
    return result.encoder_dir


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.integration
def test_another_vocabulary_in_a_run_with_checkpoints_changes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _pretrain(run, tokenizer=None, max_steps=2)  # trains its own 300-piece vocabulary
    before = _files(run / "tokenizer")

    with pytest.raises(ValueError) as caught:
        _pretrain(run, tokenizer=OTHER_VOCAB, max_steps=3)
    message = str(caught.value)
    assert str(run / "tokenizer") in message
    assert "checkpoints" in message and "new trainer.output_dir" in message
    assert _files(run / "tokenizer") == before  # checked first, nothing written

    # The original command still resumes and finishes (the same budget: another one is a
    # different run, refused by the folder's fingerprint).
    final = _pretrain(run, tokenizer=None, max_steps=2)
    assert (final / "model.safetensors").is_file()
    assert _files(run / "tokenizer") == before


def test_the_same_tokenizer_is_accepted_and_not_rewritten(tmp_path: Path) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(OTHER_VOCAB)
    saved = keep_run_tokenizer(tokenizer, tmp_path)
    (tmp_path / "checkpoints" / "step-00000001").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-00000001" / "trainer_state.json").write_text("{}")
    mtimes = {p.name: p.stat().st_mtime_ns for p in saved.iterdir()}
    assert keep_run_tokenizer(WordPieceTokenizer.from_vocab(OTHER_VOCAB), tmp_path) == saved
    assert {p.name: p.stat().st_mtime_ns for p in saved.iterdir()} == mtimes


def test_without_checkpoints_a_new_tokenizer_replaces_the_old(tmp_path: Path) -> None:
    documents = read_text_corpus(CORPUS)
    trained = WordPieceTokenizer.train((s for d in documents for s in d.sentences), vocab_size=200)
    keep_run_tokenizer(trained, tmp_path)
    keep_run_tokenizer(WordPieceTokenizer.from_vocab(OTHER_VOCAB), tmp_path)
    reloaded = WordPieceTokenizer.from_directory(tmp_path / "tokenizer")
    assert reloaded.vocab_size == WordPieceTokenizer.from_vocab(OTHER_VOCAB).vocab_size
