"""The vector table every static-embedding method writes, its queries, and embedding init.

Layout (a directory, written atomically)::

    vectors.safetensors   one float32 tensor "vectors" of shape (V, D); row i = vocab line i
    vocab.txt             one token per line, in row order, UTF-8
    table.json            {"format": "ptm-vectors", "version": 1, "method": ..., "dim": D,
                           "size": V, ...training settings and metrics}

``gensim.models.KeyedVectors`` holds the same table (:meth:`VectorTable.to_keyed_vectors`);
neighbours are ranked by cosine similarity and analogies by 3CosAdd (Mikolov et al., 2013,
"Linguistic Regularities in Continuous Space Word Representations"), as gensim does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ptm_core.atomic import atomic_directory

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

FORMAT = "ptm-vectors"
VERSION = 1
VECTORS_FILE = "vectors.safetensors"
VOCAB_FILE = "vocab.txt"
TABLE_FILE = "table.json"
_KEY = "vectors"
_INSTALL = "pip install 'ptm-classic[static]'"


class VectorTableError(ValueError):
    """A vector table directory that is missing, of another format, or inconsistent."""


def require_gensim() -> Any:
    """Import gensim or fail with the command that installs it.

    Raises:
        ImportError: gensim is not installed; the message says ``pip install 'ptm-classic[static]'``.
    """
    try:
        import gensim
    except ImportError:
        raise ImportError(
            f"this needs gensim, which is not installed: {_INSTALL} (or pip install gensim)"
        ) from None
    return gensim


@dataclass
class VectorTable:
    """Static word vectors: one row per vocabulary entry.

    Args:
        vocab: the tokens, in row order (unique, no line breaks).
        vectors: ``(V, D)`` float tensor (stored as float32 on the CPU).
        method: what trained it (``"word2vec-sg"``, ``"word2vec-cbow"``, ``"glove"``,
            ``"nnlm"``, ...).
        metadata: JSON-ready extras written into ``table.json`` (settings, losses).

    Raises:
        VectorTableError: rows and tokens disagree in number, a token repeats, or contains
            a line break.
    """

    vocab: list[str]
    vectors: torch.Tensor
    method: str = "unknown"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vocab = list(self.vocab)
        self.vectors = self.vectors.detach().to("cpu", torch.float32).contiguous()
        if self.vectors.dim() != 2 or self.vectors.shape[0] != len(self.vocab):
            raise VectorTableError(
                f"vectors of shape {tuple(self.vectors.shape)} do not fit {len(self.vocab)} "
                "tokens: give one (V, D) row per vocabulary entry"
            )
        self._index: dict[str, int] = {}
        for row, token in enumerate(self.vocab):
            if "\n" in token or "\r" in token:
                raise VectorTableError(f"token {token!r} (row {row}) holds a line break")
            if token in self._index:
                raise VectorTableError(
                    f"token {token!r} appears twice (rows {self._index[token]} and {row}); "
                    "a vocabulary lists each token once"
                )
            self._index[token] = row
        self._unit: torch.Tensor | None = None

    @property
    def dim(self) -> int:
        """Vector size ``D``."""
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.vocab)

    def __contains__(self, token: object) -> bool:
        return token in self._index

    def index(self, token: str) -> int | None:
        """Row of ``token``, or ``None`` when it is not in the table."""
        return self._index.get(token)

    def vector(self, token: str) -> torch.Tensor:
        """The ``(D,)`` vector of ``token``.

        Raises:
            KeyError: ``token`` is not in the table.
        """
        return self.vectors[self._require(token)]

    # ------------------------------------------------------------------ queries

    def _require(self, token: str) -> int:
        row = self._index.get(token)
        if row is None:
            raise KeyError(
                f"{token!r} is not in the vector table ({len(self.vocab)} tokens, method "
                f"{self.method}); query a word the corpus holds at least min_count times"
            )
        return row

    def unit_vectors(self) -> torch.Tensor:
        """``(V, D)`` rows scaled to unit length (zero rows stay zero); cached."""
        if self._unit is None:
            norms = self.vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)
            self._unit = self.vectors / norms
        return self._unit

    def nearest(
        self, query: torch.Tensor, k: int = 10, exclude: Sequence[int] = ()
    ) -> list[tuple[str, float]]:
        """The ``k`` tokens whose vectors have the highest cosine similarity to ``query``.

        Args:
            query: ``(D,)`` vector.
            k: how many to return.
            exclude: rows never returned.

        Returns:
            ``(token, cosine)`` pairs, most similar first.
        """
        query = query.to(torch.float32)
        scores = self.unit_vectors() @ (query / query.norm().clamp_min(1e-12))  # (V,)
        if exclude:
            scores = scores.clone()
            scores[list(exclude)] = -float("inf")
        k = min(k, len(self.vocab) - len(set(exclude)))
        values, rows = scores.topk(max(k, 0))
        return [
            (self.vocab[r], float(v)) for r, v in zip(rows.tolist(), values.tolist(), strict=True)
        ]

    def most_similar(self, token: str, k: int = 10) -> list[tuple[str, float]]:
        """Nearest neighbours of ``token`` by cosine similarity, itself excluded.

        Returns:
            ``(token, cosine)`` pairs, most similar first (gensim's ``most_similar``).

        Raises:
            KeyError: ``token`` is not in the table.
        """
        row = self._require(token)
        return self.nearest(self.unit_vectors()[row], k, exclude=[row])

    def analogy(self, a: str, b: str, c: str, k: int = 1) -> list[tuple[str, float]]:
        """``a`` is to ``b`` as ``c`` is to ?, by 3CosAdd: ``argmax_x cos(x, b - a + c)``
        over unit vectors, ``a``, ``b`` and ``c`` excluded (gensim's
        ``most_similar(positive=[b, c], negative=[a])``).

        Returns:
            ``(token, cosine)`` pairs, best first.

        Raises:
            KeyError: one of the words is not in the table.
        """
        rows = [self._require(word) for word in (a, b, c)]
        unit = self.unit_vectors()
        query = unit[rows[1]] - unit[rows[0]] + unit[rows[2]]
        return self.nearest(query, k, exclude=rows)

    # ------------------------------------------------------------------ gensim

    def to_keyed_vectors(self) -> KeyedVectors:
        """The table as ``gensim.models.KeyedVectors`` (needs ``ptm-classic[static]``)."""
        require_gensim()
        from gensim.models import KeyedVectors

        keyed = KeyedVectors(vector_size=self.dim, count=0)
        keyed.add_vectors(self.vocab, self.vectors.numpy())
        return keyed

    @classmethod
    def from_keyed_vectors(
        cls, keyed: KeyedVectors, method: str, metadata: Mapping[str, Any] | None = None
    ) -> VectorTable:
        """A table of a gensim ``KeyedVectors``, rows in its ``index_to_key`` order."""
        vectors = torch.tensor(keyed.vectors, dtype=torch.float32)
        return cls(list(keyed.index_to_key), vectors, method, dict(metadata or {}))

    # ------------------------------------------------------------------ files

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the table into directory ``path`` atomically (replacing an old one).

        Returns:
            ``path``.
        """
        from safetensors.torch import save_file

        path = Path(path)
        header = {
            "format": FORMAT,
            "version": VERSION,
            "method": self.method,
            "dim": self.dim,
            "size": len(self.vocab),
            **{k: v for k, v in self.metadata.items() if k not in ("format", "version")},
        }
        with atomic_directory(path) as tmp:
            save_file({_KEY: self.vectors}, str(tmp / VECTORS_FILE))
            (tmp / VOCAB_FILE).write_text(
                "".join(f"{token}\n" for token in self.vocab), encoding="utf-8"
            )
            (tmp / TABLE_FILE).write_text(
                json.dumps(header, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> VectorTable:
        """Read a table written by :meth:`save`.

        Raises:
            VectorTableError: a missing directory or file, another format, or a vocabulary
                whose length differs from the number of rows; the message names the file
                and the fix.
        """
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = Path(path)
        rewrite = (
            "write it again with VectorTable.save or `ptm pretrain experiment=word2vec_tiny` "
            "(or glove_tiny / nnlm_tiny)"
        )
        if not path.is_dir():
            raise VectorTableError(f"{path}: no vector table directory here; {rewrite}")
        for name in (TABLE_FILE, VOCAB_FILE, VECTORS_FILE):
            if not (path / name).is_file():
                raise VectorTableError(
                    f"{path / name}: file missing from the vector table; {rewrite}"
                )
        try:
            header = json.loads((path / TABLE_FILE).read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise VectorTableError(
                f"{path / TABLE_FILE}: not readable JSON ({exc}); {rewrite}"
            ) from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise VectorTableError(
                f"{path / TABLE_FILE}: field format is "
                f"{header.get('format') if isinstance(header, dict) else header!r}, expected "
                f"{FORMAT!r}; this is not a ptm vector table ({rewrite})"
            )
        if header.get("version") != VERSION:
            raise VectorTableError(
                f"{path / TABLE_FILE}: field version is {header.get('version')!r}; this ptm "
                f"reads version {VERSION}: upgrade ptm-classic or {rewrite}"
            )
        try:
            vectors = load_file(str(path / VECTORS_FILE))[_KEY]
        except (SafetensorError, KeyError, OSError) as exc:
            raise VectorTableError(
                f"{path / VECTORS_FILE}: no readable tensor {_KEY!r} ({exc}); {rewrite}"
            ) from None
        try:
            vocab = (path / VOCAB_FILE).read_text("utf-8").split("\n")
        except UnicodeDecodeError as exc:
            raise VectorTableError(f"{path / VOCAB_FILE}: not UTF-8 ({exc}); {rewrite}") from None
        if vocab and vocab[-1] == "":
            vocab.pop()
        if vectors.dim() != 2 or len(vocab) != vectors.shape[0]:
            raise VectorTableError(
                f"{path / VOCAB_FILE}: {len(vocab)} tokens, but {path / VECTORS_FILE} holds "
                f"shape {tuple(vectors.shape)}; the two files come from different tables, "
                f"{rewrite}"
            )
        metadata = {
            k: v
            for k, v in header.items()
            if k not in ("format", "version", "method", "dim", "size")
        }
        try:
            return cls(vocab, vectors, str(header.get("method", "unknown")), metadata)
        except VectorTableError as exc:
            raise VectorTableError(f"{path / VOCAB_FILE}: {exc}; {rewrite}") from None


# ---------------------------------------------------------------------- embedding init


@dataclass
class EmbeddingInit:
    """How many rows of an embedding :func:`init_token_embeddings` filled.

    Attributes:
        total: rows of the embedding (tokenizer vocabulary size).
        exact: rows whose token is in the table as written.
        lowercased: rows found only after lower-casing the token.
        missing: tokens not found (their rows keep their initial values); at most 20 listed
            in ``missing_examples``.
    """

    total: int
    exact: int
    lowercased: int
    missing: int
    missing_examples: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        """Share of rows copied from the table."""
        return (self.exact + self.lowercased) / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "exact": self.exact,
            "lowercased": self.lowercased,
            "missing": self.missing,
            "coverage": self.coverage,
        }


def init_token_embeddings(
    embedding: nn.Embedding,
    tokenizer_vocab: Sequence[str] | Mapping[str, int],
    table: VectorTable,
    *,
    lowercase_fallback: bool = True,
) -> EmbeddingInit:
    """Copy a table's vectors into the rows of a token embedding (in place).

    Row ``i`` of ``embedding`` gets the table's vector of token ``i`` of the tokenizer (or,
    with ``lowercase_fallback``, of its lower-cased form); other rows keep their values.
    WordPiece continuations (``##ing``) are matched as written, so they stay unless the
    table holds them.

    Args:
        embedding: ``nn.Embedding(V_tok, D)``; e.g. ``encoder.word_embeddings``.
        tokenizer_vocab: tokens in id order, or a ``token -> id`` mapping.
        table: the vectors; ``table.dim`` must equal ``D``.
        lowercase_fallback: look up the lower-cased token when the token is missing.

    Returns:
        :class:`EmbeddingInit` with the coverage.

    Raises:
        ValueError: the dimensions differ, or a token id lies outside the embedding.
    """
    rows, dim = embedding.weight.shape
    if table.dim != dim:
        raise ValueError(
            f"the vector table has {table.dim}-dimensional vectors ({table.method}), the "
            f"embedding {dim}: train the table with dim={dim} (e.g. model.dim={dim}) or "
            "build the encoder with that embedding size"
        )
    pairs = (
        list(tokenizer_vocab.items())
        if isinstance(tokenizer_vocab, Mapping)
        else [(token, i) for i, token in enumerate(tokenizer_vocab)]
    )
    target: list[int] = []
    source: list[int] = []
    exact = lowered = 0
    missing: list[str] = []
    for token, token_id in pairs:
        if not 0 <= token_id < rows:
            raise ValueError(
                f"token {token!r} has id {token_id}, outside the embedding's {rows} rows: "
                "give the tokenizer whose vocabulary built this embedding"
            )
        row = table.index(token)
        if row is not None:
            exact += 1
        elif lowercase_fallback and (row := table.index(token.lower())) is not None:
            lowered += 1
        else:
            missing.append(token)
            continue
        target.append(token_id)
        source.append(row)
    if target:
        with torch.no_grad():
            weight = embedding.weight
            weight[torch.tensor(target)] = table.vectors[torch.tensor(source)].to(
                weight.device, weight.dtype
            )
    return EmbeddingInit(len(pairs), exact, lowered, len(missing), missing[:20])


__all__ = [
    "FORMAT",
    "EmbeddingInit",
    "VectorTable",
    "VectorTableError",
    "init_token_embeddings",
    "require_gensim",
]
