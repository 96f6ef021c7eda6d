"""WordNet 3.0 as a knowledge graph: read the database files, write ptm's KG format.

``read_wordnet()`` reads Princeton's database files (``data.*``, ``index.*``, ``lexnames``,
``cntlist.rev``; format in ``man 5 wndb``) from ``$WNSEARCHDIR`` or ``/usr/share/wordnet``
(Debian's ``wordnet-base``). ``write_wordnet_kg()`` turns the synsets into an entity table
and their pointers into triples (``data_specs/knowledge_graph``); the WN18RR-style split
lives in :mod:`ptm_knowledge.kg.wn18rr`. User guide: ``docs/knowledge/wordnet.md``.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ptm_core.atomic import atomic_file
from ptm_knowledge.kg.graph import ENTITY_COLUMNS
from ptm_knowledge.kg.wordnet_files import (
    ADVERB_BACKSLASH,
    POINTER_RELATIONS,
    POS_FILES,
    WordNetError,
    iter_raw_lines,
    parse_cntlist_line,
    parse_data_line,
    parse_index_line,
    read_lexnames,
    split_gloss,
)

__all__ = [
    "DEFAULT_WORDNET_DIR",
    "KG_HEADER",
    "Pointer",
    "Synset",
    "WordNet",
    "WordNetError",
    "WordNetKG",
    "kg_relation",
    "read_wordnet",
    "wordnet_directory",
    "wordnet_triples",
    "write_wordnet_kg",
]

#: Where Debian's ``wordnet-base`` installs the database; ``$WNSEARCHDIR`` overrides it.
DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
ALL_POS = tuple(POS_FILES)


@dataclass(frozen=True, slots=True)
class Pointer:
    """A relation from a synset (or one of its words) to another synset.

    Args:
        symbol: WordNet's pointer symbol (``@``, ``%p``, ``+``, ...).
        relation: its name (``hypernym``, ``has_part``, ...; WN18's spelling without the
            leading underscore where WN18 has the relation).
        target: the target synset's id (``n02083346``).
        source_word, target_word: 1-based word numbers of a lexical pointer (between two
            words of the synsets); ``0`` for a semantic pointer (between the synsets).
    """

    symbol: str
    relation: str
    target: str
    source_word: int = 0
    target_word: int = 0

    @property
    def lexical(self) -> bool:
        """Whether the pointer links two words rather than two synsets."""
        return self.source_word != 0


@dataclass(frozen=True, slots=True)
class Synset:
    """One WordNet synset.

    Args:
        id: part of speech + 8-digit byte offset in its ``data.*`` file (``n02084071``);
            adjective satellites take ``a`` as pointers name them.
        pos: ``n``, ``v``, ``a``, ``s`` (adjective satellite) or ``r``.
        lexname: its lexicographer file (``noun.animal``).
        lemmas: its words, in file order, with ``_`` for spaces and adjective markers
            (``(p)``, ``(a)``, ``(ip)``) removed.
        definition: the gloss before its examples.
        examples: the gloss's quoted example sentences.
        pointers: its relations, in file order.
    """

    id: str
    pos: str
    lexname: str
    lemmas: tuple[str, ...]
    definition: str
    examples: tuple[str, ...]
    pointers: tuple[Pointer, ...]

    @property
    def name(self) -> str:
        """The first lemma with spaces (``domestic dog``)."""
        return self.lemmas[0].replace("_", " ")


def _lemma_key(lemma: str) -> str:
    return lemma.strip().lower().replace(" ", "_")


class WordNet:
    """The synsets of some parts of speech, with their index and tag counts.

    Args:
        directory: the database folder they were read from.
        pos: the parts of speech read (``("n",)`` or all of ``n v a r``).
        synsets: synset id -> :class:`Synset`, in file order (nouns, verbs, adjectives,
            adverbs).
        index: lemma (lower case, ``_`` for spaces) -> part of speech -> synset ids in
            WordNet's sense order (most frequent first).
    """

    def __init__(
        self,
        directory: Path,
        pos: tuple[str, ...],
        synsets: dict[str, Synset],
        index: dict[str, dict[str, tuple[str, ...]]],
    ) -> None:
        self.directory, self.pos, self.synsets, self.index = directory, pos, synsets, index
        self._tag_counts: dict[str, dict[str, int]] | None = None

    def __len__(self) -> int:
        return len(self.synsets)

    def __getitem__(self, synset_id: str) -> Synset:
        return self.synsets[synset_id]

    def __iter__(self) -> Iterator[Synset]:
        return iter(self.synsets.values())

    def senses(self, lemma: str, pos: str | None = None) -> tuple[str, ...]:
        """Synset ids of ``lemma`` (any case, spaces or ``_``) in sense order, for ``pos``
        or for every part of speech read (nouns first)."""
        by_pos = self.index.get(_lemma_key(lemma), {})
        if pos is not None:
            return by_pos.get(pos, ())
        return tuple(s for p in self.pos for s in by_pos.get(p, ()))

    def sense_counts(self, lemma: str) -> dict[str, int]:
        """How often ``lemma`` was tagged with each part of speech (a lexical POS prior).

        From ``cntlist.rev`` (the SemCor tag counts; every part of speech, whichever were
        read; satellites count as ``a``). Without that file, the number of senses in the
        index files read. Parts of speech without a count are left out.
        """
        if self._tag_counts is None:
            self._tag_counts = _read_tag_counts(self.directory / "cntlist.rev")
        if self._tag_counts:
            return dict(self._tag_counts.get(_lemma_key(lemma), {}))
        return {p: len(ids) for p, ids in self.index.get(_lemma_key(lemma), {}).items()}

    def satellite_head(self, synset_id: str) -> str | None:
        """The head synset of adjective satellite ``synset_id`` (its ``&`` pointer), or
        None for any other synset."""
        synset = self.synsets[synset_id]
        if synset.pos != "s":
            return None
        return next((p.target for p in synset.pointers if p.symbol == "&"), None)

    def relation_counts(self) -> Counter[str]:
        """Pointers per relation name, over all synsets read."""
        return Counter(p.relation for s in self.synsets.values() for p in s.pointers)

    def __repr__(self) -> str:
        return f"WordNet({len(self.synsets)} synsets, pos={''.join(self.pos)}, {self.directory})"


def wordnet_directory(directory: str | Path | None = None) -> Path:
    """The database folder: ``directory``, else ``$WNSEARCHDIR``, else ``/usr/share/wordnet``.

    Raises:
        WordNetError: the folder has no ``data.noun`` (one line naming the path and how to
            install WordNet).
    """
    if directory is not None:
        path, origin = Path(directory), "given"
    elif os.environ.get("WNSEARCHDIR"):
        path, origin = Path(os.environ["WNSEARCHDIR"]), "from $WNSEARCHDIR"
    else:
        path, origin = DEFAULT_WORDNET_DIR, "the default; $WNSEARCHDIR is not set"
    if not (path / "data.noun").is_file():
        raise WordNetError(
            path,
            None,
            "directory",
            f"no WordNet database here ({origin}: data.noun not found)",
            "install WordNet 3.0 (apt-get install wordnet-base), or point $WNSEARCHDIR or "
            "--wordnet-dir at a folder with data.noun, index.noun, ...",
        )
    return path


def _check_pos(pos: Iterable[str]) -> tuple[str, ...]:
    wanted = tuple(dict.fromkeys(pos))
    unknown = [p for p in wanted if p not in POS_FILES]
    if unknown or not wanted:
        raise ValueError(
            f"unknown part of speech {unknown or list(wanted)}: use some of n, v, a, r"
        )
    return tuple(p for p in ALL_POS if p in wanted)  # file order, whatever was asked


def read_wordnet(directory: str | Path | None = None, pos: Sequence[str] = ("n",)) -> WordNet:
    """Read the synsets of parts of speech ``pos`` from a WordNet 3.0 database.

    Files are streamed line by line; each synset's declared offset is checked against its
    byte position, every pointer into a part of speech read must name a synset of it, and
    every index entry must name a synset read.

    Args:
        directory: the database folder (default: :func:`wordnet_directory`).
        pos: parts of speech to read: ``n``, ``v``, ``a`` (with satellites), ``r``.

    Returns:
        The :class:`WordNet`.

    Raises:
        WordNetError: a missing folder or file, or a malformed line (file and line named).
        ValueError: an unknown part of speech.
    """
    folder = wordnet_directory(directory)
    wanted = _check_pos(pos)
    lexnames = read_lexnames(folder)
    synsets: dict[str, Synset] = {}
    where: dict[str, tuple[Path, int]] = {}
    for p in wanted:
        path = _required(folder / f"data.{POS_FILES[p]}")
        for number, offset, text in iter_raw_lines(path):
            synset = _synset(path, number, offset, text, p, lexnames)
            synsets[synset.id] = synset
            where[synset.id] = (path, number)
    for synset in synsets.values():
        for pointer in synset.pointers:
            if pointer.target[0] in wanted and pointer.target not in synsets:
                path, number = where[synset.id]
                raise WordNetError(
                    path,
                    number,
                    "pointer",
                    f"{pointer.symbol} points to {pointer.target}, which no line declares",
                    "the database files are inconsistent: reinstall them (apt-get install "
                    "--reinstall wordnet-base)",
                )
    del where
    index: dict[str, dict[str, tuple[str, ...]]] = {}
    for p in wanted:
        path = _required(folder / f"index.{POS_FILES[p]}")
        for number, _, text in iter_raw_lines(path):
            lemma, ids = parse_index_line(path, number, text, p)
            missing = next((i for i in ids if i not in synsets), None)
            if missing is not None:
                raise WordNetError(
                    path,
                    number,
                    "synset_offset",
                    f"{lemma!r} names synset {missing[1:]}, which data.{POS_FILES[p]} lacks",
                    "the index and data files are from different WordNet versions: use one",
                )
            index.setdefault(lemma, {})[p] = tuple(ids)
    return WordNet(folder, wanted, synsets, index)


def _required(path: Path) -> Path:
    if not path.is_file():
        raise WordNetError(
            path,
            None,
            "path",
            "file not found",
            "the WordNet database is incomplete: reinstall it (apt-get install --reinstall "
            "wordnet-base) or point --wordnet-dir at a complete one",
        )
    return path


def _synset(
    path: Path, number: int, offset: int, text: str, pos: str, lexnames: Sequence[str]
) -> Synset:
    line = parse_data_line(path, number, offset, text, pos)
    if not 0 <= line.lex_filenum < len(lexnames):
        raise WordNetError(
            path,
            number,
            "lex_filenum",
            f"lexicographer file {line.lex_filenum} is not in lexnames",
            "use the lexnames file of the same WordNet version",
        )
    pointers = []
    for raw in line.pointers:
        if raw.source_word > len(line.lemmas):
            raise WordNetError(
                path,
                number,
                "source/target",
                f"pointer {raw.symbol} {raw.target} from word {raw.source_word} of "
                f"{len(line.lemmas)}",
                "the file is not a WordNet 3.0 database file: reinstall it",
            )
        relation = POINTER_RELATIONS[raw.symbol]
        if raw.symbol == "\\" and pos == "r":
            relation = ADVERB_BACKSLASH
        pointers.append(Pointer(raw.symbol, relation, raw.target, raw.source_word, raw.target_word))
    definition, examples = split_gloss(line.gloss)
    return Synset(
        line.id,
        line.ss_type,
        lexnames[line.lex_filenum],
        line.lemmas,
        definition,
        examples,
        tuple(pointers),
    )


def _read_tag_counts(path: Path) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    if not path.is_file():
        return counts
    for number, _, text in iter_raw_lines(path):
        lemma, pos, count = parse_cntlist_line(path, number, text)
        by_pos = counts.setdefault(lemma, {})
        by_pos[pos] = by_pos.get(pos, 0) + count
    return counts


#: First lines of every file written from WordNet (``#`` lines are comments in ptm's KG files).
KG_HEADER = (
    "# From WordNet 3.0 (Princeton University, https://wordnet.princeton.edu; WordNet 3.0 "
    "license: free use, copy and distribution with this notice). Written by ptm wordnet-kg.\n"
)
_SPACES = re.compile(r"\s+")


def kg_relation(relation: str) -> str:
    """The KG name of a pointer relation: WN18RR's spelling, ``_hypernym``."""
    return f"_{relation}"


