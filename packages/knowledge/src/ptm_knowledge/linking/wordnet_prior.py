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
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ptm_knowledge.linking.noun_share import write_noun_share

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
_POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
# cntlist.rev's ss_type digit -> part of speech (5 = adjective satellite)
_SS_TYPE = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}
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


def wordnet_dir(directory: str | Path | None = None) -> Path:
    """``directory``, else ``$WNSEARCHDIR``, else ``/usr/share/wordnet``; checked to exist."""
    path = Path(directory or os.environ.get("WNSEARCHDIR") or DEFAULT_WORDNET_DIR)
    if not (path / "index.noun").is_file():
        raise FileNotFoundError(
            f"no WordNet database at {path} (index.noun missing): set WNSEARCHDIR or "
            "--wordnet-dir, or `apt-get install wordnet-base`"
        )
    return path


class _Lexicon:
    """Lemma sense counts per part of speech, and morphy's exception lists."""

    def __init__(self, directory: Path) -> None:
        self.senses: dict[str, dict[str, int]] = {p: {} for p in _POS_FILES}
        self.noun_lemmas: list[str] = []
        for pos, name in _POS_FILES.items():
            with (directory / f"index.{name}").open(encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith(" "):
                        continue  # the license header
                    fields = line.split()
                    self.senses[pos][fields[0]] = int(fields[2])
        self.tags: dict[tuple[str, str], int] = defaultdict(int)
        with (directory / "cntlist.rev").open(encoding="utf-8") as handle:
            for line in handle:
                key, _, count = line.split()
                lemma, _, rest = key.partition("%")
                self.tags[(lemma, _SS_TYPE[rest[0]])] += int(count)
        self.exceptions: dict[str, dict[str, list[str]]] = {p: {} for p in _POS_FILES}
        for pos, name in _POS_FILES.items():
            with (directory / f"{name}.exc").open(encoding="utf-8") as handle:
                for line in handle:
                    word, *bases = line.split()
                    self.exceptions[pos][word] = bases

    def uses(self, lemma: str, pos: str) -> float:
        senses = self.senses[pos].get(lemma, 0)
        return self.tags.get((lemma, pos), 0) + UNTAGGED_SENSE_WEIGHT * senses

    def bases(self, word: str, pos: str) -> set[str]:
        """WordNet lemmas of ``pos`` that ``word`` is, or inflects (morphy)."""
        lemmas = self.senses[pos]
        found = {b for b in self.exceptions[pos].get(word, []) if b in lemmas}
        if word in lemmas:
            found.add(word)
        for suffix, ending in _RULES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix):
                base = word[: len(word) - len(suffix)] + ending
                if base in lemmas:
                    found.add(base)
        return found


def wordnet_noun_shares(directory: str | Path | None = None) -> dict[str, float]:
    """Noun share of every WordNet noun lemma that has another reading (see module doc);
    keys are lower-case with spaces between words."""
    lexicon = _Lexicon(wordnet_dir(directory))
    shares: dict[str, float] = {}
    for lemma in lexicon.senses["n"]:
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
