"""A lexical part-of-speech prior: how often a word is used as a noun (its *noun share*).

The linker's guard reads the part of speech from the pipeline when it has a tagger. The
default pipeline (``spacy.blank``) has none, and PyPI carries no trained English pipeline,
so the guard falls back on this prior: ``noun_share("wild") = 0.05`` says that "wild" is an
adjective or adverb about 95 % of the time, and a lower-case "wild" is then not linked to
the noun *wilderness*.

The file is a TSV ``<word or phrase><TAB><noun share in [0, 1]>``, lower-case, ``#`` lines
are comments. Words it does not list count as nouns (share 1): list only the words that
also have other parts of speech. ptm ships one for English built from WordNet 3.0's sense
counts (:data:`ENGLISH_NOUN_SHARE`, rebuilt by
``python -m ptm_knowledge.linking.wordnet_prior OUTPUT``); give your own for another
language or vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from ptm_knowledge.kg.graph import KGError

ENGLISH_NOUN_SHARE = Path(__file__).parent / "data" / "noun_share_en.tsv"
# Names a user may give instead of a path.
BUILTIN_PRIORS = {"english": ENGLISH_NOUN_SHARE}


class NounShareError(KGError):
    """A noun-share file is malformed (message ``file:line: problem (field ...); fix``)."""


class NounShare:
    """Word (lower-case, phrases space-separated) -> share of its uses that are nouns.

    Args:
        shares: the table; words missing from it count as nouns (``get`` returns ``None``).
        source: where the table came from (for messages).
    """

    def __init__(self, shares: Mapping[str, float], source: str = "<memory>") -> None:
        self.shares = dict(shares)
        self.source = source

    def get(self, phrase: str) -> float | None:
        """The noun share of ``phrase`` (case-insensitive), or ``None`` when unlisted."""
        return self.shares.get(phrase.lower())

    def __len__(self) -> int:
        return len(self.shares)

    @classmethod
    def load(cls, spec: str | Path) -> NounShare:
        """Read a noun-share TSV, or a built-in one by name (``"english"``).

        Raises:
            NounShareError: a missing file or a bad line, named with its line number.
        """
        path = BUILTIN_PRIORS.get(str(spec), Path(spec))
        if not path.is_file():
            names = ", ".join(sorted(BUILTIN_PRIORS))
            raise NounShareError(
                path,
                None,
                "pos_prior",
                "no such file",
                f"give a TSV word<TAB>share or one of: {names}",
            )
        shares: dict[str, float] = {}
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                word, sep, value = line.rpartition("\t")
                try:
                    share = float(value)
                except ValueError:
                    share = math.nan
                if not sep or not word or not 0.0 <= share <= 1.0:
                    raise NounShareError(
                        path,
                        number,
                        "share",
                        f"expected <word><TAB><share in [0, 1]>, got {line[:60]!r}",
                        "fix or remove the line",
                    )
                shares[word.lower()] = share
        return cls(shares, str(path))


def write_noun_share(
    shares: Mapping[str, float], output: str | Path, header: Iterable[str] = ()
) -> Path:
    """Write a noun-share TSV (sorted, 3 decimals), with ``header`` lines as comments."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {line}".rstrip() for line in header]
    lines += [f"{word}\t{share:.3f}" for word, share in sorted(shares.items())]
    output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return output
