"""ModernBERT's masked-LM pre-training cannot see the tokens it predicts.

The encoder equals transformers' within 1e-5, but the objective path (collation,
unpadding, the sliding-window structure built per batch) is ptm's own. On a corpus of
words drawn independently and uniformly, with every selected position replaced by
``[MASK]``, no model can beat the rate of the one predictable token (the ``.`` ending each
sentence, 1 in 13) plus chance on the rest; a leak of the original ids lets it copy them.
The same run with the selected positions left unchanged (a leak by construction) shows
that the test can fail.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from flows.cli import main

WORDS = [f"w{i:03d}" for i in range(200)]
SENTENCE = 12  # words, then "."


def _corpus(root: Path) -> Path:
    rng = random.Random(0)
    root.mkdir()
    documents = [
        "\n".join(" ".join(rng.choices(WORDS, k=SENTENCE)) + " ." for _ in range(4))
        for _ in range(300)
    ]
    (root / "random.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return root


def _accuracy(corpus: Path, run: Path, mask_token_prob: float) -> float:
    code = main(
        [
            "pretrain",
            "experiment=modernbert_tiny",
            f"data.corpus={corpus}",
            f"data.cache_dir={run.parent / 'cache'}",
            "data.max_length=64",
            f"objective.objectives.mlm.mask_token_prob={mask_token_prob}",
            "objective.objectives.mlm.random_token_prob=0.0",
            "trainer.max_steps=60",
            "trainer.log_every=20",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [r["mlm/accuracy"] for r in records if "mlm/accuracy" in r][-2:]
    return sum(last) / len(last)


@pytest.mark.slow
def test_masked_tokens_are_not_visible_to_the_model(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    ceiling = 1 / (SENTENCE + 1) + 1 / len(WORDS)  # the "." ends, plus chance elsewhere
    masked = _accuracy(corpus, tmp_path / "masked", mask_token_prob=1.0)
    assert masked < ceiling + 0.05, f"MLM accuracy {masked:.3f} on random words: a leak"
    # Selected positions keep their token: the ids are visible and the model copies them.
    visible = _accuracy(corpus, tmp_path / "visible", mask_token_prob=0.0)
    assert visible > 0.5, f"copying visible tokens reached only {visible:.3f}"