def wordnet_triples(
    wordnet: WordNet, keep: Iterable[str] | None = None, relations: Iterable[str] | None = None
) -> list[tuple[str, str, str]]:
    """``(head, relation, tail)`` of every pointer between synsets of ``keep``.

    A lexical pointer (between two words) becomes a triple between their synsets; the same
    triple from several word pairs is written once. Order: head synsets in file order, then
    pointers in file order.

    Args:
        wordnet: the database read.
        keep: synset ids to keep (default: every synset read).
        relations: pointer relation names to keep, without the underscore (default: all).
    """
    kept = set(wordnet.synsets) if keep is None else set(keep)
    wanted = None if relations is None else set(relations)
    triples: dict[tuple[str, str, str], None] = {}
    for synset in wordnet.synsets.values():
        if synset.id not in kept:
            continue
        for pointer in synset.pointers:
            if pointer.target in kept and (wanted is None or pointer.relation in wanted):
                triples[(synset.id, kg_relation(pointer.relation), pointer.target)] = None
    return list(triples)


@dataclass(frozen=True)
class WordNetKG:
    """What :func:`write_wordnet_kg` wrote.

    Args:
        entities: rows of ``entities.tsv``.
        triples: rows of ``triples.tsv``.
        relations: triples per relation name, most frequent first.
        files: the files written.
    """

    entities: int
    triples: int
    relations: dict[str, int]
    files: tuple[Path, ...]


