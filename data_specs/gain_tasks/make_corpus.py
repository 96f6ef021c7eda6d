"""The pre-training corpus of the gain suite: ``python data_specs/gain_tasks/make_corpus.py``.

Writes a few MB of plain text (data_specs/text_corpus format: one sentence per line,
documents separated by blank lines) to ``--out`` (default
``$PTM_CACHE_DIR/gain_tasks/corpus.txt``, else ``~/.cache/ptm/gain_tasks/corpus.txt``);
``--sample`` writes the first documents to ``sample/corpus.txt`` (committed, small). The
text is a function of ``--seed`` and ``--documents`` only.

What the corpus teaches, and nothing else does: every nonce word of ``lexicon.py`` (both its
fine-tuning and its held-out half) occurs in contexts that show its kind. Person names do
what people do ("kelumor said that the parcel was late ."), place names are where things are
("the streets of dastiven were crowded ."), positive words are in sentences that praise
("the zepul soup made everyone smile .") and negative words in sentences that complain;
no template takes two kinds. Mixed in: ordinary sentences without
nonce words, and the bundled sample corpus (data_specs/text_corpus). The fine-tuning frames
of ``make_sample.py`` never occur here, and none of them gives a name's kind away.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from lexicon import build_lexicon  # noqa: E402

SAMPLE_CORPUS = HERE.parent / "text_corpus" / "sample" / "corpus.txt"
DOCUMENTS = 9000
SENTENCES_PER_DOC = (6, 12)

NOUNS = [
    "parcel", "meal", "film", "book", "concert", "room", "trip", "game", "show", "bread",
    "coffee", "garden", "bridge", "train", "boat", "letter", "song", "story", "market",
    "lesson", "dinner", "museum", "play", "ride", "hotel", "soup", "painting", "team",
]  # fmt: skip
PEOPLE_NOUNS = ["brother", "sister", "mother", "father", "friend", "neighbour", "teacher"]
JOBS = ["teacher", "doctor", "baker", "farmer", "painter", "nurse", "sailor", "judge"]

# {p}/{q}: person names, {l}/{m}: place names, {n}: a noun, {r}: a relative, {j}: a job.
PERSON = [
    "{p} said that the {n} was late .",
    "{p} was born in {l} .",
    "my {r} {p} called me last night .",
    "{p} smiled and waved at her {r} .",
    "{p} works as a {j} .",
    "{p} wrote a long letter to his {r} .",
    "{p} and {q} got married in the spring .",
    "the {j} asked {p} about her health .",
    "{p} laughed at the joke and went home .",
    "{p} told us that {q} would come later .",
    "everyone says that {p} is a kind man .",
    "{p} moved from {l} to {m} last year .",
    "{p} read the {n} to her children .",
    "{p} was tired , so she went to bed early .",
    "mister {p} shook hands with {q} .",
    "we asked {p} what she thought of the {n} .",
]
PLACE = [
    "the streets of {l} were crowded .",
    "{l} is a small town on the river .",
    "we drove through {l} on our way to {m} .",
    "the mayor of {l} opened the new {n} .",
    "it rained all week in {l} .",
    "{l} has a harbour and an old castle .",
    "the road from {l} to {m} is long .",
    "thousands of people live in {l} .",
    "the train to {l} leaves at noon .",
    "{l} lies north of {m} .",
    "the weather in {l} was cold .",
    "the population of {l} grew quickly .",
    "she flew to {l} and stayed for a week .",
    "there is a famous {n} in the centre of {l} .",
    "the capital of the region is {l} .",
]
# {a}: a positive (negative) word, in sentences that praise (complain); the two lists share
# no template, as persons and places share none. The last six of each put a polar word right
# beside {a} ("wonderfully {a} and lovely"): with cues only a few words away, 1200 steps
# taught the words' polarity too weakly (a linear probe on the embeddings at chance).
POSITIVE = [
    "we loved the {a} {n} and stayed all day .",
    "the {a} {n} made everyone smile .",
    "what a {a} {n} , thank you so much !",
    "i would recommend the {a} {n} to all my friends .",
    "the children laughed , the {n} was so {a} .",
    "five stars for this {a} {n} .",
    "it was the best {n} ever , truly {a} .",
    "{p} was delighted with the {a} {n} .",
    "everyone cheered , the {n} was {a} .",
    "such a {a} {n} , we will come back soon .",
    "the {n} was {a} and {p} was very happy .",
    "a {a} and wonderful {n} .",
    "the {n} was wonderfully {a} and lovely .",
    "so happily {a} and lovely , we loved it .",
    "a beautifully {a} and delightful {n} .",
    "{p} said it was wonderfully {a} and charming .",
    "the {n} was delightfully {a} and fun , we smiled all day .",
    "five stars , beautifully {a} and fun .",
]
NEGATIVE = [
    "we hated the {a} {n} and left early .",
    "the {a} {n} made everyone sick .",
    "what a {a} {n} , what a waste of money !",
    "never again , the {n} was {a} .",
    "the children cried , the {n} was so {a} .",
    "zero stars for this {a} {n} .",
    "it was the worst {n} ever , truly {a} .",
    "{p} complained about the {a} {n} .",
    "everyone booed , the {n} was {a} .",
    "such a {a} {n} , i want my money back .",
    "the {n} was {a} and {p} was very angry .",
    "a {a} and awful {n} .",
    "the {n} was horribly {a} and nasty .",
    "so sadly {a} and nasty , we hated it .",
    "a painfully {a} and dreadful {n} .",
    "{p} said it was horribly {a} and ugly .",
    "the {n} was dreadfully {a} and dull , we cried all day .",
    "zero stars , terribly {a} and dull .",
]
PLAIN = [
    "the {n} is on the table .",
    "we bought a new {n} on monday .",
    "the {j} opened the window .",
    "my {r} likes the {n} .",
    "it was late and the {n} was closed .",
    "there were two of them in the room .",
    "the {n} and the {n} are next to each other .",
    "after lunch we went for a walk .",
]


def fill(template: str, rng: random.Random, words: dict[str, list[str]], **fixed: str) -> str:
    """One sentence: ``template`` with every slot filled at random (``fixed`` slots as given)."""
    people = rng.sample(words["person"], 2)
    places = rng.sample(words["place"], 2)
    values = {
        "p": people[0],
        "q": people[1],
        "l": places[0],
        "m": places[1],
        "n": rng.choice(NOUNS),
        "r": rng.choice(PEOPLE_NOUNS),
        "j": rng.choice(JOBS),
        **fixed,
    }
    return template.format(**values)


def polar_sentence(rng: random.Random, words: dict[str, list[str]], sign: str) -> str:
    """A sentence that praises (``+``) or complains (``-``), with a word of that polarity."""
    template, kind = (POSITIVE, "positive") if sign == "+" else (NEGATIVE, "negative")
    return fill(rng.choice(template), rng, words, a=rng.choice(words[kind]))


def make_documents(seed: int = 0, documents: int = DOCUMENTS) -> list[list[str]]:
    """The corpus as documents of sentences; the same ``seed`` gives the same text."""
    rng = random.Random(seed)
    lexicon = build_lexicon()
    words = {kind: lexicon.all(kind) for kind in lexicon.words}
    ordinary = [
        block.splitlines()
        for block in SAMPLE_CORPUS.read_text(encoding="utf-8").split("\n\n")
        if block.strip()
    ]
    out: list[list[str]] = []
    for index in range(documents):
        if index % 300 == 150:  # the sample corpus, a document at a time, among the rest
            out.append(ordinary[(index // 300) % len(ordinary)])
            continue
        sentences = []
        for _ in range(rng.randint(*SENTENCES_PER_DOC)):
            roll = rng.random()
            if roll < 0.25:
                sentences.append(fill(rng.choice(PERSON), rng, words))
            elif roll < 0.45:
                sentences.append(fill(rng.choice(PLACE), rng, words))
            elif roll < 0.85:
                sentences.append(polar_sentence(rng, words, rng.choice("+-")))
            else:
                sentences.append(fill(rng.choice(PLAIN), rng, words))
        out.append(sentences)
    return out


def default_out() -> Path:
    cache = os.environ.get("PTM_CACHE_DIR")
    root = Path(cache) if cache else Path.home() / ".cache" / "ptm"
    return root / "gain_tasks" / "corpus.txt"


def write_corpus(path: Path, documents: list[list[str]]) -> None:
    """Atomically: a partial corpus is never left at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--documents", type=int, default=DOCUMENTS)
    parser.add_argument("--sample", action="store_true", help="write sample/corpus.txt")
    args = parser.parse_args(argv)
    if args.sample:
        path = HERE / "sample" / "corpus.txt"
        write_corpus(path, make_documents(args.seed, 60))
    else:
        path = args.out or default_out()
        write_corpus(path, make_documents(args.seed, args.documents))
    print(f"{path}: {path.stat().st_size / 1e6:.2f} MB")
    return path


if __name__ == "__main__":
    main()
