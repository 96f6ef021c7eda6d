"""Where a word-substitution attack gets its candidate words.

- :class:`EmbeddingCandidates`: the nearest neighbours of the word in a static word-vector
  table (word2vec, GloVe or NNLM, as ``ptm pretrain experiment=word2vec_tiny`` writes it:
  :class:`~ptm_core.data.vector_table.VectorTable`), by cosine, the top ``k`` above a
  similarity threshold (TextFooler, Jin et al., 2020, takes 50 above 0.5 in counter-fitted
  vectors).
- :class:`MaskedLMCandidates`: the word masked in its sentence and the masked-LM's top
  ``k`` whole-word predictions (BAE-R, Garg & Ramakrishnan, 2020; BERT-Attack, Li et al.,
  2020, reads the same head without the mask).

Both return whole words that pass :func:`~ptm_core.analysis.attack_words.is_substitute`,
in the original word's case pattern, best first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from ptm_core.analysis.attack_words import WordSpan, is_substitute, match_case, with_words
from ptm_core.analysis.masked_lm_model import MaskedLanguageModel


class CandidateSource(Protocol):
    """Substitutes of word ``index`` of ``text`` (``spans`` are its words), best first."""

    name: str

    def __call__(self, text: str, spans: Sequence[WordSpan], index: int) -> list[str]: ...


class EmbeddingCandidates:
    """Nearest neighbours in a static word-vector table.

    Args:
        table: a :class:`~ptm_core.data.vector_table.VectorTable` (or the folder holding one).
        k: at most this many neighbours per word.
        min_similarity: only neighbours whose cosine similarity is at least this.

    A word missing from the table is looked up lower-cased (tables trained on lower-cased
    text); a word in neither has no candidates.
    """

    name = "embeddings"

    def __init__(self, table: object, *, k: int = 50, min_similarity: float = 0.5) -> None:
        from ptm_core.data.vector_table import VectorTable

        if isinstance(table, (str, Path)):
            table = VectorTable.load(table)
        if not isinstance(table, VectorTable):
            raise TypeError(f"table must be a VectorTable or its folder, got {type(table)}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not -1.0 <= min_similarity <= 1.0:
            raise ValueError(f"min_similarity is a cosine in [-1, 1], got {min_similarity}")
        self.table = table
        self.k = k
        self.min_similarity = min_similarity
        self._cache: dict[str, list[tuple[str, float]]] = {}

    def neighbours(self, word: str) -> list[tuple[str, float]]:
        """``(word, cosine)`` neighbours of ``word`` that pass the filters, nearest first."""
        key = word if word in self.table else word.lower()
        if key not in self._cache:
            found: list[tuple[str, float]] = []
            if key in self.table:
                # a few extra, as stop words and sub-word rows are filtered out after
                for other, score in self.table.most_similar(key, self.k + 20):
                    if score < self.min_similarity or len(found) == self.k:
                        break
                    if is_substitute(other, word):
                        found.append((other, score))
            self._cache[key] = found
        return self._cache[key]

    def similarity(self, a: str, b: str) -> float | None:
        """Cosine similarity of two words in the table (``None``: one is not in it)."""
        rows = [self.table.index(w if w in self.table else w.lower()) for w in (a, b)]
        if rows[0] is None or rows[1] is None:
            return None
        unit = self.table.unit_vectors()
        return float(unit[rows[0]] @ unit[rows[1]])

    def __call__(self, text: str, spans: Sequence[WordSpan], index: int) -> list[str]:
        word = spans[index].text
        seen: set[str] = set()
        out = []
        for other, _score in self.neighbours(word):
            cased = match_case(other, word)
            if cased not in seen:
                seen.add(cased)
                out.append(cased)
        return out


class MaskedLMCandidates:
    """The masked-LM's top whole-word predictions at the word, masked in its sentence.

    Args:
        model: a masked LM (:func:`~ptm_core.analysis.load_masked_language_model`).
        k: at most this many words per position.
        similar_in: keep only predictions whose cosine similarity to the word in this
            table is at least its ``min_similarity`` (a word-embedding constraint in the
            manner of TextFooler's; words missing from the table are dropped).

    Predictions that are a word piece (``##ing``, a BPE or SentencePiece piece without its
    word-start marker), a special token, a stop word or the word itself are skipped;
    byte-level BPE tokens are decoded (``Ġcafé``). A piece that starts a word but needs a
    continuation cannot be told from a whole word and may be proposed.
    """

    name = "mlm"

    def __init__(
        self,
        model: MaskedLanguageModel,
        *,
        k: int = 50,
        similar_in: EmbeddingCandidates | None = None,
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.model = model
        self.k = k
        self.similar_in = similar_in
        if similar_in is not None:
            self.name = "mlm-filtered"
        info = model.tokenizer.vocab_info  # type: ignore[attr-defined]
        self._specials = set(info.special_ids)
        backend = model.tokenizer.backend  # type: ignore[attr-defined]
        self._backend = backend
        self._words: dict[int, str | None] = {}
        self._marker = _word_marker(backend)

    def _word(self, token_id: int) -> str | None:
        """The whole word ``token_id`` stands for, or ``None`` (a piece, a special)."""
        if token_id not in self._words:
            token = self._backend.id_to_token(token_id)
            word: str | None = None
            if token is not None and token_id not in self._specials:
                starts, marker = self._marker
                if not starts:  # WordPiece: "##" marks a continuation
                    word = None if token.startswith(marker) else token
                elif token.startswith(marker) and len(token) > len(marker):
                    # decoding turns byte-level BPE's alphabet back into text
                    word = self._backend.decode([token_id]).strip()
            self._words[token_id] = word
        return self._words[token_id]

    def __call__(self, text: str, spans: Sequence[WordSpan], index: int) -> list[str]:
        original = spans[index].text
        masked = with_words(text, spans, {index: self.model.mask_token})
        log_probs = self.model.mask_log_probs([masked])[0]
        vocab_rows = min(log_probs.shape[0], self._backend.get_vocab_size())
        order = torch.argsort(log_probs[:vocab_rows], descending=True)
        out: list[str] = []
        for token_id in order[: max(self.k * 4, 64)].tolist():
            word = self._word(int(token_id))
            if word is not None and is_substitute(word, original) and self._similar(word, original):
                cased = match_case(word, original)
                if cased not in out:
                    out.append(cased)
                    if len(out) == self.k:
                        break
        return out

    def _similar(self, word: str, original: str) -> bool:
        if self.similar_in is None:
            return True
        similarity = self.similar_in.similarity(word, original)
        return similarity is not None and similarity >= self.similar_in.min_similarity


def _word_marker(backend: Any) -> tuple[bool, str]:
    """``(marks word starts, marker)`` of a ``tokenizers.Tokenizer``: WordPiece marks
    continuations (``##``), byte-level BPE word starts (``Ġ``), SentencePiece (``▁``)."""
    spec = json.loads(backend.to_str())
    model = spec.get("model") or {}
    if model.get("type") == "WordPiece":
        return False, str(model.get("continuing_subword_prefix") or "##")
    if "ByteLevel" in json.dumps(spec.get("pre_tokenizer")):
        return True, "Ġ"
    return True, "▁"


__all__ = ["CandidateSource", "EmbeddingCandidates", "MaskedLMCandidates"]
