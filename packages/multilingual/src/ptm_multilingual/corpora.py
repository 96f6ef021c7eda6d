"""Monolingual and parallel corpora: reading and validation (see data_specs/)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ptm_core.data import CorpusError

LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(_[A-Za-z0-9]+)?$")


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


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise CorpusError(path, None, "path", "file not found", "check the path") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise CorpusError(
            path, line, "encoding", "not valid UTF-8", "re-save the file as UTF-8"
        ) from None
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


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


def read_monolingual_corpora(path: str | Path | Sequence[str | Path]) -> dict[str, list[str]]:
    """Read ``<lang>.txt`` files: one sentence per line, blank lines skipped.

    Args:
        path: a directory of ``<lang>.txt`` files, one file, or a list of them.

    Returns:
        language -> sentences (whitespace-stripped), languages sorted by name.

    Raises:
        CorpusError: bad file name, encoding, or a language with no sentence.
    """
    corpora: dict[str, list[str]] = {}
    for file in _files(path):
        if file.suffix != ".txt":
            continue
        lang = _check_lang(file.stem, file)
        sentences = [line.strip() for line in _read_lines(file) if line.strip()]
        if not sentences:
            raise CorpusError(file, None, "text", "no sentences", "add one sentence per line")
        corpora.setdefault(lang, []).extend(sentences)
    if not corpora:
        raise CorpusError(
            path, None, "path", "no <lang>.txt files found", "add files such as en.txt, fr.txt"
        )
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


def read_parallel_tsv(path: str | Path) -> ParallelCorpus:
    """Read ``<src>-<tgt>.tsv``: ``source<TAB>target`` per line.

    Raises:
        CorpusError: ``file:line`` of a line without exactly one tab or with an empty side.
    """
    file = Path(path)
    src, tgt = _pair_langs(file.stem, file)
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(_read_lines(file), start=1):
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
        pairs.append((columns[0].strip(), columns[1].strip()))
    if not pairs:
        raise CorpusError(file, None, "pair", "no sentence pairs", "add source<TAB>target lines")
    return ParallelCorpus(src, tgt, tuple(pairs), str(file))


def read_parallel_files(source_file: str | Path, target_file: str | Path) -> ParallelCorpus:
    """Read two aligned files ``<src>-<tgt>.<src>`` and ``<src>-<tgt>.<tgt>`` (line i = pair i).

    Raises:
        CorpusError: different line counts (names both files, their counts and the first
            line that has no partner) or an empty side (``file:line``).
    """
    sfile, tfile = Path(source_file), Path(target_file)
    src, tgt = _check_lang(sfile.suffix[1:], sfile), _check_lang(tfile.suffix[1:], tfile)
    slines, tlines = _read_lines(sfile), _read_lines(tfile)
    if len(slines) != len(tlines):
        shorter = sfile if len(slines) < len(tlines) else tfile
        longer = tfile if shorter == sfile else sfile
        raise CorpusError(
            longer,
            min(len(slines), len(tlines)) + 1,
            "alignment",
            f"{sfile.name} has {len(slines)} lines but {tfile.name} has {len(tlines)}; this line "
            f"has no partner in {shorter}",
            "the two files must have one line per sentence pair, in the same order",
        )
    for number, (s, t) in enumerate(zip(slines, tlines, strict=True), start=1):
        for file, text in ((sfile, s), (tfile, t)):
            if not text.strip():
                raise CorpusError(
                    file, number, "text", "empty side", "give both sentences of the pair or drop it"
                )
    pairs = tuple((s.strip(), t.strip()) for s, t in zip(slines, tlines, strict=True))
    return ParallelCorpus(src, tgt, pairs, f"{sfile}+{tfile}")


def read_parallel_corpora(path: str | Path | Sequence[str | Path]) -> list[ParallelCorpus]:
    """Read every parallel corpus under ``path`` (``*.tsv`` and aligned file pairs).

    Aligned files are matched by stem: ``en-fr.en`` goes with ``en-fr.fr``.

    Raises:
        CorpusError: as the single-file readers, or an aligned file without its partner.
    """
    corpora: list[ParallelCorpus] = []
    aligned: dict[str, dict[str, Path]] = {}
    for file in _files(path):
        if file.suffix == ".tsv":
            corpora.append(read_parallel_tsv(file))
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
        corpora.append(read_parallel_files(sides[src], sides[tgt]))
    if not corpora:
        raise CorpusError(
            path, None, "path", "no parallel files", "add <src>-<tgt>.tsv or aligned file pairs"
        )
    return corpora
