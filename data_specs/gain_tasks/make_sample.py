"""The gain suite's four tasks and vocabulary: ``python data_specs/gain_tasks/make_sample.py``.

Four small tasks whose dev sets can only be solved with what the pre-training corpus
(``make_corpus.py``) says about nonce words (``lexicon.py``):

* ``sentiment_{train,dev}.tsv`` (GLUE SST-2 layout, ``sentence``/``label``): "the soup was
  zepul ." is 1 when the nonce word is positive, 0 when negative; a third of the sentences
  negate it ("was not zepul"), which flips the label.
* ``kind_{train,dev}.tsv`` (GLUE TSV, ``sentence``/``label``): one name in a frame that both
  kinds fill equally ("everyone knows X ."), labelled ``person`` or ``place``.
* ``ner_{train,dev}.txt`` (CoNLL-2003 columns, BIO): one or two names per sentence, tagged
  B-PER or B-LOC, in frames that both kinds fill equally ("we talked about X for an hour .").
* ``qa_{train,dev}.json`` (SQuAD v1.1): a context naming one person and one place in such
  frames, in random order; "which person is named ?" / "which place is named ?".

Train sets use the ``train`` half of every kind of word, dev sets only the ``heldout`` half,
so a dev word is never seen in fine-tuning. No frame here occurs in the pre-training corpus,
and every frame takes both kinds (both polarities) equally, so the frame alone decides
nothing: without pre-training a model is at chance on the dev words' kind.

``vocab.txt``: the sample vocabulary (data_specs/text_corpus/sample-vocab.txt) plus every
word of the generated corpus and tasks it lacks, so each such word is one WordPiece token.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from lexicon import build_lexicon, write_vocab  # noqa: E402
from make_corpus import JOBS, NEGATIVE, NOUNS, PEOPLE_NOUNS, PERSON, PLACE, PLAIN, POSITIVE  # noqa: E402

SEED = {"train": 1, "dev": 2}
SIZES = {
    "sentiment": {"train": 160, "dev": 200},
    "kind": {"train": 160, "dev": 200},
    "ner": {"train": 160, "dev": 200},
    "qa": {"train": 80, "dev": 100},  # contexts; two questions each
}
NEGATED_SHARE = 1 / 3

SENTIMENT_FRAMES = [
    "the {n} was {neg}{a} .",
    "i thought the {n} was {neg}{a} .",
    "honestly , the {n} was {neg}{a} .",
    "my {r} said the {n} was {neg}{a} .",
    "to be fair , it was {neg}{a} .",
    "in the end the {n} seemed {neg}{a} .",
]
# {x}, {y}: a name of either kind; the frame takes both kinds equally.
NAME_FRAMES = [
    "we talked about {x} for an hour .",
    "{x} was in the news again .",
    "the letter mentioned {x} and {y} .",
    "nobody had heard of {x} before .",
    "i read a long story about {x} .",
    "everyone knows {x} .",
    "{x} and {y} were on the list .",
    "she often thinks of {x} .",
    "the radio said something about {x} .",
    "{x} was the answer to the first question .",
    "the word {x} came up twice .",
    "later they spoke of {x} and {y} .",
]
QUESTIONS = {
    "PER": ["which person is named ?", "what is the name of the person ?"],
    "LOC": ["which place is named ?", "what is the name of the place ?"],
}
KIND_TAG = {"person": "PER", "place": "LOC"}


def sentiment(split: str, words: dict[str, list[str]]) -> list[tuple[str, int]]:
    """``(sentence, label)``: 1 iff the nonce word is positive xor the sentence negates it."""
    rng = random.Random(SEED[split])
    rows = []
    for index in range(SIZES["sentiment"][split]):
        positive = index % 2 == 0
        negated = rng.random() < NEGATED_SHARE
        word = rng.choice(words["positive" if positive else "negative"])
        frame = rng.choice(SENTIMENT_FRAMES)
        text = frame.format(
            n=rng.choice(NOUNS), r=rng.choice(PEOPLE_NOUNS), a=word, neg="not " if negated else ""
        )
        rows.append((text, int(positive != negated)))
    return rows


def kind(split: str, words: dict[str, list[str]]) -> list[tuple[str, str]]:
    """``(sentence, person|place)``: one name in a one-slot frame; half of each kind."""
    rng = random.Random(SEED[split] + 30)
    single = [f for f in NAME_FRAMES if "{y}" not in f]
    rows = []
    for index in range(SIZES["kind"][split]):
        name_kind = ("person", "place")[index % 2]
        rows.append((rng.choice(single).format(x=rng.choice(words[name_kind])), name_kind))
    return rows


def tagged_frame(
    rng: random.Random, words: dict[str, list[str]], frame: str, kinds: list[str]
) -> list[tuple[str, str]]:
    """``(token, tag)`` of one frame with a name of each of ``kinds`` in its slots."""
    names = iter(rng.sample(words[kind], 1)[0] for kind in kinds)
    slot_kinds = iter(kinds)
    out = []
    for token in frame.split():
        if token in ("{x}", "{y}"):
            out.append((next(names), "B-" + KIND_TAG[next(slot_kinds)]))
        else:
            out.append((token, "O"))
    return out


def ner(split: str, words: dict[str, list[str]]) -> list[list[tuple[str, str]]]:
    """Sentences of ``(token, tag)``; each name's kind is drawn independently of the frame."""
    rng = random.Random(SEED[split] + 10)
    sentences = []
    for _ in range(SIZES["ner"][split]):
        frame = rng.choice(NAME_FRAMES)
        kinds = [rng.choice(("person", "place")) for _ in range(frame.count("{"))]
        sentences.append(tagged_frame(rng, words, frame, kinds))
    return sentences


