"""Parallel corpora (``data_specs/parallel_corpus``): reading and validation.

Generic, so that every family trained on sentence pairs reads them one way: XLM's TLM
(ptm-multilingual) and CoVe's MT-LSTM (ptm-classic). The helpers that check language codes,
list a corpus folder and stream its lines are shared with ptm-multilingual's monolingual
reader (``ptm_multilingual.corpora``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ptm_core.data import CorpusError
from ptm_core.data.lines import iter_lines

LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(_[A-Za-z0-9]+)?$")
_COUNT_CHUNK = 8 * 2**20


@dataclass(frozen=True)
class ParallelCorpus:
    """Aligned sentence pairs of one language pair.

    Attributes:
        source_lang: language of the first side (``"en"`` in ``en-fr``).
        target_lang: language of the second side.
        pairs: ``(source, target)`` sentences.
        source: file(s) it was read from.
    """

    source_lang: str
    target_lang: str
    pairs: tuple[tuple[str, str], ...]
    source: str

    @property
    def name(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"


def check_language_code(code: str, path: Path) -> str:
    """``code`` if it reads as an ISO 639 code (``en``, ``pt_BR``), else a ``CorpusError``."""
    if not LANGUAGE_CODE.match(code):
        raise CorpusError(
            path,
            None,
            "language",
            f"{code!r} is not a language code",
            "name files after ISO 639 codes such as en.txt, en-fr.tsv or en-fr.en",
        )
    return code


def corpus_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, text)``, split on ``\\n`` only (U+2028 is text, not a break)."""
    return iter_lines(path, CorpusError)


def check_no_nul(path: Path, number: int, field: str, text: str) -> None:
    """NUL is never text: it comes from binary or UTF-16 files and breaks tokenizers."""
    if "\x00" in text:
        raise CorpusError(
            path,
            number,
            field,
            f"NUL character (\\x00) at character {text.index(chr(0)) + 1}",
            "remove it (a UTF-16 or binary file must be re-encoded as UTF-8 text)",
        )


