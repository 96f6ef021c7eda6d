"""Write sample.tsv: generated minimal pairs (good, bad, phenomenon), in BLiMP's manner.

    python data_specs/minimal_pairs/make_sample.py

Three phenomena, each a grammatical sentence and a twin that breaks one agreement:
subject-verb number, determiner-noun number, and reflexive-antecedent number. The lexicon
is small and fixed, so the file is the same on every run.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

NOUNS = [("scientist", "scientists"), ("river", "rivers"), ("city", "cities"), ("woman", "women")]
VERBS = [("lives", "live"), ("changes", "change"), ("grows", "grow")]
PLACES = ["in the north", "near the sea"]


def pairs() -> list[tuple[str, str, str]]:
    rows = []
    for (one, many), (verb_one, verb_many), place in product(NOUNS, VERBS, PLACES):
        rows.append(
            (
                f"the {one} {verb_one} {place} .",
                f"the {one} {verb_many} {place} .",
                "subject_verb_agreement",
            )
        )
        rows.append(
            (
                f"the {many} {verb_many} {place} .",
                f"the {many} {verb_one} {place} .",
                "subject_verb_agreement",
            )
        )
    for (one, many), place in product(NOUNS, PLACES):
        rows.append(
            (f"this {one} is {place} .", f"these {one} is {place} .", "determiner_noun_agreement")
        )
        rows.append(
            (
                f"these {many} are {place} .",
                f"this {many} are {place} .",
                "determiner_noun_agreement",
            )
        )
    for one, many in NOUNS[:1] + NOUNS[3:]:
        rows.append(
            (f"the {one} saw herself .", f"the {one} saw themselves .", "anaphor_agreement")
        )
        rows.append(
            (f"the {many} saw themselves .", f"the {many} saw herself .", "anaphor_agreement")
        )
    return rows


def main() -> None:
    lines = ["good\tbad\tphenomenon"] + ["\t".join(row) for row in pairs()]
    (Path(__file__).parent / "sample.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
