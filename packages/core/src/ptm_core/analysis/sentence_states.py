"""An encoder and its tokenizer run over sentences, for representation and attention analysis.

Any folder ptm reads as a :class:`~ptm_core.encoders.TransformerEncoder` works: a
pre-training ``final/`` (BERT, RoBERTa-style, ALBERT, ELECTRA, ERNIE-Baidu; an ERNIE-THU
folder through its text encoder), a fine-tuned task ``final/`` (its encoder, without the task
head) and a Hugging Face folder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.progress import batch_starts

logger = logging.getLogger(__name__)


@dataclass
class AnalysedEncoder:
    """An encoder (eval mode) with the tokenizer of its folder.

    Attributes:
        encoder: the encoder.
        tokenizer: the folder's tokenizer (``backend``: a Hugging Face ``Tokenizer``;
            ``vocab_info``: the special ids).
        source: the folder.
    """

    encoder: TransformerEncoder
    tokenizer: object
    source: str

    @property
    def special_ids(self) -> dict[str, int]:
        info = self.tokenizer.vocab_info  # type: ignore[attr-defined]
        return {"cls": int(info.cls_id), "sep": int(info.sep_id), "pad": int(info.pad_id)}

    def encode(self, sentences: Sequence[str], max_length: int) -> list[list[int]]:
        """Token ids with the special tokens, cut to ``max_length`` (the last ``[SEP]`` kept)."""
        config = self.encoder.config
        table = config.max_positions if config.position_encoding == "absolute" else max_length
        limit = min(max_length, table)
        backend = self.tokenizer.backend  # type: ignore[attr-defined]
        rows = [e.ids for e in backend.encode_batch(list(sentences), add_special_tokens=True)]
        return [row if len(row) <= limit else row[: limit - 1] + row[-1:] for row in rows]

    def batches(
        self, rows: Sequence[Sequence[int]], batch_size: int, what: str = "encode"
    ) -> Iterator[tuple[int, Tensor, Tensor]]:
        """``(first row, input_ids (B, L), attention_mask (B, L))`` padded batches."""
        from ptm_core.finetune.data.features import pad_rows

        pad = self.special_ids["pad"]
        for first in batch_starts(len(rows), batch_size, what, "sentence"):
            chunk = rows[first : first + batch_size]
            ids = pad_rows(chunk, pad)
            yield first, ids, pad_rows([[1] * len(row) for row in chunk], 0)


def load_analysed_encoder(folder: str | Path) -> AnalysedEncoder:
    """The encoder and tokenizer of ``folder`` (see the module docstring).

    Raises:
        CheckpointError / FileNotFoundError / ValueError: an unreadable folder (the message
            names the file and the fix).
    """
    from ptm_core.checkpoints.encoder import load_encoder
    from ptm_core.compress.final_dir import load_final
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.finetune.model import TASK_JSON

    directory = Path(folder)
    if (directory / TASK_JSON).is_file():
        encoder = load_final(directory).encoder
    else:
        encoder = load_encoder(directory, strict=False)
    return AnalysedEncoder(encoder.eval(), load_task_tokenizer(directory), str(directory))


def read_sentences(path: str | Path, *, limit: int | None = None) -> list[str]:
    """The non-empty lines of a text file (one sentence per line), at most ``limit``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: no sentence in it.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such file; pass --sentences with one sentence a line")
    lines = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
    sentences = [line for line in lines if line]
    if not sentences:
        raise ValueError(f"{file}: no sentence (one sentence per line)")
    return sentences[:limit] if limit else sentences


@dataclass
class TokenStates:
    """Every layer's vectors of the real (non-special) tokens of some sentences.

    Attributes:
        layers: ``num_layers + 1`` matrices ``(N, D)``: the embedding output, then each layer.
        sentence_of: ``(N,)`` the sentence of each token.
        token_ids: ``(N,)`` the token ids.
        available: real tokens in the sentences (``N`` or more when a sample was kept).
    """

    layers: list[Tensor]
    sentence_of: Tensor
    token_ids: Tensor
    available: int


@torch.no_grad()
def token_states(
    model: AnalysedEncoder,
    rows: Sequence[Sequence[int]],
    *,
    batch_size: int = 32,
    max_tokens: int | None = None,
    seed: int = 0,
) -> TokenStates:
    """Run ``model`` over token id ``rows`` and keep every layer's real-token vectors.

    ``[CLS]``, ``[SEP]`` and padding are left out: their vectors are outliers that would
    dominate similarity statistics of the words.

    Args:
        model: the encoder and tokenizer.
        rows: token ids per sentence (with the special tokens).
        batch_size: sentences per forward pass.
        max_tokens: keep a seeded sample of this many tokens (the same tokens for every
            model given the same rows), so memory stays ``max_tokens x layers x D``.
        seed: the sample's seed.
    """
    special = torch.tensor(sorted(set(model.special_ids.values())))
    chosen = [torch.ones(len(row), dtype=torch.bool) for row in rows]
    for row, flags in zip(rows, chosen, strict=True):
        flags &= ~torch.isin(torch.tensor(row, dtype=torch.long), special)
    total = int(sum(int(flags.sum()) for flags in chosen))
    if max_tokens is not None and total > max_tokens:
        picked = torch.zeros(total, dtype=torch.bool)
        generator = torch.Generator().manual_seed(seed)
        picked[torch.randperm(total, generator=generator)[:max_tokens]] = True
        start = 0
        for flags in chosen:
            count = int(flags.sum())
            flags[flags.clone()] = picked[start : start + count]
            start += count
    layers: list[list[Tensor]] = []
    sentence_of: list[Tensor] = []
    token_ids: list[Tensor] = []
    for first, ids, mask in model.batches(rows, batch_size, "hidden states"):
        out = model.encoder(ids, attention_mask=mask, output_hidden_states=True)
        assert out.hidden_states is not None
        keep = torch.zeros_like(mask, dtype=torch.bool)
        for i, flags in enumerate(chosen[first : first + ids.shape[0]]):
            keep[i, : len(flags)] = flags
        if not layers:
            layers = [[] for _ in out.hidden_states]
        for store, hidden in zip(layers, out.hidden_states, strict=True):
            store.append(hidden[keep].float())
        rows_of = torch.arange(first, first + ids.shape[0])[:, None].expand_as(ids)
        sentence_of.append(rows_of[keep])
        token_ids.append(ids[keep])
    return TokenStates(
        layers=[torch.cat(store) for store in layers],
        sentence_of=torch.cat(sentence_of),
        token_ids=torch.cat(token_ids),
        available=total,
    )
