"""Two generated languages with disjoint vocabularies: ``python data_specs/xlm_gain/make_data.py``.

The setting of XLM's cross-lingual claim at toy scale (``benchmarks/xlm_gain.py``):

* language ``xa`` is a small English-like language (English words, Latin script);
* language ``xb`` is its word-for-word relexification: every ``xa`` word has exactly one
  ``xb`` word, a nonce word written in Greek letters (``xa`` and ``xb`` share no character,
  so no token, not even a BPE piece: only the special tokens are common), with a mild
  word-order difference: adjectives follow their noun (``--order mild``, the default).
  ``--order sov`` also makes prepositions postpositions and puts the verb last (``xa``
  S V O PP, ``xb`` S O PP V): the first design, under which transfer failed
  (benchmarks/results/xlm_gain.md). No punctuation in either language.

What is generated (all a function of ``--seed``):

* ``mono/xa.txt``, ``mono/xb.txt``: independent monolingual corpora (data_specs/
  monolingual_corpus format), sentences whose contexts show each noun's kind: persons read,
  sing and get paid; animals bark, graze and sniff; both see, carry and follow things;
* ``parallel/xa-xb.tsv``: other sentences of the same grammar with their translation
  (data_specs/parallel_corpus TSV format), for TLM;
* ``task/``: the classification task, ``label<TAB>sentence`` (the layout
  ``ptm_multilingual.finetune.read_language_tsv`` reads): the label is the kind of the
  subject (``person`` or ``animal``); frames use only verbs and adjectives that both kinds
  take, and half the objects are a person or an animal of either kind, so a bag of words
  does not decide it. ``train.xa.tsv`` (fine-tuning, ``xa`` only, nouns of the ``train``
  half), ``dev.{xa,xb}.tsv`` (new sentences, same nouns; ``xb`` is the translation, every
  word of it unseen in fine-tuning), ``dev_heldout.{xa,xb}.tsv`` (nouns of the held-out
  half, which only the corpora show) and ``val.{xa,xb}.tsv`` (like ``dev``: for choosing
  fine-tuning settings without looking at ``dev``). No task sentence occurs in the corpora.

The corpora (and the task files for ``--order``, in ``task/``) go to ``--out`` (default
``$PTM_CACHE_DIR/xlm_gain``, else ``~/.cache/ptm/xlm_gain``); ``--sample`` writes the committed ``task/``, ``lexicon.tsv`` and a
small ``sample/`` of each corpus into this folder.
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANG_A, LANG_B = "xa", "xb"
SEED = 20261124  # the lexicon's seed (xb's words); corpora take --seed

# xa's words by class. Persons and animals are split into a fine-tuning ``train`` half (the
# first 24) and a ``heldout`` half (the last 24).
PERSONS = [
    "farmer", "teacher", "doctor", "baker", "sailor", "nurse", "judge", "painter", "singer",
    "pilot", "driver", "lawyer", "miner", "tailor", "clerk", "poet", "monk", "queen", "king",
    "soldier", "priest", "butcher", "waiter", "student", "dancer", "writer", "banker", "cook",
    "porter", "guard", "merchant", "actor", "barber", "mayor", "nephew", "uncle", "aunt",
    "widow", "bride", "knight", "chef", "boxer", "vicar", "maid", "prince", "duke", "monarch",
    "pupil"
]  # fmt: skip
ANIMALS = [
    "dog", "cat", "horse", "cow", "goat", "sheep", "pig", "fox", "wolf", "bear", "deer",
    "rabbit", "mouse", "rat", "lion", "tiger", "donkey", "camel", "goose", "duck", "hen", "owl",
    "eagle", "crow", "otter", "badger", "beaver", "monkey", "zebra", "moose", "hare", "lamb",
    "bull", "calf", "pony", "mule", "ox", "boar", "weasel", "ferret", "hamster", "squirrel",
    "raven", "swan", "parrot", "pigeon", "mole", "llama"
]  # fmt: skip
THINGS = [
    "ball", "box", "rope", "bucket", "basket", "stick", "stone", "apple", "bag", "cup", "plate",
    "blanket", "bell", "lamp", "chair", "bottle", "feather", "leaf", "shoe", "carpet"
]  # fmt: skip
PLACES = [
    "garden", "field", "yard", "barn", "house", "road", "river", "forest", "village", "market"
]  # fmt: skip
DETS = ["the", "a", "that"]
PREPS = ["in", "near", "by", "behind"]
SHARED_VERBS = [
    "saw", "found", "carried", "dropped", "pushed", "liked", "watched", "followed", "touched",
    "kept", "pulled", "left"
]  # fmt: skip
PERSON_VERBS_T = [
    "read", "wrote", "bought", "sold", "painted", "cooked", "cleaned", "repaired", "signed",
    "borrowed"
]  # fmt: skip
PERSON_VERBS_I = ["spoke", "laughed", "sang", "prayed", "worked", "voted", "smiled", "argued"]
ANIMAL_VERBS_T = ["bit", "sniffed", "licked", "chewed", "hunted", "scratched", "nibbled", "pecked"]
ANIMAL_VERBS_I = [
    "barked", "howled", "grazed", "purred", "growled", "neighed", "squeaked", "roared"
]  # fmt: skip
PERSON_ADJ = ["kind", "clever", "polite", "rich", "famous", "busy"]
ANIMAL_ADJ = ["wild", "furry", "hairy", "tame", "fierce", "spotted"]
SHARED_ADJ = ["old", "young", "big", "small", "tired", "quiet"]
HALF = 24

# xb's letters: Greek, disjoint from xa's Latin ones.
ONSETS = list("βγδθκλμνξπρστφχψζ")
NUCLEI = ["α", "ε", "ι", "ο", "υ", "η", "ω", "αι", "ου"]
CODAS = ["", "", "", "ς", "ν", "ρ"]


def all_words() -> list[str]:
    """Every ``xa`` word, in a fixed order."""
    groups = [PERSONS, ANIMALS, THINGS, PLACES, DETS, PREPS, SHARED_VERBS, PERSON_VERBS_T]
    groups += [PERSON_VERBS_I, ANIMAL_VERBS_T, ANIMAL_VERBS_I, PERSON_ADJ, ANIMAL_ADJ, SHARED_ADJ]
    return [w for group in groups for w in group]


def build_lexicon(seed: int = SEED) -> dict[str, str]:
    """``xa`` word -> ``xb`` word: a bijection onto Greek-script nonce words, seeded."""
    words = all_words()
    if len(set(words)) != len(words):
        raise ValueError("an xa word is listed twice")
    rng = random.Random(seed)
    taken: set[str] = set()
    lexicon = {}
    for word in words:
        short = word in DETS or word in PREPS
        while True:
            syllables = 1 if short else rng.choice((2, 3))
            parts = [rng.choice(ONSETS) + rng.choice(NUCLEI) for _ in range(syllables)]
            candidate = "".join(parts) + rng.choice(CODAS)
            if candidate not in taken and (short or len(candidate) >= 4):
                break
        taken.add(candidate)
        lexicon[word] = candidate
    return lexicon


def nouns(kind: str, half: str | None = None) -> list[str]:
    """Persons or animals; ``half`` ``train`` (first 24), ``heldout`` (last 24) or both."""
    words = PERSONS if kind == "person" else ANIMALS
    return {"train": words[:HALF], "heldout": words[HALF:], None: words}[half]


@dataclass(frozen=True)
class Sentence:
    """One sentence in both languages; ``b[i]`` translates ``a[align[i]]``."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    align: tuple[int, ...]

    def text(self, lang: str) -> str:
        return " ".join(self.a if lang == LANG_A else self.b)


