"""The gain suite (data_specs/gain_tasks): deterministic, dev words held out of fine-tuning but
taught by the pre-training corpus, labels that follow their rule, frames that decide nothing."""

from __future__ import annotations

import json
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from scipy.stats import binomtest

from benchmarks.fixtures import load_script
from ptm_core.finetune.data import read_conll, read_glue, read_squad
from ptm_core.tokenization import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[3]
GAIN = ROOT / "data_specs" / "gain_tasks"


def load(name: str) -> ModuleType:
    if str(GAIN) not in sys.path:
        sys.path.insert(0, str(GAIN))
    return load_script(GAIN / f"{name}.py", f"gain_{name}")


lexicon_mod, corpus_mod, sample_mod = load("lexicon"), load("make_corpus"), load("make_sample")
LEXICON = lexicon_mod.build_lexicon()
KIND_OF = {w: kind for kind in LEXICON.words for w in LEXICON.all(kind)}


@cache
def corpus() -> list[list[str]]:
    """The benchmark's corpus (the default seed and size), generated documents only."""
    ordinary = corpus_mod.SAMPLE_CORPUS.read_text(encoding="utf-8")
    return [d for d in corpus_mod.make_documents() if "\n".join(d) not in ordinary]


def nonce(text: str) -> list[str]:
    return [w for w in text.split() if w in KIND_OF]


def task_words() -> dict[str, dict[str, set[str]]]:
    """Nonce words of every task file: ``{split: {task: words}}``."""
    out: dict[str, dict[str, set[str]]] = {}
    for split in ("train", "dev"):
        sentiment = read_glue(GAIN / f"sentiment_{split}.tsv")
        kind = read_glue(GAIN / f"kind_{split}.tsv")
        ner = read_conll(GAIN / f"ner_{split}.txt")
        qa = read_squad(GAIN / f"qa_{split}.json")
        out[split] = {
            "sentiment": {w for e in sentiment for w in nonce(e.text)},
            "kind": {w for e in kind for w in nonce(e.text)},
            "ner": {w for e in ner for w in e.words if w in KIND_OF},
            "qa": {w for e in qa for w in nonce(e.context)},
        }
    return out


def test_generators_are_deterministic() -> None:
    assert lexicon_mod.build_lexicon() == LEXICON
    assert corpus_mod.make_documents(0, 40) == corpus_mod.make_documents(0, 40)
    assert corpus_mod.make_documents(0, 40) != corpus_mod.make_documents(1, 40)
    words = sample_mod.task_words("dev")
    assert sample_mod.sentiment("dev", words) == sample_mod.sentiment("dev", words)
    assert sample_mod.kind("dev", words) == sample_mod.kind("dev", words)
    assert sample_mod.ner("train", words) == sample_mod.ner("train", words)
    assert sample_mod.qa("dev", words) == sample_mod.qa("dev", words)


