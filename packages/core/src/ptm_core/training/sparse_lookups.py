"""Tied token tables: the lookups' gradient rows are added in place, not a second dense table.

When the token table is tied to an output layer (BERT's MLM decoder, XLNet's LM head), its
gradient has two parts: the output layer's, a dense ``(V, D)`` matrix product, and the
lookups', which touch only the rows of the batch's tokens. ``nn.Embedding`` builds the
second as a dense ``(V, D)`` tensor too (zeros, then the rows added), and autograd adds it
to the first at the end of backward, when every other gradient already exists. For
BERT-base that is a 94 MB tensor written and read every step, at the moment of the
process's peak memory. Measured on a 2-core AVX-512 CPU, bf16 autocast, batch 8 x 128
(``python -m benchmarks.memory --impl ptm --size base --whole --precision default``): the
peak moves to the start of backward and falls by 20-45 MB at BERT-base; a BERT-mini
pre-training step is 2.7% faster (the 31 MB fill and add are gone).

:class:`TiedLookupRows` makes the tied tables' lookups keep their gradient rows aside
(the token ids and one ``D``-vector per token) instead. Autograd then accumulates the
output layer's dense gradient as the table's gradient, and the rows are added into it in
place right after (``Tensor.register_post_accumulate_grad_hook``). A step whose tied output
layer gave no gradient gets a dense one built from the rows in :meth:`TiedLookupRows.flush`,
which the trainer calls after backward. The sum is the same as ``nn.Embedding``'s up to
the order in which repeated tokens' rows are added; rows of ``padding_idx`` get no gradient,
as in ``nn.Embedding``.

The :class:`~ptm_core.training.Trainer` uses this for the length of ``fit()`` in one eager
process (``trainer.sparse_lookups``); DDP, FSDP and ``torch.compile`` keep
``nn.Embedding``'s own backward. Untied tables keep it too: there the dense gradient is the
only one and has to be built anyway.

While switched, a table's ``forward`` is an instance attribute bound to that table: a
callback that copies the model during ``fit()`` should copy its ``state_dict`` (as
checkpoints do), not ``copy.deepcopy`` the module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle


class _Rows:
    """The rows a table's lookups produced since the last accumulation."""

    def __init__(self, padding_idx: int | None) -> None:
        self.padding_idx = padding_idx
        self.ids: list[Tensor] = []
        self.grads: list[Tensor] = []

    def add(self, ids: Tensor, grad: Tensor) -> None:
        ids, grad = ids.reshape(-1), grad.reshape(ids.numel(), -1)
        if self.padding_idx is not None:
            keep = ids != self.padding_idx
            ids, grad = ids[keep], grad[keep]
        self.ids.append(ids)
        self.grads.append(grad)

    def add_into(self, target: Tensor) -> None:
        for ids, grad in zip(self.ids, self.grads, strict=True):
            target.index_add_(0, ids, grad.to(target.dtype))
        self.ids.clear()
        self.grads.clear()


class _Lookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, ids: Tensor, weight: Tensor, rows: _Rows) -> Tensor:
        ctx.rows = rows
        ctx.save_for_backward(ids)
        return nn.functional.embedding(ids, weight, rows.padding_idx)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None, None]:
        (ids,) = ctx.saved_tensors
        ctx.rows.add(ids, grad)
        return None, None, None


def _tied_forward(module: nn.Embedding, rows: _Rows) -> Callable[[Tensor], Tensor]:
    """``module.forward`` while switched: the rows aside when a gradient is wanted, else
    ``nn.Embedding``'s own lookup."""

    def forward(ids: Tensor) -> Tensor:
        if not (torch.is_grad_enabled() and module.weight.requires_grad):
            return nn.Embedding.forward(module, ids)
        return cast(Tensor, _Lookup.apply(ids, module.weight, rows))

    return forward


class TiedLookupRows:
    """Lookups of a model's tied ``nn.Embedding`` tables add their gradient rows in place
    into the table's gradient, until :meth:`restore`.

    Args:
        model: The model to train. Its ``nn.Embedding`` modules (exactly that class) whose
            weight is also a parameter of another module (tied), trainable, without
            ``max_norm``, ``scale_grad_by_freq`` or ``sparse``, are switched.
    """

    def __init__(self, model: nn.Module) -> None:
        uses = Counter(id(p) for _, p in model.named_parameters(remove_duplicate=False))
        self.tables: list[nn.Embedding] = []
        self._rows: list[_Rows] = []
        self._hooks: list[RemovableHandle] = []
        for module in model.modules():
            if (
                type(module) is nn.Embedding
                and not module.sparse
                and module.max_norm is None
                and not module.scale_grad_by_freq
                and module.weight.requires_grad
                and uses[id(module.weight)] > 1
            ):
                rows = _Rows(module.padding_idx)
                module.forward = _tied_forward(module, rows)  # type: ignore[method-assign,assignment]
                self._hooks.append(module.weight.register_post_accumulate_grad_hook(_adder(rows)))
                self.tables.append(module)
                self._rows.append(rows)

    def flush(self) -> None:
        """After backward: rows still aside (no other gradient reached the table this
        step) are added into its gradient, created dense if there is none."""
        for module, rows in zip(self.tables, self._rows, strict=True):
            if rows.ids:
                weight = module.weight
                if weight.grad is None:
                    weight.grad = torch.zeros_like(weight)
                rows.add_into(weight.grad)

    def restore(self) -> None:
        """``nn.Embedding``'s own lookups again, as the model came."""
        for handle in self._hooks:
            handle.remove()
        for module in self.tables:
            del module.forward  # the class's forward again
        self._hooks.clear()
        self.tables.clear()
        self._rows.clear()


def _adder(rows: _Rows) -> Callable[[Tensor], None]:
    def add(param: Tensor) -> None:
        if param.grad is not None and rows.ids:
            rows.add_into(param.grad)

    return add


__all__ = ["TiedLookupRows"]