def _np(rng: random.Random, noun: str, adjectives: list[str], p_adj: float) -> list[str]:
    phrase = [rng.choice(DETS)]
    if adjectives and rng.random() < p_adj:
        phrase.append(rng.choice(adjectives))
    return [*phrase, noun]


ORDERS = ("mild", "sov")


def realise(
    subject: list[str],
    verb: str,
    obj: list[str],
    pp: list[str],
    lex: dict[str, str],
    order: str = "mild",
) -> Sentence:
    """``xa``: S V O PP. ``xb``: the same with noun-adjective order (``mild``), or S O PP V
    with noun-adjective order and postpositions (``sov``)."""
    if order not in ORDERS:
        raise ValueError(f"order={order!r}; use one of {', '.join(ORDERS)}")
    a = [*subject, verb, *obj, *pp]
    idx = list(range(len(a)))
    s_i = idx[: len(subject)]
    v_i = [len(subject)]
    o_i = idx[len(subject) + 1 : len(subject) + 1 + len(obj)]
    p_i = idx[len(subject) + 1 + len(obj) :]

    def noun_phrase(ids: list[int]) -> list[int]:  # det adj noun -> det noun adj
        return [ids[0], ids[2], ids[1]] if len(ids) == 3 else ids

    if order == "sov":
        pp_b = [*noun_phrase(p_i[1:]), p_i[0]] if p_i else []
        align = [*noun_phrase(s_i), *noun_phrase(o_i), *pp_b, *v_i]
    else:
        pp_b = [p_i[0], *noun_phrase(p_i[1:])] if p_i else []
        align = [*noun_phrase(s_i), *v_i, *noun_phrase(o_i), *pp_b]
    b = tuple(lex[a[i]] for i in align)
    return Sentence(tuple(a), b, tuple(align))


