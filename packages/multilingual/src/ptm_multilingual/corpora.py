"""Monolingual and parallel corpora: reading and validation (see data_specs/)."""

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


def _check_lang(code: str, path: Path) -> str:
    if not LANGUAGE_CODE.match(code):
        raise CorpusError(
            path,
            None,
            "language",
            f"{code!r} is not a language code",
            "name files after ISO 639 codes such as en.txt, en-fr.tsv or en-fr.en",
        )
    return code


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, text)``, split on ``\\n`` only (U+2028 is text, not a break)."""
    return iter_lines(path, CorpusError)


def _check_nul(path: Path, number: int, field: str, text: str) -> None:
    """NUL is never text: it comes from binary or UTF-16 files and breaks tokenizers."""
    if "\x00" in text:
        raise CorpusError(
            path,
            number,
            field,
            f"NUL character (\\x00) at character {text.index(chr(0)) + 1}",
            "remove it (a UTF-16 or binary file must be re-encoded as UTF-8 text)",
        )


def _files(path: str | Path | Sequence[str | Path]) -> list[Path]:
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


def monolingual_files(path: str | Path | Sequence[str | Path]) -> list[tuple[str, Path]]:
    """The ``(language, file)`` of every ``<lang>.txt`` under ``path``, in reading order.

    Raises:
        CorpusError: a bad file name, or no ``<lang>.txt`` file at all.
    """
    found = [(_check_lang(f.stem, f), f) for f in _files(path) if f.suffix == ".txt"]
    if not found:
        raise CorpusError(
            path, None, "path", "no <lang>.txt files found", "add files such as en.txt, fr.txt"
        )
    return found


def iter_monolingual_file(file: Path) -> Iterator[str]:
    """Stream the sentences of one ``<lang>.txt`` file (stripped; blank lines skipped).

    Raises:
        CorpusError: invalid UTF-8 or a NUL character (``file:line``), or no sentence.
    """
    empty = True
    for number, line in _lines(file):
        _check_nul(file, number, "text", line)
        if line.strip():
            empty = False
            yield line.strip()
    if empty:
        raise CorpusError(file, None, "text", "no sentences", "add one sentence per line")


def read_monolingual_corpora(path: str | Path | Sequence[str | Path]) -> dict[str, list[str]]:
    """Read ``<lang>.txt`` files: one sentence per line, blank lines skipped.

    Holds every sentence: for corpora of any size, stream them with
    :func:`monolingual_files` and :func:`iter_monolingual_file` (what
    :func:`~ptm_multilingual.prepared_data.prepare_xlm` does).

    Args:
        path: a directory of ``<lang>.txt`` files, one file, or a list of them.

    Returns:
        language -> sentences (whitespace-stripped), languages sorted by name.

    Raises:
        CorpusError: bad file name, invalid UTF-8 (``file:line``), a NUL character, or a
            language with no sentence.
    """
    corpora: dict[str, list[str]] = {}
    for lang, file in monolingual_files(path):
        corpora.setdefault(lang, []).extend(iter_monolingual_file(file))
    return dict(sorted(corpora.items()))


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
    return _check_lang(parts[0], path), _check_lang(parts[1], path)


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
    src, tgt = _check_lang(sfile.suffix[1:], sfile), _check_lang(tfile.suffix[1:], tfile)
    return ParallelSource(src, tgt, (sfile, tfile))


def _iter_tsv(file: Path, src: str, tgt: str) -> Iterator[tuple[str, str]]:
    empty = True
    for number, line in _lines(file):
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
            _check_nul(file, number, field, text)
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
    for (number, s), (_, t) in zip(_lines(sfile), _lines(tfile), strict=True):
        for file, text in ((sfile, s), (tfile, t)):
            if not text.strip():
                raise CorpusError(
                    file, number, "text", "empty side", "give both sentences of the pair or drop it"
                )
            _check_nul(file, number, "text", text)
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
    for file in _files(path):
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
