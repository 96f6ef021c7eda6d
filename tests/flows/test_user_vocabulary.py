"""A user's own corpus gets a vocabulary trained on it, not the sample's (#31 item 3)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from flows.config import compose_config, config_dir, project_root
from ptm_core.pretraining import open_training_corpus

SAMPLE_VOCAB = project_root() / "data_specs" / "text_corpus" / "sample-vocab.txt"


def _nonce_corpus(path: Path, documents: int = 40, seed: int = 0) -> Path:
    """Documents of made-up words, most spelled with letters the sample vocabulary lacks."""
    rng = random.Random(seed)
    syllables = ["zq", "vør", "blim", "taß", "жу", "phre", "λno", "wub", "klø", "drax"]
    words = ["".join(rng.sample(syllables, 3)) for _ in range(300)]
    lines = []
    for _ in range(documents):
        for _ in range(rng.randint(2, 6)):
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 14))) + ".")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _sample_data_presets() -> list[str]:
    """Experiment presets whose data is a bundled text corpus (they pin its vocabulary)."""
    found = []
    for preset in sorted((config_dir() / "experiment").glob("*.yaml")):
        text = preset.read_text(encoding="utf-8")
        if "override /data: sample_corpus" in text or "override /data: kg_sample" in text:
            found.append(preset.stem)
    return found


@pytest.mark.parametrize("experiment", _sample_data_presets())
def test_own_corpus_leaves_the_sample_vocabulary(experiment: str, tmp_path: Path) -> None:
    corpus = _nonce_corpus(tmp_path / "mine.txt")
    assert compose_config([f"experiment={experiment}"]).data.tokenizer is not None
    cfg = compose_config([f"experiment={experiment}", f"data.corpus={corpus}"])
    assert cfg.data.tokenizer is None  # trained on the user's corpus
    given = tmp_path / "vocab.txt"
    cfg = compose_config(
        [f"experiment={experiment}", f"data.corpus={corpus}", f"data.tokenizer={given}"]
    )
    assert cfg.data.tokenizer == str(given)


def test_own_linked_corpus_leaves_the_sample_vocabulary(tmp_path: Path) -> None:
    linked = tmp_path / "linked.jsonl"
    cfg = compose_config(["experiment=ernie_thu_tiny", f"data.linked_corpus={linked}"])
    assert cfg.data.tokenizer is None


def test_trained_vocabulary_is_logged_and_fits(tmp_path: Path, caplog) -> None:
    corpus = _nonce_corpus(tmp_path / "mine.txt", seed=1)
    with caplog.at_level(logging.INFO, logger="ptm_core.data.vocabulary_fit"):
        open_training_corpus(
            corpus, None, tokenizer=None, vocab_size=600, cache_dir=tmp_path / "cache"
        )
    lines = [r.getMessage() for r in caplog.records]
    assert any("trained on the training data" in line and str(corpus) in line for line in lines)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_sample_vocabulary_on_other_words_warns_with_the_unknown_share(
    tmp_path: Path, caplog
) -> None:
    corpus = _nonce_corpus(tmp_path / "mine.txt", seed=2)
    with caplog.at_level(logging.INFO, logger="ptm_core.data.vocabulary_fit"):
        open_training_corpus(corpus, None, tokenizer=SAMPLE_VOCAB, cache_dir=tmp_path / "cache")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    assert "[UNK]" in warnings[0] and "data.tokenizer=null" in warnings[0]
    assert str(SAMPLE_VOCAB) in warnings[0]
