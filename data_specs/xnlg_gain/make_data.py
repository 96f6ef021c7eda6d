"""A generated headline task in two languages: ``python data_specs/xnlg_gain/make_data.py``.

XNLG's claim (Chi et al., 2020) at toy scale (``benchmarks/xnlg_gain.py``): fine-tune
generation in one language, generate in another zero-shot. The languages are those of
``data_specs/xlm_gain`` (``xa``, English-like; ``xb``, its word-for-word relexification in
Greek letters, no shared token), whose corpora also serve stages 1 and 2.

The task is **headline generation** (a tiny abstractive summarisation): the source is a
sentence of the xlm_gain grammar, the target its headline, the subject noun, the verb and
the object noun, without determiners, adjectives or the prepositional phrase::

    the quiet farmer carried that stone behind that forest  ->  farmer carried stone
    σο βακαις κεχαιρ περουζης ρι φηται πων ρι φοχεν         ->  βακαις περουζης φηται

(``xb``'s headline is the translation of ``xa``'s; noun-adjective order does not reach it.)
The sentences are xlm_gain's task sentences (shared verbs and adjectives, nouns of the
``train`` half); none occurs in its corpora.

``--out`` (default: this folder's ``task/``) gets ``train.xa.tsv`` (fine-tuning, ``xa``
only), ``dev.xa.tsv`` and ``dev.xb.tsv`` (the same new sentences in both languages: ``xb``
is scored zero-shot), as ``source<TAB>target`` lines
(``ptm_multilingual.xnlg.finetune.read_generation_tsv``).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
XLM_GAIN = HERE.parent / "xlm_gain" / "make_data.py"
SIZES = {"train": 400, "dev": 150}


def xlm_gain() -> ModuleType:
    """``data_specs/xlm_gain/make_data.py`` as a module (its grammar and lexicon),
    registered in ``sys.modules`` (its dataclasses look their module up there)."""
    name = "xlm_gain_make_data"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, XLM_GAIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def headline(words: tuple[str, ...], grammar: ModuleType) -> list[str]:
    """The ``xa`` headline: the words before the prepositional phrase, without
    determiners and adjectives."""
    dropped = set(grammar.DETS) | set(grammar.PERSON_ADJ) | set(grammar.ANIMAL_ADJ)
    dropped |= set(grammar.SHARED_ADJ)
    kept = []
    for word in words:
        if word in grammar.PREPS:
            break
        if word not in dropped:
            kept.append(word)
    return kept


def make_task(seed: int = 0, sizes: dict[str, int] | None = None) -> dict[str, list[tuple]]:
    """``{split: [(sentence, headline_a, headline_b)]}``, no sentence twice across splits."""
    grammar = xlm_gain()
    lex = grammar.build_lexicon()
    rng = random.Random(seed)
    banned = {s.a for rows in grammar.make_tasks().values() for _, s in rows}
    seen: set[tuple[str, ...]] = set()
    splits: dict[str, list[tuple]] = {}
    for split, size in (sizes or SIZES).items():
        rows = []
        while len(rows) < size:
            kind = rng.choice(("person", "animal"))
            sentence = grammar.task_sentence(rng, lex, kind, "train")
            if sentence.a in seen or sentence.a in banned:
                continue
            seen.add(sentence.a)
            head = headline(sentence.a, grammar)
            rows.append((sentence, head, [lex[w] for w in head]))
        splits[split] = rows
    return splits


def write_task(out: Path, seed: int = 0, sizes: dict[str, int] | None = None) -> Path:
    """``train.xa.tsv``, ``dev.xa.tsv``, ``dev.xb.tsv`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for split, rows in make_task(seed, sizes).items():
        langs = ("xa",) if split == "train" else ("xa", "xb")
        for lang in langs:
            lines = [f"{s.text(lang)}\t{' '.join(a if lang == 'xa' else b)}\n" for s, a, b in rows]
            path = out / f"{split}.{lang}.tsv"
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(lines), encoding="utf-8")
            tmp.replace(path)
    return out


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "task")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_task(args.out, args.seed)
    print(path)
    return path


if __name__ == "__main__":
    main()
