"""Build the English noun-share prior (:mod:`ptm_knowledge.linking.noun_share`) from WordNet.

For every WordNet noun lemma that can also be read as a verb, adjective or adverb, the
share is ``N / (N + O)``: ``N`` counts the lemma's noun uses, ``O`` the uses of the verb,
adjective and adverb lemmas the surface word can be an inflection of (WordNet's *morphy*:
its exception lists, then its detachment rules, so "found" counts the verb *find* and
"used" the verb *use*). A use is a sense-tagged occurrence in WordNet's semantic
concordance (``cntlist.rev``) plus 0.5 per sense, so that untagged senses still count a
little. Lemmas with no other reading are left out (an unlisted word counts as a noun).

Run ``python -m ptm_knowledge.linking.wordnet_prior OUTPUT [--wordnet-dir DIR]`` to
rebuild ``data/noun_share_en.tsv``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ptm_knowledge.kg.wordnet import WordNet, read_wordnet
from ptm_knowledge.linking.noun_share import write_noun_share

_EXCEPTION_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
# WordNet's morphy detachment rules (wn.h / morph.c), per part of speech.
_RULES = {
    "n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}  # fmt: skip
UNTAGGED_SENSE_WEIGHT = 0.5
LICENSE_HEADER = (
    "Noun share of English words, computed from WordNet 3.0's sense counts by",
    "ptm_knowledge.linking.wordnet_prior (share = noun uses / all uses).",
    "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.",
    'THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO',
    "REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. (WordNet 3.0 license:",
    "https://wordnet.princeton.edu/license-and-commercial-use)",
)


class _Lexicon:
    """Lemma uses per part of speech (from :class:`WordNet`) and morphy's exception lists."""

    def __init__(self, wordnet: WordNet) -> None:
        self.wordnet = wordnet
        self.exceptions: dict[str, dict[str, list[str]]] = {p: {} for p in _EXCEPTION_FILES}
        for pos, name in _EXCEPTION_FILES.items():
            path = wordnet.directory / f"{name}.exc"
            if path.is_file():  # optional: morphy's rules still apply without them
                with path.open(encoding="utf-8") as handle:
                    for line in handle:
                        word, *bases = line.split()
                        self.exceptions[pos][word] = bases

    def is_lemma(self, lemma: str, pos: str) -> bool:
        return bool(self.wordnet.index.get(lemma, {}).get(pos))

    def uses(self, lemma: str, pos: str) -> float:
        senses = len(self.wordnet.index.get(lemma, {}).get(pos, ()))
        tags = self.wordnet.sense_counts(lemma).get(pos, 0)
        return tags + UNTAGGED_SENSE_WEIGHT * senses

    def bases(self, word: str, pos: str) -> set[str]:
        """WordNet lemmas of ``pos`` that ``word`` is, or inflects (morphy)."""
        found = {b for b in self.exceptions[pos].get(word, []) if self.is_lemma(b, pos)}
        if self.is_lemma(word, pos):
            found.add(word)
        for suffix, ending in _RULES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix):
                base = word[: len(word) - len(suffix)] + ending
                if self.is_lemma(base, pos):
                    found.add(base)
        return found


def wordnet_noun_shares(directory: str | Path | None = None) -> dict[str, float]:
    """Noun share of every WordNet noun lemma that has another reading (see module doc);
    keys are lower-case with spaces between words.

    Args:
        directory: WordNet's database folder (default: ``$WNSEARCHDIR``, else
            ``/usr/share/wordnet``; :func:`~ptm_knowledge.kg.wordnet.wordnet_directory`).
    """
    lexicon = _Lexicon(read_wordnet(directory, pos=("n", "v", "a", "r")))
    shares: dict[str, float] = {}
    for lemma, by_pos in lexicon.wordnet.index.items():
        if "n" not in by_pos:
            continue
        other = sum(lexicon.uses(b, p) for p in "var" for b in lexicon.bases(lemma, p))
        if other == 0:
            continue
        noun = sum(lexicon.uses(b, "n") for b in lexicon.bases(lemma, "n"))
        shares[lemma.replace("_", " ")] = noun / (noun + other)
    return shares


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="the noun-share TSV to write")
    parser.add_argument("--wordnet-dir", default=None, help="WordNet's dict folder")
    args = parser.parse_args(argv)
    shares = wordnet_noun_shares(args.wordnet_dir)
    write_noun_share(shares, args.output, LICENSE_HEADER)
    print(f"wrote {len(shares)} words to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