def qa(split: str, words: dict[str, list[str]]) -> dict:
    """SQuAD v1.1: per context one person and one place, and a question about each."""
    rng = random.Random(SEED[split] + 20)
    single = [f for f in NAME_FRAMES if "{y}" not in f]
    paragraphs = []
    for index in range(SIZES["qa"][split]):
        kinds = ["person", "place"]
        rng.shuffle(kinds)
        first, second = rng.sample(single, 2)
        tokens = tagged_frame(rng, words, first, kinds[:1])
        tokens += [("then", "O"), *tagged_frame(rng, words, second, kinds[1:])]
        context = " ".join(token for token, _ in tokens)
        qas = []
        for tag in ("PER", "LOC"):
            name = next(token for token, t in tokens if t == "B-" + tag)
            start = len(" ".join(token for token, _ in tokens[: tokens.index((name, "B-" + tag))]))
            start += 1 if start else 0
            assert context[start : start + len(name)] == name
            qas.append(
                {
                    "id": f"{split}-{index}-{tag.lower()}",
                    "question": rng.choice(QUESTIONS[tag]),
                    "answers": [{"text": name, "answer_start": start}],
                }
            )
        paragraphs.append({"context": context, "qas": qas})
    return {
        "version": "v1.1-ptm-gain",
        "data": [{"title": f"gain {split}", "paragraphs": paragraphs}],
    }


def task_words(half: str) -> dict[str, list[str]]:
    return build_lexicon().split("train" if half == "train" else "heldout")


def template_words() -> set[str]:
    """Every word the corpus templates, fillers and task frames can produce (not the slots)."""
    texts = [*PERSON, *PLACE, *PLAIN, *POSITIVE, *NEGATIVE, *SENTIMENT_FRAMES, *NAME_FRAMES]
    texts += ["then not"]
    texts += [q for qs in QUESTIONS.values() for q in qs]
    words = {w for text in texts for w in text.split() if "{" not in w}
    return words | set(NOUNS) | set(PEOPLE_NOUNS) | set(JOBS)


def main() -> None:
    lexicon = build_lexicon()
    for split in ("train", "dev"):
        words = task_words(split)
        rows = sentiment(split, words)
        lines = ["sentence\tlabel", *(f"{text}\t{label}" for text, label in rows)]
        (HERE / f"sentiment_{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        lines = ["sentence\tlabel", *(f"{text}\t{label}" for text, label in kind(split, words))]
        (HERE / f"kind_{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        blocks = ["-DOCSTART- -X- -X- O"]
        blocks += ["\n".join(f"{tok} -X- -X- {tag}" for tok, tag in s) for s in ner(split, words)]
        (HERE / f"ner_{split}.txt").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
        (HERE / f"qa_{split}.json").write_text(
            json.dumps(qa(split, words), indent=1) + "\n", encoding="utf-8"
        )
    nonce = {w for kind in lexicon.words for w in lexicon.all(kind)}
    size = write_vocab(HERE / "vocab.txt", template_words() | nonce)
    print(f"wrote the tasks and vocab.txt ({size} tokens) to {HERE}")


if __name__ == "__main__":
    main()
