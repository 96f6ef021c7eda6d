"""Greedy and beam-search decoding for :class:`~ptm_core.encoders.EncoderDecoderModel`.

:meth:`EncoderDecoderModel.generate <ptm_core.encoders.EncoderDecoderModel.generate>` is
the entry point; the functions here take any :class:`Seq2SeqDecoding` (the model's
``encode``, ``decode``, ``decode_step``, ``init_decoder_cache`` and ``config``), so this
module does not name the model class that calls it.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.encoders.decoder import DecoderCache
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.encoders.transformer import EncoderOutput


class Seq2SeqDecoding(Protocol):
    """What decoding reads of an encoder-decoder model
    (:class:`~ptm_core.encoders.EncoderDecoderModel` is one)."""

    config: Seq2SeqConfig
    training: bool

    def train(self, mode: bool = True) -> object: ...

    def eval(self) -> object: ...

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> EncoderOutput: ...

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        memory_attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]: ...

    def decode_step(
        self, decoder_input_ids: Tensor, cache: DecoderCache
    ) -> tuple[Tensor, DecoderCache]: ...

    def init_decoder_cache(
        self, memory: Tensor, memory_attention_mask: Tensor | None = None
    ) -> DecoderCache: ...


@torch.no_grad()
def generate(
    model: Seq2SeqDecoding,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    max_length: int = 64,
    num_beams: int = 1,
    eos_token_id: int | None = None,
    decoder_start_token_id: int | None = None,
    length_penalty: float = 1.0,
    use_cache: bool = True,
) -> list[list[int]]:
    """Greedy (``num_beams=1``) or beam-search decoding without gradients, in eval mode
    (the mode is restored after); the arguments are those of
    :meth:`~ptm_core.encoders.EncoderDecoderModel.generate`."""
    eos = model.config.eos_token_id if eos_token_id is None else eos_token_id
    start = (
        model.config.decoder_start_token_id
        if decoder_start_token_id is None
        else decoder_start_token_id
    )
    was_training = model.training
    model.eval()
    try:
        memory = model.encode(input_ids, attention_mask).last_hidden_state
        if num_beams <= 1:
            return greedy_search(model, memory, attention_mask, max_length, eos, start, use_cache)
        return beam_search(
            model,
            memory,
            attention_mask,
            max_length,
            eos,
            start,
            num_beams,
            length_penalty,
            use_cache,
        )
    finally:
        model.train(was_training)


def next_logits(
    model: Seq2SeqDecoding,
    tokens: Tensor,
    memory: Tensor,
    mask: Tensor | None,
    cache: DecoderCache | None,
    sources: Tensor | None = None,
) -> tuple[Tensor, DecoderCache | None]:
    # Next-token logits (N, V) after the prefixes `tokens` (N, t) whose sources are rows
    # `sources` (N,) of memory (B, S, D) (None: row i is source i): from the cache, which
    # holds the first cache.length tokens of every row, or by re-running the decoder.
    if cache is None:
        if sources is not None:
            memory = memory.index_select(0, sources)
            mask = None if mask is None else mask.index_select(0, sources)
        _, logits = model.decode(tokens, memory, mask)
        return logits[:, -1], None
    logits, cache = model.decode_step(tokens[:, cache.length :], cache)
    return logits[:, -1], cache


def greedy_search(
    model: Seq2SeqDecoding,
    memory: Tensor,
    mask: Tensor | None,
    max_length: int,
    eos: int,
    start: int,
    use_cache: bool,
) -> list[list[int]]:
    batch = memory.shape[0]
    tokens = torch.full((batch, 1), start, dtype=torch.long, device=memory.device)
    done = torch.zeros(batch, dtype=torch.bool, device=memory.device)
    cache = model.init_decoder_cache(memory, mask) if use_cache else None
    for _ in range(min(max_length, model.config.max_positions - 1)):
        logits, cache = next_logits(model, tokens, memory, mask, cache)
        step = logits.argmax(dim=-1)  # (B,)
        step = torch.where(done, torch.full_like(step, model.config.pad_token_id), step)
        tokens = torch.cat([tokens, step[:, None]], dim=1)
        done = done | (step == eos)
        if bool(done.all()):
            break
    out = []
    for row, finished in zip(tokens[:, 1:].tolist(), done.tolist(), strict=True):
        out.append(row[: row.index(eos) + 1] if finished else row)
    return out


def beam_search(
    model: Seq2SeqDecoding,
    memory: Tensor,
    mask: Tensor | None,
    max_length: int,
    eos: int,
    start: int,
    num_beams: int,
    length_penalty: float,
    use_cache: bool,
) -> list[list[int]]:
    # Every source keeps its alive beams (ids incl. start, summed log-prob) and its
    # finished ones (ids, normalised score); a source stops once no alive beam can beat
    # its finished ones. One decoder call per step serves the alive beams of all active
    # sources: row r of `tokens` / the cache is one beam of source `sources[r]`, rows in
    # the order of `active` then `alive[i]`.
    batch, device = memory.shape[0], memory.device
    alive: list[list[tuple[list[int], float]]] = [[([start], 0.0)] for _ in range(batch)]
    finished: list[list[tuple[list[int], float]]] = [[] for _ in range(batch)]
    active = list(range(batch))
    sources = torch.arange(batch, device=device)  # (N,)
    cache = model.init_decoder_cache(memory, mask) if use_cache else None
    for _ in range(min(max_length, model.config.max_positions - 1)):
        tokens = torch.tensor([ids for i in active for ids, _ in alive[i]], device=device)  # (N, t)
        logits, cache = next_logits(model, tokens, memory, mask, cache, sources)
        logprobs = F.log_softmax(logits.float(), dim=-1)  # (N, V)
        still_active: list[int] = []
        parents: list[int] = []  # row of each surviving beam's parent
        first = 0
        for i in active:
            count = len(alive[i])
            summed = torch.tensor([s for _, s in alive[i]], device=device)
            scores = logprobs[first : first + count] + summed[:, None]  # (n, V)
            top = scores.flatten().topk(min(2 * num_beams, scores.numel()))
            candidates: list[tuple[list[int], float]] = []
            rows: list[int] = []
            for value, index in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                beam, token = divmod(index, scores.shape[1])
                ids = [*alive[i][beam][0], token]
                if token == eos:
                    finished[i].append((ids, value / (len(ids) - 1) ** length_penalty))
                else:
                    candidates.append((ids, value))
                    rows.append(first + beam)
                if len(candidates) == num_beams:
                    break
            first += count
            alive[i] = candidates
            best_done = max((s for _, s in finished[i]), default=-math.inf)
            best_alive = max(
                (s / (len(ids) - 1) ** length_penalty for ids, s in candidates),
                default=-math.inf,
            )
            if candidates and (len(finished[i]) < num_beams or best_done < best_alive):
                still_active.append(i)
                parents.extend(rows)
        active = still_active
        if not active:
            break
        index = torch.tensor(parents, device=device)
        sources = sources.index_select(0, index)
        if cache is not None:
            cache = cache.reorder(index)
    out = []
    for i in range(batch):
        pool = finished[i] + [(ids, s / (len(ids) - 1) ** length_penalty) for ids, s in alive[i]]
        out.append(max(pool, key=lambda item: item[1])[0][1:])
    return out