def _cell(text: str) -> str:
    # Tabs and line ends would break the TSV row; WordNet has none, an edited copy may.
    return _SPACES.sub(" ", text).strip()


def entity_row(synset: Synset) -> str:
    """The ``entities.tsv`` row of ``synset`` (without the line end)."""
    name = _cell(synset.name)
    aliases = dict.fromkeys(_cell(lemma.replace("_", " ")) for lemma in synset.lemmas[1:])
    aliases.pop(name, None)
    cells = (
        synset.id,
        name,
        synset.lexname,
        "|".join(a for a in aliases if a and "|" not in a),
        _cell(synset.definition),
    )
    return "\t".join(cells)


def write_triples_file(
    path: Path, triples: Iterable[tuple[str, str, str]], *, header: bool = True
) -> int:
    """Write ``head<TAB>relation<TAB>tail`` rows to ``path`` atomically (after
    :data:`KG_HEADER` if ``header``); returns the count."""
    count = 0
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as handle:
        if header:
            handle.write(KG_HEADER)
        for row in triples:
            handle.write("\t".join(row) + "\n")
            count += 1
    return count


def write_entities_file(path: Path, synsets: Iterable[Synset]) -> int:
    """Write the ``entities.tsv`` of ``synsets`` to ``path`` atomically; returns the count."""
    count = 0
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(KG_HEADER + "\t".join(ENTITY_COLUMNS) + "\n")
        for synset in synsets:
            handle.write(entity_row(synset) + "\n")
            count += 1
    return count