def test_committed_files_are_the_generators_output() -> None:
    for split in ("train", "dev"):
        rows = sample_mod.sentiment(split, sample_mod.task_words(split))
        lines = (GAIN / f"sentiment_{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        assert lines == [f"{text}\t{label}" for text, label in rows]
        rows = sample_mod.kind(split, sample_mod.task_words(split))
        lines = (GAIN / f"kind_{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        assert lines == [f"{text}\t{label}" for text, label in rows]
        qa = json.loads((GAIN / f"qa_{split}.json").read_text(encoding="utf-8"))
        assert qa == sample_mod.qa(split, sample_mod.task_words(split))
    sample = (GAIN / "sample" / "corpus.txt").read_text(encoding="utf-8")
    assert sample == "\n\n".join("\n".join(d) for d in corpus_mod.make_documents(0, 60)) + "\n"


def test_lexicon_halves_are_disjoint_and_new_to_the_sample_vocab() -> None:
    vocab = set(lexicon_mod.SAMPLE_VOCAB.read_text(encoding="utf-8").split())
    for kind, halves in LEXICON.words.items():
        assert len(halves["train"]) == len(halves["heldout"]) == 24, kind
        assert not set(halves["train"]) & set(halves["heldout"]), kind
    assert len(KIND_OF) == 4 * 48  # no word in two kinds
    assert not set(KIND_OF) & vocab


def test_dev_words_are_never_in_fine_tuning_train() -> None:
    words = task_words()
    heldout = {w for ws in LEXICON.split("heldout").values() for w in ws}
    train_half = {w for ws in LEXICON.split("train").values() for w in ws}
    for task in ("sentiment", "kind", "ner", "qa"):
        dev, train = words["dev"][task], words["train"][task]
        assert dev and train, task
        assert not dev & train, task
        assert dev <= heldout and train <= train_half, task
        assert len(dev) >= 40, task  # most of the held-out words are used


def test_dev_words_are_taught_by_the_pretraining_corpus() -> None:
    """Every nonce word occurs often; polarity words only in templates of their polarity."""
    counts: Counter[str] = Counter()
    for document in corpus():
        for sentence in document:
            for word in nonce(sentence):
                counts[word] += 1
    for word in KIND_OF:
        assert counts[word] >= 100, (word, counts[word])
    polar = {"positive": set(corpus_mod.POSITIVE), "negative": set(corpus_mod.NEGATIVE)}
    assert not polar["positive"] & polar["negative"]
    assert not set(corpus_mod.PERSON) & set(corpus_mod.PLACE)
    seen: Counter[str] = Counter()
    for document in corpus()[:500]:
        for sentence in document:
            for kind in ("positive", "negative"):
                words = [w for w in nonce(sentence) if KIND_OF[w] == kind]
                if words:
                    frame = sentence.replace(words[0], "{a}", 1)
                    matches = [t for t in polar[kind] if _matches(t, frame)]
                    assert matches, sentence
                    assert not [t for t in polar[_flip(kind)] if _matches(t, frame)], sentence
                    seen[kind] += 1
    assert min(seen.values()) > 300


def _flip(kind: str) -> str:
    return "negative" if kind == "positive" else "positive"


def _matches(template: str, sentence: str) -> bool:
    """Whether ``sentence`` is ``template`` with its non-``{a}`` slots filled by one word each."""
    words, slots = sentence.split(), template.split()
    if len(words) != len(slots):
        return False
    return all(
        w == t or (t.startswith("{") and t != "{a}") for w, t in zip(words, slots, strict=True)
    )


def test_every_word_is_one_token() -> None:
    tokenizer = WordPieceTokenizer.from_vocab(GAIN / "vocab.txt")
    texts = [s for d in corpus()[:300] for s in d]
    texts += [e.text for e in read_glue(GAIN / "sentiment_dev.tsv")]
    texts += [e.text for e in read_glue(GAIN / "kind_dev.tsv")]
    texts += [" ".join(e.words) for e in read_conll(GAIN / "ner_dev.txt")]
    texts += [e.question + " " + e.context for e in read_squad(GAIN / "qa_dev.json")]
    texts += [" ".join(sorted(KIND_OF))]
    for text in texts:
        tokens = tokenizer.encode(text).tokens[1:-1]
        assert tokens == text.split(), text


def test_labels_follow_the_rule() -> None:
    for split in ("train", "dev"):
        for example in read_glue(GAIN / f"sentiment_{split}.tsv"):
            (word,) = nonce(example.text)
            positive = KIND_OF[word] == "positive"
            negated = " not " in f" {example.text} "
            assert example.label == int(positive != negated), example
        kinds = read_glue(GAIN / f"kind_{split}.tsv")
        for example in kinds:
            (word,) = nonce(example.text)
            assert kinds.label_names[example.label] == KIND_OF[word], example
        labels = [e.label for e in kinds]
        assert labels.count(0) == labels.count(1)  # balanced
        records = read_conll(GAIN / f"ner_{split}.txt")
        names = records.label_names
        for tagged in records:
            for word, tag in zip(tagged.words, tagged.tags, strict=True):
                expected = {"person": "B-PER", "place": "B-LOC"}.get(KIND_OF.get(word, ""), "O")
                assert names[tag] == expected, (word, names[tag])
        for question in read_squad(GAIN / f"qa_{split}.json"):
            (answer,) = question.answers
            asked = "person" if "person" in question.question else "place"
            assert KIND_OF[answer.text] == asked
            assert question.context[answer.start :].startswith(answer.text)
            others = [w for w in nonce(question.context) if w != answer.text]
            assert len(others) == 1 and KIND_OF[others[0]] != asked


def frame_of(text: str) -> str:
    return " ".join("X" if w in KIND_OF else w for w in text.split())


def test_frames_alone_decide_nothing() -> None:
    """A frame -> majority-label rule learnt on train is at chance on dev, and no frame leans."""
    train = read_glue(GAIN / "sentiment_train.tsv")
    dev = read_glue(GAIN / "sentiment_dev.tsv")
    votes: dict[str, Counter[int]] = {}
    for example in train:
        votes.setdefault(frame_of(example.text), Counter())[example.label] += 1
    guess = {frame: c.most_common(1)[0][0] for frame, c in votes.items()}
    hits = sum(guess.get(frame_of(e.text), 1) == e.label for e in dev)
    assert binomtest(hits, len(dev), 0.5).pvalue > 0.01, hits
    # kind: the same rule, and each one-slot frame holds both kinds about equally
    train, dev = read_glue(GAIN / "kind_train.tsv"), read_glue(GAIN / "kind_dev.tsv")
    votes = {}
    for example in train:
        votes.setdefault(frame_of(example.text), Counter())[example.label] += 1
    guess = {frame: c.most_common(1)[0][0] for frame, c in votes.items()}
    hits = sum(guess.get(frame_of(e.text), 1) == e.label for e in dev)
    assert binomtest(hits, len(dev), 0.5).pvalue > 0.01, hits
    # tagging: the share of persons in each frame slot is 1/2 (no frame gives a kind away)
    records = read_conll(GAIN / "ner_train.txt")
    per = records.label_names.index("B-PER")
    by_frame: dict[str, list[int]] = {}
    for split in ("train", "dev"):
        for tagged in read_conll(GAIN / f"ner_{split}.txt"):
            frame = frame_of(" ".join(tagged.words))
            for word, tag in zip(tagged.words, tagged.tags, strict=True):
                if word in KIND_OF:
                    by_frame.setdefault(frame, []).append(int(tag == per))
    assert len(by_frame) == len(sample_mod.NAME_FRAMES)
    for frame, flags in by_frame.items():
        assert binomtest(sum(flags), len(flags), 0.5).pvalue > 0.001, frame
    # QA: the person comes first in about half the contexts
    first = [
        KIND_OF[nonce(q.context)[0]] == "person"
        for q in read_squad(GAIN / "qa_dev.json")
        if q.id.endswith("-per")
    ]
    assert binomtest(sum(first), len(first), 0.5).pvalue > 0.01


def test_task_frames_never_occur_in_the_pretraining_corpus() -> None:
    corpus_frames = {frame_of(s) for d in corpus() for s in d}
    task_frames = {frame_of(e.text) for e in read_glue(GAIN / "sentiment_dev.tsv")}
    task_frames |= {frame_of(" ".join(e.words)) for e in read_conll(GAIN / "ner_dev.txt")}
    task_frames |= {frame_of(e.text) for e in read_glue(GAIN / "kind_dev.tsv")}
    assert len(task_frames) > 20
    assert not task_frames & corpus_frames


@pytest.mark.parametrize("task", ["gain_sentiment", "gain_kind", "gain_ner", "gain_qa"])
def test_task_presets_compose(task: str) -> None:
    from flows.config import compose_config

    cfg = compose_config([f"task={task}"], config_name="finetune")
    assert Path(str(cfg.task.train)).parent == GAIN
    assert Path(str(cfg.task.dev)).is_file()


def test_experiment_composes_with_the_suite_vocabulary() -> None:
    from flows.config import compose_config

    cfg = compose_config(["experiment=bert_tiny_gain"])
    assert Path(str(cfg.data.tokenizer)) == GAIN / "vocab.txt"
    assert Path(str(cfg.data.corpus)) == GAIN / "sample" / "corpus.txt"
    assert cfg.model.hidden_size == 128 and cfg.model.num_layers == 2
