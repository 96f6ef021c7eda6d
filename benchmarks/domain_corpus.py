"""A generated drug-class domain: a corpus and a classification task on nonce compound names.

96 nonce compounds (``chlorbenzazole``, ``oxapyridine``...) are built from chemistry-like
syllables that the gain suite's vocabulary (``data_specs/gain_tasks/vocab.txt``) splits into
several pieces; half are antibiotics, half painkillers, assigned at random (no syllable
tells the class). Each class is split in halves: ``train`` compounds may occur in the
task's training set, ``heldout`` ones only in its dev set.

- The domain corpus uses all compounds, in sentences that show the class ("X cleared the
  infection in three days ."; "X eased the headache within an hour ."); a sixth of the
  sentences name no compound.
- The task puts one compound in a neutral frame that never occurs in the corpus and takes
  both classes equally ("the pharmacy ordered more X ."); the label is the class. A dev
  compound never occurs in fine-tuning, so only what pre-training read tells its class.

Everything is a function of the seed; nothing is committed (the benchmark writes it under
``$PTM_BENCH_DIR``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

CLASSES = ("antibiotic", "painkiller")
_HEADS = ["chlor", "fluor", "meth", "eth", "prop", "oxa", "aza", "thio", "benz", "cycl"]
_MIDDLES = ["pyr", "quin", "phen", "zol", "dex", "trim", "lor", "sulf", "tetr", "morph"]
_TAILS = ["azole", "idine", "amine", "oxide", "ocin", "afen", "olone", "etrol", "ipram"]
_SHOWS = {
    "antibiotic": [
        "the doctor gave {x} to kill the bacteria .",
        "{x} cleared the infection in three days .",
        "bacteria die quickly when {x} is in the blood .",
        "{x} is a strong antibiotic .",
        "after a week of {x} the infection was gone .",
        "the fever fell once {x} stopped the infection .",
        "she took {x} for the infection in her throat .",
    ],
    "painkiller": [
        "the doctor gave {x} to stop the pain .",
        "{x} eased the headache within an hour .",
        "the pain faded soon after {x} .",
        "{x} is a strong painkiller .",
        "after a dose of {x} the pain was gone .",
        "the ache in his back went away with {x} .",
        "she took {x} for the pain in her knee .",
    ],
}
_PLAIN = [
    "the nurse came in the morning .",
    "the hospital has a new wing .",
    "patients wait in the hall .",
    "the doctor wrote a long letter .",
    "the ward was quiet at night .",
]
_FRAMES = [
    "the pharmacy ordered more {x} .",
    "she keeps {x} in the kitchen .",
    "the price of {x} went up .",
    "we read about {x} in the paper .",
    "{x} comes in small white boxes .",
    "the box of {x} was on the table .",
    "he forgot to buy {x} today .",
    "a new factory makes {x} .",
]


@dataclass(frozen=True)
class Compound:
    """A nonce compound and its class.

    Args:
        name: the word.
        cls: ``antibiotic`` or ``painkiller``.
        split: ``train`` or ``heldout``.
    """

    name: str
    cls: str
    split: str


def compounds(seed: int = 0, per_class: int = 48) -> list[Compound]:
    """``per_class`` compounds of each class, half of each in ``train``, half ``heldout``."""
    rng = random.Random(seed)
    names = sorted({h + m + t for h in _HEADS for m in _MIDDLES for t in _TAILS})
    chosen = rng.sample(names, 2 * per_class)
    out = []
    for index, name in enumerate(chosen):
        cls = CLASSES[index % 2]
        split = "train" if index // 2 < per_class // 2 else "heldout"
        out.append(Compound(name, cls, split))
    return out


def write_corpus(path: Path, items: list[Compound], documents: int, seed: int = 0) -> None:
    """``documents`` documents of 6 sentences (blank line between), class-showing contexts."""
    rng = random.Random(seed + 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(documents):
            for _ in range(6):
                if rng.random() < 1 / 6:
                    handle.write(rng.choice(_PLAIN) + "\n")
                else:
                    item = rng.choice(items)
                    handle.write(rng.choice(_SHOWS[item.cls]).format(x=item.name) + "\n")
            handle.write("\n")


def write_task(folder: Path, items: list[Compound], seed: int = 0) -> tuple[Path, Path]:
    """``train.tsv`` (160 rows, train compounds) and ``dev.tsv`` (200, heldout), GLUE style."""
    rng = random.Random(seed + 2)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, rows, file in (("train", 160, "train.tsv"), ("heldout", 200, "dev.tsv")):
        pool = [c for c in items if c.split == split]
        lines = ["sentence\tlabel"]
        for index in range(rows):
            item = rng.choice([c for c in pool if c.cls == CLASSES[index % 2]])
            lines.append(f"{rng.choice(_FRAMES).format(x=item.name)}\t{item.cls}")
        (folder / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(folder / file)
    return paths[0], paths[1]


def write_task_text(train_tsv: Path, path: Path) -> Path:
    """The task's training sentences as a corpus (TAPT): documents of 4 sentences."""
    rows = train_tsv.read_text(encoding="utf-8").splitlines()[1:]
    sentences = [row.split("\t")[0] for row in rows]
    blocks = ["\n".join(sentences[i : i + 4]) for i in range(0, len(sentences), 4)]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path
