"""Generated data for XNLG tests: a made-up language pair (``xq``/``xz``) with its own
vocabulary, never the bundled samples.

``xz`` is ``xq`` word for word through a fixed permutation of the word ids, written with
other letters (no shared token). The generation task maps a sentence to its words at even
positions ("headline"), in the sentence's own language.
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = 36


def _sentence(rng: random.Random) -> list[int]:
    return [rng.randrange(WORDS) for _ in range(rng.randint(4, 8))]


def xq(ids: list[int]) -> str:
    return " ".join(f"q{i}" for i in ids)


def xz(ids: list[int]) -> str:
    return " ".join(f"z{(5 * i) % WORDS}k" for i in ids)


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def corpora(root: Path, mono: int = 150, pairs: int = 100) -> Path:
    """``mono/{xq,xz}.txt`` and ``parallel/xq-xz.tsv``."""
    rng = random.Random(0)
    _write(root / "mono" / "xq.txt", [xq(_sentence(rng)) for _ in range(mono)])
    _write(root / "mono" / "xz.txt", [xz(_sentence(rng)) for _ in range(mono)])
    made = [_sentence(rng) for _ in range(pairs)]
    _write(root / "parallel" / "xq-xz.tsv", [f"{xq(s)}\t{xz(s)}" for s in made])
    return root


def headline_task(root: Path, train: int = 40, dev: int = 10) -> dict[str, Path]:
    """``source<TAB>target``: ``train.xq.tsv``, ``dev.xq.tsv``, ``dev.xz.tsv``."""
    rng = random.Random(1)
    rows = [_sentence(rng) for _ in range(train + dev)]
    return {
        "train": _write(root / "train.xq.tsv", [f"{xq(s)}\t{xq(s[::2])}" for s in rows[:train]]),
        "xq": _write(root / "dev.xq.tsv", [f"{xq(s)}\t{xq(s[::2])}" for s in rows[train:]]),
        "xz": _write(root / "dev.xz.tsv", [f"{xz(s)}\t{xz(s[::2])}" for s in rows[train:]]),
    }
