"""Stage-2 rows and batches: XAE pairs and DAE sentences read lazily from prepared shards.

The rows come from the same prepared folder as stage 1
(:class:`~ptm_multilingual.prepared_reader.PreparedXLM`): every parallel corpus gives XAE
rows in the directions asked for, and every monolingual corpus (or, when there is none,
each side of the parallel corpora) gives DAE sentences. Nothing is held in a list: a row is
built when a batch draws it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from ptm_core.data.layouts import LazyRows
from ptm_core.seeding import generator_for
from ptm_multilingual.prepared_reader import PreparedXLM
from ptm_multilingual.rows import ConcatRows, MappedShards
from ptm_multilingual.xnlg.objective import XNLGObjective, XNLGRow


class SentenceRows(LazyRows):
    """Sentence ``i`` of a prepared store as a DAE row (or, with ``target``, the XAE pair
    ``i`` of two aligned stores). The stored ``</s>`` is cut; the objective adds specials.

    Args:
        source: the encoder side's store.
        source_lang: its language id.
        target: the decoder side's store (``None``: DAE on ``source``).
        target_lang: its language id (``None``: ``source_lang``).
    """

    def __init__(
        self,
        source: MappedShards,
        source_lang: int,
        target: MappedShards | None = None,
        target_lang: int | None = None,
    ) -> None:
        if target is not None and target.num_sentences != source.num_sentences:
            raise ValueError(
                f"{source.directory} holds {source.num_sentences} sentences but "
                f"{target.directory} holds {target.num_sentences}; the sides are misaligned, "
                "delete the prepared corpus folder and run again"
            )
        self.source = source
        self.target = target
        self.source_lang = source_lang
        self.target_lang = source_lang if target_lang is None else target_lang

    def __len__(self) -> int:
        return self.source.num_sentences

    def _build(self, index: int) -> XNLGRow:
        source = self.source.sentence(index)[:-1].tolist()
        if self.target is None:
            return XNLGRow(source, source, self.source_lang, self.source_lang, True)
        target = self.target.sentence(index)[:-1].tolist()
        return XNLGRow(source, target, self.source_lang, self.target_lang, False)


def stage2_rows(
    prepared: PreparedXLM, directions: Sequence[str] | None = None
) -> tuple[dict[str, ConcatRows], dict[str, ConcatRows]]:
    """XAE rows by direction (``"en-fr"``) and DAE rows by language.

    Args:
        prepared: the prepared corpora.
        directions: XAE directions to keep; ``None``: both directions of every corpus.

    Raises:
        ValueError: a direction no parallel corpus has (the message lists those there are).
    """
    tok = prepared.tokenizer
    xae: dict[str, list[Any]] = {}
    sides: dict[str, list[Any]] = {}
    for item, source, target in prepared.parallel:
        a, b = MappedShards(source), MappedShards(target)
        src, tgt = item["source_lang"], item["target_lang"]
        for (one, l1), (two, l2) in (((a, src), (b, tgt)), ((b, tgt), (a, src))):
            name = f"{l1}-{l2}"
            if directions is None or name in directions:
                xae.setdefault(name, []).append(
                    SentenceRows(one, tok.lang_id(l1), two, tok.lang_id(l2))
                )
            sides.setdefault(l1, []).append(SentenceRows(one, tok.lang_id(l1)))
    missing = sorted(set(directions or ()) - set(xae))
    if missing:
        there = sorted({f"{i['source_lang']}-{i['target_lang']}" for i, _, _ in prepared.parallel})
        raise ValueError(
            f"xnlg.directions {missing}: no parallel corpus has them (corpora: {there}, "
            "either order)"
        )
    dae: dict[str, list[Any]] = {
        lang: [SentenceRows(MappedShards(store), tok.lang_id(lang))]
        for lang, store in prepared.mono.items()
    }
    for lang, rows in sides.items():
        dae.setdefault(lang, rows)  # a language with no monolingual corpus: its pair sides
    return (
        {k: ConcatRows(v) for k, v in sorted(xae.items())},
        {k: ConcatRows(v) for k, v in sorted(dae.items())},
    )


class XNLGBatches:
    """Deterministic, resumable stage-2 batches (a trainer ``BatchSource``).

    Batch ``i`` of epoch ``e`` draws, with a generator seeded by ``(seed, e, i)``,
    ``round(batch_size * dae_fraction)`` DAE rows (a language uniformly, then a sentence)
    and XAE rows for the rest (a direction uniformly, then a pair), and collates them with
    the objective (which noises the DAE rows from the same generator).

    Args:
        xae: XAE rows by direction.
        dae: DAE rows by language.
        objective: the stage-2 objective.
        batch_size: rows per batch.
        dae_fraction: share of DAE rows.
        batches_per_epoch: batches per epoch.
        seed: base seed.
    """

    def __init__(
        self,
        xae: dict[str, ConcatRows],
        dae: dict[str, ConcatRows],
        objective: XNLGObjective,
        batch_size: int,
        dae_fraction: float,
        batches_per_epoch: int,
        seed: int = 0,
    ) -> None:
        if not 0 <= dae_fraction <= 1:
            raise ValueError(f"xnlg.dae_fraction must be in [0, 1], got {dae_fraction}")
        if batch_size < 1 or batches_per_epoch < 1:
            raise ValueError("data.batch_size and data.batches_per_epoch must be >= 1")
        self.dae_rows = round(batch_size * dae_fraction)
        self.xae_rows = batch_size - self.dae_rows
        self.xae = {k: v for k, v in xae.items() if len(v)}
        self.dae = {k: v for k, v in dae.items() if len(v)}
        if self.xae_rows and not self.xae:
            raise ValueError(
                "no XAE pairs: give data.parallel (parallel corpora), or xnlg.dae_fraction=1"
            )
        if self.dae_rows and not self.dae:
            raise ValueError("no DAE sentences: give data.corpus, or xnlg.dae_fraction=0")
        self.objective = objective
        self.batches_per_epoch = batches_per_epoch
        self.seed = seed

    def __len__(self) -> int:
        return self.batches_per_epoch

    @staticmethod
    def _draw(groups: dict[str, ConcatRows], count: int, generator: torch.Generator) -> list[Any]:
        names = list(groups)
        picks = torch.randint(len(names), (count,), generator=generator).tolist()
        rows = []
        for pick in picks:
            group = groups[names[pick]]
            rows.append(group[int(torch.randint(len(group), (1,), generator=generator))])
        return rows

    def batch(self, epoch: int, index: int) -> dict[str, torch.Tensor]:
        generator = generator_for(self.seed, epoch, index, "xnlg")
        rows = self._draw(self.xae, self.xae_rows, generator) if self.xae_rows else []
        rows += self._draw(self.dae, self.dae_rows, generator) if self.dae_rows else []
        order = np.asarray(torch.randperm(len(rows), generator=generator))
        return self.objective.collate([rows[i] for i in order], generator)

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        for index in range(start, self.batches_per_epoch):
            yield self.batch(epoch, index)


__all__ = ["SentenceRows", "XNLGBatches", "stage2_rows"]