def corpus_sentence(rng: random.Random, lex: dict[str, str], order: str = "mild") -> Sentence:
    """A pre-training sentence whose verbs and adjectives mostly show the subject's kind."""
    kind = rng.choice(("person", "animal"))
    own_adj, own_t, own_i = (
        (PERSON_ADJ, PERSON_VERBS_T, PERSON_VERBS_I)
        if kind == "person"
        else (ANIMAL_ADJ, ANIMAL_VERBS_T, ANIMAL_VERBS_I)
    )
    adjectives = own_adj if rng.random() < 0.7 else SHARED_ADJ
    subject = _np(rng, rng.choice(nouns(kind)), adjectives, 0.5)
    roll = rng.random()
    obj: list[str] = []
    if roll < 0.35:
        verb = rng.choice(own_i)
    elif roll < 0.75:
        verb = rng.choice(own_t)
        obj = _np(rng, rng.choice(THINGS), SHARED_ADJ, 0.3)
    else:
        verb = rng.choice(SHARED_VERBS)
        obj = _np(rng, rng.choice(THINGS), SHARED_ADJ, 0.3)
    pp = [rng.choice(PREPS), *_np(rng, rng.choice(PLACES), [], 0.0)] if rng.random() < 0.5 else []
    return realise(subject, verb, obj, pp, lex, order)


def task_sentence(
    rng: random.Random, lex: dict[str, str], kind: str, half: str, order: str = "mild"
) -> Sentence:
    """A task sentence: subject of ``kind``; shared verbs/adjectives only; half the objects
    are a person or an animal (either kind, same ``half``)."""
    subject = _np(rng, rng.choice(nouns(kind, half)), SHARED_ADJ, 0.4)
    if rng.random() < 0.5:
        other = rng.choice(("person", "animal"))
        obj = _np(rng, rng.choice(nouns(other, half)), SHARED_ADJ, 0.3)
    else:
        obj = _np(rng, rng.choice(THINGS), SHARED_ADJ, 0.3)
    pp = [rng.choice(PREPS), *_np(rng, rng.choice(PLACES), [], 0.0)] if rng.random() < 0.4 else []
    return realise(subject, rng.choice(SHARED_VERBS), obj, pp, lex, order)


TASK_SIZES = {"train": 240, "dev": 200, "dev_heldout": 200, "val": 200}


def make_tasks(seed: int = 0, order: str = "mild") -> dict[str, list[tuple[str, Sentence]]]:
    """``{split: [(label, sentence)]}``, balanced labels, no sentence twice across splits."""
    rng = random.Random(seed)
    lex = build_lexicon()
    seen: set[tuple[str, ...]] = set()
    splits: dict[str, list[tuple[str, Sentence]]] = {}
    for split, size in TASK_SIZES.items():
        half = "heldout" if split == "dev_heldout" else "train"
        rows = []
        for i in range(size):
            kind = ("person", "animal")[i % 2]
            while True:
                sentence = task_sentence(rng, lex, kind, half, order)
                if sentence.a not in seen:
                    break
            seen.add(sentence.a)
            rows.append((kind, sentence))
        rng.shuffle(rows)
        splits[split] = rows
    return splits