def write_wordnet_kg(
    wordnet: WordNet,
    output_dir: str | Path,
    *,
    keep: Iterable[str] | None = None,
    relations: Iterable[str] | None = None,
) -> WordNetKG:
    """Write synsets and their pointers as ptm's KG (``data_specs/knowledge_graph``).

    ``entities.tsv``: one row per synset in file order: id = synset id (``n02084071``),
    name = first lemma with spaces, type = lexname (``noun.animal``), aliases = the other
    lemmas, description = the definition. ``triples.tsv``: :func:`wordnet_triples`, relation
    names in WN18RR's spelling (``_hypernym``, ``_has_part``, ...). Each file is replaced
    atomically; :func:`~ptm_knowledge.kg.load.load_knowledge_graph` loads the folder.

    Args:
        wordnet: the database read (:func:`read_wordnet`).
        output_dir: the folder to write into (created if missing).
        keep: synset ids to write (default: all read); pointers leaving them are dropped.
        relations: pointer relations to write, without the underscore (default: all).

    Returns:
        A :class:`WordNetKG` with the counts and files.
    """
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    kept = set(wordnet.synsets) if keep is None else set(keep)
    unknown = next((s for s in kept if s not in wordnet.synsets), None)
    if unknown is not None:
        raise ValueError(f"synset {unknown!r} to keep is not in the WordNet read ({wordnet})")
    triples = wordnet_triples(wordnet, kept, relations)
    entities = write_entities_file(
        folder / "entities.tsv", (s for s in wordnet.synsets.values() if s.id in kept)
    )
    count = write_triples_file(folder / "triples.tsv", triples)
    by_relation = dict(Counter(r for _, r, _ in triples).most_common())
    return WordNetKG(
        entities, count, by_relation, (folder / "entities.tsv", folder / "triples.tsv")
    )
