"""The family contract for XLM on generated bilingual data (never the bundled samples).

Two made-up languages, ``xa`` and ``xb``, with disjoint words: ``xb`` is ``xa`` word for
word through a fixed lexicon, in reverse order. Monolingual streams, parallel pairs and a
held-out set train and score a tiny MLM+TLM run; a two-label task in ``xa`` (does the
sentence hold a "marked" word?) is fine-tuned and scored zero-shot on its ``xb`` rendering.
"""

from __future__ import annotations

import random
from pathlib import Path

from family_contract import FamilyContract

FAMILY = "xlm"
WORDS = 40
MARKED = range(5)  # xa words a0..a4 make a sentence "yes"


def _sentence(rng: random.Random, marked: bool | None = None) -> list[int]:
    while True:
        ids = [rng.randrange(WORDS) for _ in range(rng.randint(4, 8))]
        if marked is None or any(i in MARKED for i in ids) == marked:
            return ids


def _xa(ids: list[int]) -> str:
    return " ".join(f"a{i}" for i in ids)


def _xb(ids: list[int]) -> str:
    return " ".join(f"q{(7 * i) % WORDS}z" for i in reversed(ids))


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def corpora(root: Path) -> Path:
    """Monolingual ``<lang>.txt``, parallel ``xa-xb.tsv`` and a held-out pair file."""
    rng = random.Random(0)
    mono = [_sentence(rng) for _ in range(150)]
    _write(root / "mono" / "xa.txt", [_xa(s) for s in mono])
    _write(root / "mono" / "xb.txt", [_xb(s) for s in reversed(mono)])
    pairs = [_sentence(rng) for _ in range(80)]
    _write(root / "parallel" / "xa-xb.tsv", [f"{_xa(s)}\t{_xb(s)}" for s in pairs])
    heldout = [_sentence(rng) for _ in range(12)]
    _write(root / "heldout" / "xa-xb.tsv", [f"{_xa(s)}\t{_xb(s)}" for s in heldout])
    return root


def task(root: Path) -> dict[str, Path]:
    """``label<TAB>text`` files: ``train`` in xa, ``dev`` per language (the same rows)."""
    rng = random.Random(1)
    rows = [(label, _sentence(rng, label == "yes")) for label in ["yes", "no"] * 10]
    return {
        "train": _write(root / "train.xa.tsv", [f"{label}\t{_xa(s)}" for label, s in rows]),
        "xa": _write(root / "dev.xa.tsv", [f"{label}\t{_xa(s)}" for label, s in rows[:8]]),
        "xb": _write(root / "dev.xb.tsv", [f"{label}\t{_xb(s)}" for label, s in rows[:8]]),
    }


class TestXLMContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        data = corpora(tmp_path / "data")
        return [
            "experiment=xlm_tlm_tiny",
            f"data.corpus={data / 'mono'}",
            f"data.parallel={data / 'parallel'}",
            f"data.evaluation_parallel={data / 'heldout'}",
            "data.directions=[xa-xb,xb-xa]",
            f"data.cache_dir={tmp_path / 'cache'}",
            "data.vocab_size=120",
            "data.batch_size=4",
            "data.stream_length=16",
            "data.max_length=24",
            "model.hidden_size=16",
            "model.intermediate_size=32",
            "trainer.max_steps=2",
            "trainer.save_every=1000",  # FAST's save_every=0 is refused by TrainerConfig
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(corpora(tmp_path / "eval") / "heldout")

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        files = task(tmp_path / "task")
        return [
            "experiment=xlm_zero_shot",  # recipe: xlm_finetune, the xlm family's finetune
            f"init_from={final_dir}",
            f"xlm_finetune.train_file={files['train']}",
            "xlm_finetune.train_lang=xa",
            "~xlm_finetune.dev",  # the preset's en/fr/de files give way to generated ones
            f"+xlm_finetune.dev={{xa:{files['xa']},xb:{files['xb']}}}",
            "xlm_finetune.max_length=24",
            "trainer.max_steps=2",
            "trainer.save_every=1000",  # FAST's save_every=0 is refused by TrainerConfig
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    # XLM's zero-shot fine-tuning is composed from the pre-training root
    # (`ptm pretrain experiment=xlm_zero_shot init_from=...`).
    finetune_config = "config"