def corpus(seed: int, count: int, order: str = "mild") -> Iterator[Sentence]:
    """``count`` corpus sentences for ``seed``; task sentences are skipped."""
    rng = random.Random(seed)
    lex = build_lexicon()
    banned = {s.a for rows in make_tasks().values() for _, s in rows}
    made = 0
    while made < count:
        sentence = corpus_sentence(rng, lex, order)
        if sentence.a in banned:
            continue
        made += 1
        yield sentence


# Seeds offsets: the three corpora are drawn from independent streams.
MONO_A, MONO_B, PARALLEL = 1, 2, 3
SIZES = {"mono": 25_000, "parallel": 15_000}


def write_lines(path: Path, lines: Iterator[str] | list[str]) -> None:
    """Atomically: a partial file is never left at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)


def write_corpora(
    out: Path,
    seed: int = 0,
    mono: int = SIZES["mono"],
    parallel: int = SIZES["parallel"],
    order: str = "mild",
) -> Path:
    """``out/mono/{xa,xb}.txt`` and ``out/parallel/xa-xb.tsv``; returns ``out``."""
    base = 1000 * seed
    for lang, offset in ((LANG_A, MONO_A), (LANG_B, MONO_B)):
        lines = (s.text(lang) for s in corpus(base + offset, mono, order))
        write_lines(out / "mono" / f"{lang}.txt", lines)
    made = corpus(base + PARALLEL, parallel, order)
    pairs = (f"{s.text(LANG_A)}\t{s.text(LANG_B)}" for s in made)
    write_lines(out / "parallel" / f"{LANG_A}-{LANG_B}.tsv", pairs)
    return out


def write_tasks(folder: Path, order: str = "mild") -> None:
    """``train.xa.tsv``, ``dev.{xa,xb}.tsv``, ``dev_heldout.{xa,xb}.tsv`` into ``folder``."""
    for split, rows in make_tasks(order=order).items():
        langs = (LANG_A,) if split == "train" else (LANG_A, LANG_B)
        for lang in langs:
            write_lines(folder / f"{split}.{lang}.tsv", [f"{k}\t{s.text(lang)}" for k, s in rows])


def write_lexicon(path: Path) -> None:
    """``xa<TAB>xb<TAB>class`` for every word (class: person/animal with its half, or the list)."""
    classes = {w: f"person/{'train' if i < HALF else 'heldout'}" for i, w in enumerate(PERSONS)}
    classes |= {w: f"animal/{'train' if i < HALF else 'heldout'}" for i, w in enumerate(ANIMALS)}
    named = {"thing": THINGS, "place": PLACES, "det": DETS, "prep": PREPS}
    named |= {"verb/shared": SHARED_VERBS, "verb/person": PERSON_VERBS_T + PERSON_VERBS_I}
    named |= {"verb/animal": ANIMAL_VERBS_T + ANIMAL_VERBS_I, "adj/person": PERSON_ADJ}
    named |= {"adj/animal": ANIMAL_ADJ, "adj/shared": SHARED_ADJ}
    for name, group in named.items():
        classes |= {w: name for w in group}
    write_lines(path, [f"{a}\t{b}\t{classes[a]}" for a, b in build_lexicon().items()])


def default_out() -> Path:
    cache = os.environ.get("PTM_CACHE_DIR")
    root = Path(cache) if cache else Path.home() / ".cache" / "ptm"
    return root / "xlm_gain"


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mono", type=int, default=SIZES["mono"], help="sentences per language")
    parser.add_argument("--parallel", type=int, default=SIZES["parallel"], help="sentence pairs")
    parser.add_argument("--order", choices=ORDERS, default="mild", help="xb's word order")
    parser.add_argument("--sample", action="store_true", help="write task/, lexicon.tsv, sample/")
    args = parser.parse_args(argv)
    if args.sample:
        if args.order != "mild":
            parser.error("--sample writes the committed files, which use --order mild")
        write_tasks(HERE / "task")
        write_lexicon(HERE / "lexicon.tsv")
        path = write_corpora(HERE / "sample", args.seed, 200, 100)
    else:
        path = args.out or default_out()
        write_corpora(path, args.seed, args.mono, args.parallel, args.order)
        write_tasks(path / "task", args.order)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"{path}: {size / 1e6:.2f} MB")
    return path


if __name__ == "__main__":
    main()
