"""Reading a prepared XLM folder (:func:`~ptm_multilingual.prepared_data.prepare_xlm`'s
output): MLM stream rows and TLM pair rows built per index from memory-mapped shards.

The layout and format are :mod:`ptm_multilingual.prepared_data`'s; this module only reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ptm_core.data.prepared import (
    MANIFEST,
    PreparedCorpus,
    PreparedDataError,
)
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.prepared_data import (
    FORMAT,
    TOKENIZER_DIR,
)
from ptm_multilingual.rows import ConcatRows, MLMStreamRows, ShardedStream, TLMPairRows
from ptm_multilingual.tokenizer import SharedBPETokenizer


def _rebuild_fix(directory: Path, store: Path) -> str:
    return (
        f"delete {store} (or the whole {directory}) and run again: the damaged part is "
        "prepared again from the inputs"
    )


class PreparedXLM:
    """A prepared XLM folder opened read-only: MLM and TLM rows built per index.

    Opening reads the manifests and checks every shard file's size and (``verify``)
    SHA-256; nothing else is loaded. Shards are memory-mapped when first read.

    Args:
        directory: the folder :func:`prepare_xlm` wrote.
        verify: check every shard file's SHA-256 (reads each byte once).

    Raises:
        PreparedDataError: no manifest, another format, or a damaged or missing shard file
            (the message names the file and how to rebuild it).
    """

    def __init__(self, directory: str | Path, *, verify: bool = True) -> None:
        self.directory = Path(directory)
        path = self.directory / MANIFEST
        if not path.is_file():
            raise PreparedDataError(
                path,
                None,
                "path",
                "no prepared XLM corpora here (manifest.json is missing)",
                "prepare them with ptm_multilingual.prepare_xlm, or run `ptm pretrain` with "
                "data.corpus/data.parallel",
            )
        self.manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if self.manifest.get("format") != FORMAT:
            raise PreparedDataError(
                path,
                None,
                "format",
                f"format is {self.manifest.get('format')!r}, not {FORMAT!r}",
                "prepare the corpora again with this version of ptm",
            )
        self.tokenizer = SharedBPETokenizer.from_directory(self.directory / TOKENIZER_DIR)
        self.mono = {
            item["lang"]: self._store(self.directory / item["dir"], verify)
            for item in self.manifest["mono"]
        }
        self.parallel = [
            (
                item,
                self._store(self.directory / item["dir"] / "source", verify),
                self._store(self.directory / item["dir"] / "target", verify),
            )
            for item in self.manifest["parallel"]
        ]

    @classmethod
    def open(cls, directory: str | Path, *, verify: bool = True) -> PreparedXLM:
        """Open a prepared folder (see the class)."""
        return cls(directory, verify=verify)

    def _store(self, store: Path, verify: bool) -> PreparedCorpus:
        try:
            return PreparedCorpus.open(store, verify=verify)
        except PreparedDataError as exc:
            raise PreparedDataError(
                exc.path, exc.line, exc.field, exc.problem, _rebuild_fix(self.directory, store)
            ) from None

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    @property
    def vocab(self) -> VocabInfo:
        return self.tokenizer.vocab_info

    def mlm_counts(self) -> dict[str, int]:
        """Language -> sentences of its MLM stream (``n_l`` of the language sampling)."""
        return {lang: store.num_sentences for lang, store in self.mono.items()}

    def mlm_rows(self, stream_length: int) -> dict[str, MLMStreamRows]:
        """Language -> its MLM stream rows of ``stream_length`` tokens."""
        return {
            lang: MLMStreamRows(
                ShardedStream(store), self.tokenizer.lang_id(lang), self.vocab, stream_length
            )
            for lang, store in self.mono.items()
        }

    def tlm_rows(
        self, max_length: int, directions: Sequence[str] | None = None
    ) -> dict[str, ConcatRows]:
        """Direction (``"en-fr"``) -> TLM rows of every corpus of that pair, in order.

        Args:
            max_length: tokens per row (both sentences).
            directions: orders to use (first language first); default each as stored.
        """
        parts: dict[str, list[TLMPairRows]] = {}
        for item, source, target in self.parallel:
            src, tgt = item["source_lang"], item["target_lang"]
            forward, backward = f"{src}-{tgt}", f"{tgt}-{src}"
            sides = {forward: (source, target, src, tgt), backward: (target, source, tgt, src)}
            for name in [forward] if directions is None else [forward, backward]:
                if directions is not None and name not in directions:
                    continue
                a, b, la, lb = sides[name]
                parts.setdefault(name, []).append(
                    TLMPairRows(
                        a,
                        b,
                        self.tokenizer.lang_id(la),
                        self.tokenizer.lang_id(lb),
                        self.vocab,
                        max_length,
                    )
                )
        return {name: ConcatRows(rows) for name, rows in parts.items()}

    def token_counts(self, stream_length: int) -> torch.Tensor:
        """How often each id occurs in the MLM rows (``<s>`` of each row included).

        Read from the memory map in chunks; equal to a ``bincount`` over every row's
        ``input_ids`` of :meth:`mlm_rows`.

        Returns:
            ``int64 (vocab_size,)``.
        """
        size = self.vocab.vocab_size
        counts = np.zeros(size, dtype=np.int64)
        for rows in self.mlm_rows(stream_length).values():
            stream = rows.stream
            for chunk in stream.chunks():
                counts += np.bincount(chunk.astype(np.int64), minlength=size)[:size]
            counts[self.vocab.cls_id] += len(rows)
            covered = len(rows) * rows.step
            if covered < stream.num_tokens:  # a last piece of one token is no row
                for token in stream.read(covered, stream.num_tokens).tolist():
                    counts[token] -= 1
        return torch.from_numpy(counts)


__all__ = ["PreparedXLM"]
