"""Line parsers for the WordNet 3.0 database files (``man 5 wndb``, ``man 5 lexnames``).

:mod:`ptm_knowledge.kg.wordnet` builds a :class:`~ptm_knowledge.kg.wordnet.WordNet` from
these; this module knows the file layouts. Every malformed line raises
:class:`WordNetError` naming the file and line. Files are read line by line in binary, so
the byte offset of each ``data.*`` line (the synset's id) is checked against the offset the
line itself declares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ptm_core.data.errors import DataError

#: Part of speech -> file suffix (``data.noun``, ``index.noun``).
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
#: ``ss_type`` letters of ``data.*`` lines; ``s`` (adjective satellite) lives in ``data.adj``.
SYNSET_TYPES = ("n", "v", "a", "s", "r")
#: Sense-key ``ss_type`` digits (``cntlist.rev``) -> part of speech (satellites count as ``a``).
_SENSE_KEY_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}

#: The lexicographer files of WordNet 3.0 (``man 5 lexnames``), used when the database has no
#: ``lexnames`` file (Debian's ``wordnet-base`` ships none).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
    "adj.ppl",
)  # fmt: skip

#: Pointer symbol -> relation name: WN18's names (Bordes et al. 2013) where WN18 has the
#: relation, WordNet's own (``man 5 wninput``) otherwise. The head of a triple is always the
#: synset whose line holds the pointer.
POINTER_RELATIONS = {
    "!": "antonym",
    "@": "hypernym",
    "@i": "instance_hypernym",
    "~": "hyponym",
    "~i": "instance_hyponym",
    "#m": "member_holonym",
    "#s": "substance_holonym",
    "#p": "part_of",
    "%m": "member_meronym",
    "%s": "substance_meronym",
    "%p": "has_part",
    "=": "attribute",
    "+": "derivationally_related_form",
    ";c": "synset_domain_topic_of",
    "-c": "member_of_domain_topic",
    ";r": "synset_domain_region_of",
    "-r": "member_of_domain_region",
    ";u": "synset_domain_usage_of",
    "-u": "member_of_domain_usage",
    "*": "entailment",
    ">": "cause",
    "^": "also_see",
    "$": "verb_group",
    "&": "similar_to",
    "<": "participle",
    "\\": "pertainym",
}
#: ``\`` means "pertains to noun" on adjectives and "derived from adjective" on adverbs.
ADVERB_BACKSLASH = "derived_from_adjective"

# Syntactic markers on adjective lemmas in data.adj: "galore(ip)", "outback(a)".
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")
_OFFSET = re.compile(r"\d{8}")


class WordNetError(DataError):
    """A WordNet database file is missing or malformed.

    The message reads ``"<file>:<line>: <problem> (field '<field>'); <fix>"``.

    Arguments and message format: :class:`ptm_core.data.errors.DataError`.
    """


@dataclass(frozen=True, slots=True)
class RawPointer:
    """A pointer as written in a ``data.*`` line (resolved to a synset id by the reader)."""

    symbol: str
    target: str
    source_word: int
    target_word: int


@dataclass(frozen=True, slots=True)
class DataLine:
    """One parsed ``data.*`` line: a synset."""

    id: str
    ss_type: str
    lex_filenum: int
    lemmas: tuple[str, ...]
    pointers: tuple[RawPointer, ...]
    gloss: str


def _fail(path: Path, number: int, field: str, problem: str) -> WordNetError:
    return WordNetError(
        path,
        number,
        field,
        problem,
        "the file is not a WordNet 3.0 database file (man 5 wndb); reinstall it "
        "(apt-get install --reinstall wordnet-base) or point --wordnet-dir / $WNSEARCHDIR "
        "at an intact copy",
    )


def iter_raw_lines(path: Path) -> Iterator[tuple[int, int, str]]:
    """``(line number, byte offset, text)`` of the lines of ``path`` that are not the
    licence header (lines starting with two spaces), without the line end."""
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            start, offset = offset, offset + len(raw)
            if raw.startswith(b"  "):
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _fail(path, number, "encoding", f"not UTF-8 text ({exc.reason})") from None
            yield number, start, text.rstrip("\r\n")


def _int(path: Path, number: int, field: str, token: str, base: int = 10) -> int:
    try:
        return int(token, base)
    except ValueError:
        raise _fail(path, number, field, f"expected a number, got {token!r}") from None


def parse_data_line(path: Path, number: int, offset: int, text: str, pos: str) -> DataLine:
    """Parse one ``data.<pos>`` line; its declared offset must equal its byte ``offset``."""
    head, sep, gloss = text.partition(" | ")
    tokens = head.split()
    if len(tokens) < 6 or not _OFFSET.fullmatch(tokens[0]):
        raise _fail(path, number, "synset_offset", f"not a synset line: {text[:60]!r}")
    if int(tokens[0]) != offset:
        raise _fail(
            path,
            number,
            "synset_offset",
            f"the line says offset {tokens[0]} but starts at byte {offset}",
        )
    ss_type = tokens[2]
    if ss_type not in (("a", "s") if pos == "a" else (pos,)):
        raise _fail(
            path, number, "ss_type", f"synset type {ss_type!r} in a data.{POS_FILES[pos]} file"
        )
    lex_filenum = _int(path, number, "lex_filenum", tokens[1])
    count = _int(path, number, "w_cnt", tokens[3], 16)
    at = 4 + 2 * count
    if count < 1 or len(tokens) < at + 1:
        raise _fail(path, number, "w_cnt", f"{count} words declared, fewer written")
    lemmas = tuple(_ADJ_MARKER.sub("", tokens[i]) for i in range(4, at, 2))
    p_cnt = _int(path, number, "p_cnt", tokens[at])
    at += 1
    if len(tokens) < at + 4 * p_cnt:
        raise _fail(path, number, "p_cnt", f"{p_cnt} pointers declared, fewer written")
    pointers = []
    for i in range(at, at + 4 * p_cnt, 4):
        symbol, target, target_pos, words = tokens[i : i + 4]
        if symbol not in POINTER_RELATIONS:
            raise _fail(path, number, "pointer_symbol", f"unknown pointer symbol {symbol!r}")
        if not _OFFSET.fullmatch(target) or target_pos not in SYNSET_TYPES:
            raise _fail(path, number, "pointer", f"bad pointer {' '.join(tokens[i : i + 4])!r}")
        if len(words) != 4:
            raise _fail(path, number, "source/target", f"expected 4 hex digits, got {words!r}")
        pointers.append(
            RawPointer(
                symbol,
                ("a" if target_pos == "s" else target_pos) + target,
                _int(path, number, "source/target", words[:2], 16),
                _int(path, number, "source/target", words[2:], 16),
            )
        )
    at += 4 * p_cnt
    rest = tokens[at:]
    if pos == "v" and rest:  # verb frames: f_cnt + f_num w_num ...
        frames = _int(path, number, "f_cnt", rest[0])
        rest = rest[1 + 3 * frames :]
    if rest or not sep:
        raise _fail(path, number, "gloss", "expected ' | ' and the gloss after the pointers")
    return DataLine(pos + tokens[0], ss_type, lex_filenum, lemmas, tuple(pointers), gloss.rstrip())


def split_gloss(gloss: str) -> tuple[str, tuple[str, ...]]:
    """``(definition, examples)`` of a gloss: the definition ends at the first ``; "``
    (WordNet's examples are double-quoted and follow it); examples are the quoted parts."""
    cut = 0 if gloss.startswith('"') else gloss.find('; "')
    if cut < 0:
        return gloss.strip(), ()
    definition = gloss[:cut].strip().rstrip(";").strip()
    examples = tuple(e.strip() for e in re.findall(r'"([^"]*)"', gloss[cut:]) if e.strip())
    return definition, examples


def parse_index_line(path: Path, number: int, text: str, pos: str) -> tuple[str, list[str]]:
    """``(lemma, synset ids in sense order)`` of one ``index.<pos>`` line."""
    tokens = text.split()
    if len(tokens) < 6 or tokens[1] != pos:
        raise _fail(path, number, "pos", f"expected 'lemma {pos} ...', got {text[:60]!r}")
    synset_cnt = _int(path, number, "synset_cnt", tokens[2])
    p_cnt = _int(path, number, "p_cnt", tokens[3])
    offsets = tokens[4 + p_cnt + 2 :]
    if len(offsets) != synset_cnt or not all(_OFFSET.fullmatch(o) for o in offsets):
        raise _fail(
            path, number, "synset_offset", f"{synset_cnt} synsets declared, {len(offsets)} given"
        )
    return tokens[0], [pos + o for o in offsets]


def parse_cntlist_line(path: Path, number: int, text: str) -> tuple[str, str, int]:
    """``(lemma, pos, tag count)`` of one ``cntlist.rev`` line (``sense_key num count``)."""
    tokens = text.split()
    lemma, percent, key = tokens[0].partition("%") if tokens else ("", "", "")
    if len(tokens) != 3 or not percent or key[:1] not in _SENSE_KEY_POS:
        raise _fail(path, number, "sense_key", f"expected 'sense_key num count', got {text!r}")
    return lemma.lower(), _SENSE_KEY_POS[key[0]], _int(path, number, "tag_cnt", tokens[2])


def read_lexnames(directory: Path) -> tuple[str, ...]:
    """The lexicographer file names by number: ``lexnames`` if present, else WordNet 3.0's."""
    path = directory / "lexnames"
    if not path.is_file():
        return LEXNAMES
    names: dict[int, str] = {}
    for number, _, text in iter_raw_lines(path):
        tokens = text.split()
        if len(tokens) != 3:
            raise _fail(path, number, "lexname", f"expected 'NN name pos', got {text!r}")
        names[_int(path, number, "file_number", tokens[0])] = tokens[1]
    return tuple(names.get(i, f"lexfile{i:02d}") for i in range(max(names, default=-1) + 1))
