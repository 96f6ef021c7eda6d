"""Generate a realistic plain-text corpus of a given size, for the data-pipeline benchmarks.

    python -m benchmarks.make_corpus --size 100MB --out /tmp/ptm-bench/corpus-100MB.txt
    python -m benchmarks.make_corpus --size 1GB --format jsonl --out /tmp/ptm-bench/c.jsonl

The text follows ``data_specs/text_corpus``: ``.txt`` holds one sentence per line with a
blank line between documents; ``.jsonl`` holds one ``{"id", "text"}`` object per document,
whose text :func:`ptm_core.data.split_sentences` splits back into the same sentences.

- Documents have 5-60 sentences (skewed short), sentences 3-60 words (mean ~19, log-normal).
- Words are drawn Zipf-Mandelbrot-like (rank ``r`` has weight ``1 / (r + 2.7)``) from a
  vocabulary of the sample corpus's words (most frequent first) followed by synthetic
  pronounceable words, ~50k types in all; sentences start with a capital, some words are
  followed by a comma, a few sentences end with ``?`` or ``!``.
- Deterministic for a given ``--seed``; written in chunks of whole documents, so memory is
  constant whatever the size; ~1 GB in well under two minutes on one core.

The size is in bytes (``10MB`` = 10,000,000); the file ends at the last whole document
that fits.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9}
# Words after which "." does not end a sentence for ptm's splitter (abbreviations, single
# letters read as initials): never put them last in a sentence.
_NOT_FINAL = {"mr", "mrs", "ms", "dr", "prof", "st", "mt", "ft", "gen", "gov", "sen", "rep"}
_ONSETS = [*"bcdfghjklmnprstvwz", "br", "ch", "cl", "dr", "fr", "gr", "pl", "sh", "st", "th", "tr"]
_VOWELS = [*"aeiouaeioy", "ai", "ea", "ou"]
_CODAS = ["", "", "", "", "", "n", "r", "s", "l", "m", "nd", "st", "rt"]


def parse_size(text: str) -> int:
    """``"10MB"`` -> 10_000_000 (units KB, MB, GB, powers of ten; a bare number is bytes)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]B)?\s*", text.upper())
    if not match:
        raise argparse.ArgumentTypeError(f"size must look like 10MB, 1GB or 5000, got {text!r}")
    return int(float(match.group(1)) * UNITS.get(match.group(2) or "", 1))


def build_vocabulary(size: int = 50_000, seed: int = 0) -> list[str]:
    """Words by decreasing frequency: the sample corpus's words, then synthetic ones.

    Args:
        size: number of word types.
        seed: seed of the synthetic words.

    Returns:
        ``size`` distinct lower-case words, the most frequent first.
    """
    counts = Counter(re.findall(r"[^\W\d_]+", SAMPLE.read_text(encoding="utf-8").lower()))
    words = [w for w, _ in counts.most_common() if len(w) > 1 or w == "a"]
    seen = set(words)
    rng = np.random.default_rng(seed + 7919)
    while len(words) < size:
        syllables = int(rng.choice([1, 2, 3], p=[0.3, 0.5, 0.2]))
        word = "".join(
            _ONSETS[rng.integers(len(_ONSETS))]
            + _VOWELS[rng.integers(len(_VOWELS))]
            + _CODAS[rng.integers(len(_CODAS))]
            for _ in range(syllables)
        )
        if len(word) > 2 and word not in seen:
            seen.add(word)
            words.append(word)
    return words[:size]