def corpus_paths(path: str | Path | Sequence[str | Path]) -> list[Path]:
    """The files of ``path`` (a file, a folder's visible files sorted by name, or a list)."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    out: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            out += sorted(p for p in item.iterdir() if p.is_file() and not p.name.startswith("."))
        elif item.exists():
            out.append(item)
        else:
            raise CorpusError(item, None, "path", "does not exist", "check the path")
    return out


def _pair_langs(stem: str, path: Path) -> tuple[str, str]:
    parts = stem.split("-")
    if len(parts) != 2 or parts[0] == parts[1]:
        raise CorpusError(
            path,
            None,
            "language",
            f"cannot read a language pair from {stem!r}",
            "name parallel files <src>-<tgt>.tsv or <src>-<tgt>.<src> / <src>-<tgt>.<tgt>",
        )
    return check_language_code(parts[0], path), check_language_code(parts[1], path)


@dataclass(frozen=True)
class ParallelSource:
    """One parallel corpus on disk, read as a stream of pairs (:meth:`iter_pairs`).

    Attributes:
        source_lang: language of the first side.
        target_lang: language of the second side.
        files: ``(file.tsv,)`` or the two aligned files ``(source side, target side)``.
    """

    source_lang: str
    target_lang: str
    files: tuple[Path, ...]

    @property
    def name(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"

    @property
    def source(self) -> str:
        return "+".join(str(f) for f in self.files)

    def iter_pairs(self) -> Iterator[tuple[str, str]]:
        """``(source, target)`` sentences, validated line by line (errors name ``file:line``)."""
        if len(self.files) == 1:
            return _iter_tsv(self.files[0], self.source_lang, self.target_lang)
        return _iter_aligned(self.files[0], self.files[1])


def tsv_source(path: str | Path) -> ParallelSource:
    """The :class:`ParallelSource` of ``<src>-<tgt>.tsv``."""
    file = Path(path)
    src, tgt = _pair_langs(file.stem, file)
    return ParallelSource(src, tgt, (file,))


def aligned_source(source_file: str | Path, target_file: str | Path) -> ParallelSource:
    """The :class:`ParallelSource` of ``<src>-<tgt>.<src>`` + ``<src>-<tgt>.<tgt>``."""
    sfile, tfile = Path(source_file), Path(target_file)
    src, tgt = (
        check_language_code(sfile.suffix[1:], sfile),
        check_language_code(tfile.suffix[1:], tfile),
    )
    return ParallelSource(src, tgt, (sfile, tfile))


def _iter_tsv(file: Path, src: str, tgt: str) -> Iterator[tuple[str, str]]:
    empty = True
    for number, line in corpus_lines(file):
        if not line.strip():
            raise CorpusError(
                file, number, "pair", "blank line", "remove it: every line is one sentence pair"
            )
        columns = line.split("\t")
        if len(columns) != 2:
            raise CorpusError(
                file,
                number,
                "columns",
                f"expected 2 tab-separated columns, found {len(columns)}",
                "write exactly one tab between the source and the target sentence",
            )
        for field, text in zip((src, tgt), columns, strict=True):
            if not text.strip():
                raise CorpusError(
                    file, number, field, "empty side", "give both sentences of the pair or drop it"
                )
            check_no_nul(file, number, field, text)
        empty = False
        yield columns[0].strip(), columns[1].strip()
    if empty:
        raise CorpusError(file, None, "pair", "no sentence pairs", "add source<TAB>target lines")


def count_lines(path: Path) -> int:
    """Lines as :func:`~ptm_core.data.lines.iter_lines` yields them, counted in binary chunks."""
    count, last = 0, b"\n"
    with path.open("rb") as handle:
        while chunk := handle.read(_COUNT_CHUNK):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _iter_aligned(sfile: Path, tfile: Path) -> Iterator[tuple[str, str]]:
    # Line counts are compared first (a cheap binary pass) so that a misaligned pair of
    # files is reported as such, before any line of it is decoded.
    for file in (sfile, tfile):
        if not file.is_file():
            raise CorpusError(file, None, "path", "file not found", "give an existing file")
    scount, tcount = count_lines(sfile), count_lines(tfile)
    if scount != tcount:
        shorter = sfile if scount < tcount else tfile
        longer = tfile if shorter == sfile else sfile
        raise CorpusError(
            longer,
            min(scount, tcount) + 1,
            "alignment",
            f"{sfile.name} has {scount} lines but {tfile.name} has {tcount}; this line "
            f"has no partner in {shorter}",
            "the two files must have one line per sentence pair, in the same order",
        )
    for (number, s), (_, t) in zip(corpus_lines(sfile), corpus_lines(tfile), strict=True):
        for file, text in ((sfile, s), (tfile, t)):
            if not text.strip():
                raise CorpusError(
                    file, number, "text", "empty side", "give both sentences of the pair or drop it"
                )
            check_no_nul(file, number, "text", text)
        yield s.strip(), t.strip()


def _corpus(source: ParallelSource) -> ParallelCorpus:
    pairs = tuple(source.iter_pairs())
    return ParallelCorpus(source.source_lang, source.target_lang, pairs, source.source)


def read_parallel_tsv(path: str | Path) -> ParallelCorpus:
    """Read ``<src>-<tgt>.tsv``: ``source<TAB>target`` per line.

    Raises:
        CorpusError: ``file:line`` of invalid UTF-8, a line without exactly one tab, or
            with an empty side or a NUL character (field: the side's language).
    """
    return _corpus(tsv_source(path))


def read_parallel_files(source_file: str | Path, target_file: str | Path) -> ParallelCorpus:
    """Read two aligned files ``<src>-<tgt>.<src>`` and ``<src>-<tgt>.<tgt>`` (line i = pair i).

    Raises:
        CorpusError: different line counts (names both files, their counts and the first
            line that has no partner), invalid UTF-8, an empty side or a NUL character
            (``file:line``).
    """
    return _corpus(aligned_source(source_file, target_file))


def parallel_sources(path: str | Path | Sequence[str | Path]) -> list[ParallelSource]:
    """Every parallel corpus under ``path`` (``*.tsv``, then aligned pairs by stem), unread.

    Aligned files are matched by stem: ``en-fr.en`` goes with ``en-fr.fr``.

    Raises:
        CorpusError: a bad file name, an aligned file without its partner, or nothing found.
    """
    sources: list[ParallelSource] = []
    aligned: dict[str, dict[str, Path]] = {}
    for file in corpus_paths(path):
        if file.suffix == ".tsv":
            sources.append(tsv_source(file))
        elif file.suffix in (".md", ".py", ".txt", ".json"):
            continue
        else:
            aligned.setdefault(file.stem, {})[file.suffix[1:]] = file
    for stem, sides in sorted(aligned.items()):
        src, tgt = _pair_langs(Path(stem).name, next(iter(sides.values())))
        if set(sides) != {src, tgt}:
            any_file = next(iter(sides.values()))
            raise CorpusError(
                any_file,
                None,
                "alignment",
                f"found {sorted(sides)} sides for {stem}, need {src} and {tgt}",
                f"add {stem}.{src} and {stem}.{tgt}, one sentence per line",
            )
        sources.append(aligned_source(sides[src], sides[tgt]))
    if not sources:
        raise CorpusError(
            path, None, "path", "no parallel files", "add <src>-<tgt>.tsv or aligned file pairs"
        )
    return sources


def read_parallel_corpora(path: str | Path | Sequence[str | Path]) -> list[ParallelCorpus]:
    """Read every parallel corpus under ``path`` (``*.tsv`` and aligned file pairs).

    Holds every pair: for corpora of any size, stream :func:`parallel_sources`.

    Raises:
        CorpusError: as the single-file readers, or an aligned file without its partner.
    """
    return [_corpus(source) for source in parallel_sources(path)]
