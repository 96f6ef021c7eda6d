"""The contract every pre-training objective's test checks (issue 17).

An objective's test subclasses :class:`ObjectiveTestCase` in a few lines: it names the
class under test (``objective_cls``) and, where the defaults do not fit, how to build the
objective, its input and its loss. The four checks then run for it:

* the same generator gives the same batch, and the input is not mutated;
* every key the objective declares in ``batch_keys`` is written by its data side;
* the loss is a finite scalar whose gradient reaches the encoder;
* the heads survive save and reload (``save_heads``/``load_heads``, as a run's ``final/``).

``test_every_objective_has_a_contract_test`` (``test_objective_meta.py``) fails when an
``Objective`` subclass of any package has no such subclass. Extension packages' tests import
this module as ``cases`` (``tests/conftest.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ptm_core import bert_encoder
from ptm_core.models import PretrainingModel
from ptm_core.objectives import Objective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import load_heads, save_heads
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=120, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
TINY = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64)


def token_batch(
    vocab: VocabInfo = VOCAB, rows: int = 4, length: int = 16, seed: int = 0
) -> dict[str, Tensor]:
    """``[CLS] a.. [SEP] b.. [SEP] [PAD]..`` rows with the keys the text collator writes."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(vocab.special_ids) + 1, vocab.vocab_size, (rows, length), generator=gen)
    lengths = torch.tensor([length - 2 * (i % 3) for i in range(rows)])
    pad = torch.arange(length)[None, :] >= lengths[:, None]
    ids[:, 0] = vocab.cls_id
    ids[:, length // 2] = vocab.sep_id
    ids[torch.arange(rows), lengths - 1] = vocab.sep_id
    ids[pad] = vocab.pad_id
    special = (ids == vocab.cls_id) | (ids == vocab.sep_id) | pad
    token_type = (torch.arange(length)[None, :] > length // 2).long() & ~pad
    return {
        "input_ids": ids,
        "attention_mask": (~pad).long(),
        "token_type_ids": token_type,
        "special_tokens_mask": special.long(),
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor):
        return isinstance(b, Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        # an AttentionStructure in the batch: its per-token tensors, field by field
        fields = [f.name for f in dataclasses.fields(a)]
        return type(a) is type(b) and all(_same(getattr(a, f), getattr(b, f)) for f in fields)
    return bool(a == b)


def _snapshot(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, Mapping):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


class ObjectiveTestCase:
    """Base of every objective's contract test (pytest collects the ``Test*`` subclasses).

    Subclasses set ``objective_cls`` (and ``kwargs``) and override the hooks that do not
    fit: :meth:`make_encoder`, :meth:`make_objective`, :meth:`make_input`,
    :meth:`data_side`, :meth:`loss`.
    """

    objective_cls: ClassVar[type[nn.Module]]
    kwargs: ClassVar[Mapping[str, Any]] = {}
    vocab: ClassVar[VocabInfo] = VOCAB

    # -- hooks --------------------------------------------------------------------------
    def make_encoder(self) -> nn.Module:
        """The network the objective trains (a tiny BERT by default)."""
        return bert_encoder(vocab_size=self.vocab.vocab_size, **TINY)

    def make_objective(self, encoder: nn.Module) -> Objective:
        return build_objective(self.objective_cls, encoder, self.vocab, **self.kwargs)

    def make_input(self) -> Any:
        """What the data side takes (a padded token batch by default)."""
        return token_batch(self.vocab)

    def data_side(self, objective: Objective, inputs: Any, generator: torch.Generator) -> Any:
        """Static then dynamic data side, as the pre-training collator runs them."""
        rows = []
        for i in range(len(inputs["input_ids"])):
            example = {k: v[i].tolist() for k, v in inputs.items() if isinstance(v, Tensor)}
            rows.append(objective.prepare_example(example, generator))
        static = {k: torch.tensor([row[k] for row in rows]) for k in rows[0]}
        return objective.collate({**inputs, **static}, generator)

    def loss(self, encoder: nn.Module, objective: Objective, batch: Any) -> Tensor:
        """The objective's loss through the model the trainer runs."""
        model = PretrainingModel(encoder, ObjectiveMix({objective.name: objective}))  # type: ignore[arg-type]
        return model(batch).loss

    # -- the contract -------------------------------------------------------------------
    def _build(self, seed: int = 0) -> tuple[nn.Module, Objective]:
        torch.manual_seed(seed)
        encoder = self.make_encoder()
        return encoder, self.make_objective(encoder)

    def _batch(self, objective: Objective, seed: int = 0) -> Any:
        return self.data_side(objective, self.make_input(), torch.Generator().manual_seed(seed))

    def test_same_generator_same_batch_and_input_untouched(self) -> None:
        _, objective = self._build()
        inputs = self.make_input()
        before = _snapshot(inputs)
        first = self.data_side(objective, inputs, torch.Generator().manual_seed(3))
        assert _same(inputs, before), "the data side mutated its input"
        again = self.data_side(objective, self.make_input(), torch.Generator().manual_seed(3))
        assert _same(first, again), "the same generator gave a different batch"

    def test_declared_batch_keys_are_written(self) -> None:
        _, objective = self._build()
        batch = self._batch(objective)
        missing = [key for key in objective.batch_keys if key not in batch]
        assert not missing, f"{type(objective).__name__} declares {missing} but does not write them"

    def test_loss_is_a_finite_scalar_whose_gradient_reaches_the_encoder(self) -> None:
        encoder, objective = self._build()
        loss = self.loss(encoder, objective, self._batch(objective))
        assert loss.dim() == 0 and torch.isfinite(loss), loss
        loss.backward()
        grads = [p.grad for p in encoder.parameters() if p.grad is not None]
        assert any(bool(g.abs().sum() > 0) for g in grads), "no gradient reached the encoder"

    def test_heads_survive_save_and_reload(self, tmp_path: Path) -> None:
        encoder, objective = self._build(seed=0)
        save_heads(ObjectiveMix({objective.name: objective}), encoder, tmp_path)
        torch.manual_seed(1)
        fresh = self.make_objective(encoder)
        mix = ObjectiveMix({objective.name: fresh})
        shared = {p.data_ptr() for p in encoder.parameters()}
        own = mix.state_dict()
        missing = [
            k for k in load_heads(mix, tmp_path) if own[k].data_ptr() not in shared
        ]  # tensors tied to the encoder are re-tied, not saved
        assert not missing, f"head tensors not saved: {missing}"
        assert _same(objective.state_dict(), fresh.state_dict())


class Seq2SeqObjectiveTestCase(ObjectiveTestCase):
    """The same contract for BART/T5/MASS: sources in, an encoder-decoder trained.

    The objective is built from ``vocab`` and ``kwargs`` (it has no heads: the output
    projection is the model's); the model gets the objective's extra ids (T5 sentinels).
    """

    def make_encoder(self) -> nn.Module:
        from functools import partial

        from ptm_core.encoders.encoder_decoder import build_encoder_decoder
        from ptm_core.seq2seq_pretraining import build_model

        tiny = partial(
            build_encoder_decoder,
            hidden_size=32,
            encoder_layers=1,
            decoder_layers=1,
            num_heads=2,
            intermediate_size=64,
            max_positions=64,
        )
        objective = self.objective_cls(vocab=self.vocab, **self.kwargs)
        return build_model(tiny, self.vocab, objective)  # type: ignore[arg-type]

    def make_objective(self, encoder: nn.Module) -> Objective:
        return self.objective_cls(vocab=self.vocab, **self.kwargs)

    def make_input(self) -> Any:
        gen = torch.Generator().manual_seed(0)
        low = len(self.vocab.special_ids) + 1
        return [
            [
                torch.randint(low, self.vocab.vocab_size, (n,), generator=gen).tolist()
                for n in (7, 5)
            ]
            for _ in range(3)
        ]

    def data_side(self, objective: Objective, inputs: Any, generator: torch.Generator) -> Any:
        return objective.collate(inputs, generator)

    def loss(self, encoder: nn.Module, objective: Objective, batch: Any) -> Tensor:
        from ptm_core.families import get
        from ptm_core.models import PretrainingModel
        from ptm_core.objectives.mix import ObjectiveMix

        keys = get("seq2seq").input_keys
        mix = ObjectiveMix({"seq2seq": objective})
        return PretrainingModel(encoder, mix, input_keys=keys)(batch).loss