class CorpusGenerator:
    """Chunks of whole documents, as text, from one seeded random stream.

    Args:
        seed: seed of every random choice.
        vocabulary: word types, most frequent first (default :func:`build_vocabulary`).
        fmt: ``"txt"`` (sentence per line, blank line between documents) or ``"jsonl"``.
        documents_per_chunk: documents generated per :meth:`chunk`.
    """

    def __init__(
        self,
        seed: int = 0,
        vocabulary: list[str] | None = None,
        fmt: str = "txt",
        documents_per_chunk: int = 500,
    ) -> None:
        if fmt not in ("txt", "jsonl"):
            raise ValueError(f"format must be 'txt' or 'jsonl', got {fmt!r}")
        words = vocabulary or build_vocabulary(seed=seed)
        self.fmt = fmt
        self.documents_per_chunk = documents_per_chunk
        self.rng = np.random.default_rng(seed)
        ranks = np.arange(len(words), dtype=np.float64)
        weights = 1.0 / (ranks + 2.7)
        self.cdf = np.cumsum(weights / weights.sum())
        self.lower = np.array(words, dtype=object)
        self.upper = np.array([w[:1].upper() + w[1:] for w in words], dtype=object)
        self.not_final = np.array([w in _NOT_FINAL or len(w) == 1 for w in words])
        # The separator after a word: inside a sentence, then at sentence and document ends.
        end_sentence = "\n" if fmt == "txt" else " "
        end_document = "\n\n" if fmt == "txt" else "\n"
        # Codes 2-4 end a sentence, 5-7 a document (the document separator is added after).
        inner = [" ", ", "]
        self.separators = np.array(
            [*inner, *(p + end_sentence for p in ".?!"), *".?!"], dtype=object
        )
        self.end_document = end_document
        self.documents = 0

    def chunk(self) -> str:
        """The next ``documents_per_chunk`` documents as text (ending with a document end)."""
        rng, n_docs = self.rng, self.documents_per_chunk
        # 5-60 sentences per document, skewed short (median ~17).
        doc_sentences = np.clip(np.round(rng.lognormal(2.9, 0.6, n_docs)), 5, 60).astype(np.int64)
        n_sentences = int(doc_sentences.sum())
        # 3-60 words per sentence, mean ~19.
        lengths = np.clip(np.round(rng.lognormal(2.85, 0.45, n_sentences)), 3, 60)
        lengths = lengths.astype(np.int64)
        n_words = int(lengths.sum())
        ids = np.searchsorted(self.cdf, rng.random(n_words), side="right")
        np.minimum(ids, len(self.cdf) - 1, out=ids)
        sentence_end = np.cumsum(lengths) - 1
        sentence_start = sentence_end - lengths + 1
        # A word that must not end a sentence is replaced there by the most frequent word
        # that may ("the"-like words are fine: the text is not meant to be grammatical).
        last = ids[sentence_end]
        ids[sentence_end] = np.where(self.not_final[last], 1, last)
        text = self.lower[ids]
        text[sentence_start] = self.upper[ids[sentence_start]]
        # Separator codes: 0 " ", 1 ", ", 2-4 ". ? !" + sentence end.
        sep = (rng.random(n_words) < 0.06).astype(np.int64)
        punct = np.searchsorted([0.9, 0.95], rng.random(n_sentences), side="right")
        sep[sentence_end] = 2 + punct
        doc_last_sentence = np.cumsum(doc_sentences) - 1
        doc_end = sentence_end[doc_last_sentence]
        sep[doc_end] = 5 + punct[doc_last_sentence]
        pieces = np.empty(2 * n_words, dtype=object)
        pieces[0::2] = text
        pieces[1::2] = self.separators[sep]
        # Each document ends with its bare punctuation (codes 5-7) + the document separator.
        pieces[2 * doc_end + 1] = pieces[2 * doc_end + 1] + self.end_document
        body = "".join(pieces.tolist())
        first = self.documents
        self.documents += n_docs
        if self.fmt == "txt":
            return body
        lines = body.split("\n")[:-1]
        return "".join(
            json.dumps({"id": f"doc-{first + i}", "text": line}, ensure_ascii=False) + "\n"
            for i, line in enumerate(lines)
        )


def write_corpus(out: Path, size: int, *, fmt: str = "txt", seed: int = 0) -> dict[str, float]:
    """Write a corpus of about ``size`` bytes to ``out`` (atomically), ending at a document end.

    Returns:
        ``{"bytes", "documents", "seconds"}`` of what was written.
    """
    start = time.perf_counter()
    generator = CorpusGenerator(seed=seed, fmt=fmt)
    boundary = b"\n\n" if fmt == "txt" else b"\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    written = documents = 0
    with tmp.open("wb") as handle:
        while written < size:
            data = generator.chunk().encode("utf-8")
            chunk_docs = generator.documents_per_chunk
            if written + len(data) > size:
                cut = data.rfind(boundary, 0, size - written)
                if cut < 0 and written:
                    break
                data = data[: cut + len(boundary)] if cut >= 0 else data
                chunk_docs = data.count(boundary)
            handle.write(data)
            written += len(data)
            documents += chunk_docs
    tmp.replace(out)
    return {"bytes": written, "documents": documents, "seconds": time.perf_counter() - start}


def ensure_corpus(out: Path, size: int, *, fmt: str = "txt", seed: int = 0) -> Path:
    """``out`` generated once: reused when it exists with its ``.done`` marker."""
    marker = out.with_name(out.name + ".done")
    if not (out.exists() and marker.exists()):
        stats = write_corpus(out, size, fmt=fmt, seed=seed)
        marker.write_text(json.dumps(stats) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, required=True, help="10MB, 100MB, 1GB, ...")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--format", choices=["txt", "jsonl"], default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    fmt = args.format or ("jsonl" if args.out.suffix == ".jsonl" else "txt")
    stats = write_corpus(args.out, args.size, fmt=fmt, seed=args.seed)
    print(
        f"{args.out}: {stats['bytes'] / 1e6:.1f} MB, {stats['documents']} documents "
        f"in {stats['seconds']:.1f} s"
    )


if __name__ == "__main__":
    main()
