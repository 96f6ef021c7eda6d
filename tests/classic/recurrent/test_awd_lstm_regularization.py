"""AWD-LSTM's regularisers: DropConnect, locked dropout, embedding dropout, AR and TAR."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ptm_classic.recurrent.regularization import (
    LockedDropout,
    WeightDropLSTM,
    activation_regularization,
    embedding_dropout,
    temporal_activation_regularization,
)


def _manual_lstm(layer: nn.LSTM, weight_hh: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The LSTM recurrence written out, with one given W_hh at every time step."""
    batch, steps, _ = x.shape
    h = x.new_zeros(batch, layer.hidden_size)
    c = x.new_zeros(batch, layer.hidden_size)
    outputs = []
    for t in range(steps):
        gates = (
            x[:, t] @ layer.weight_ih_l0.T + layer.bias_ih_l0 + h @ weight_hh.T + layer.bias_hh_l0
        )
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def test_dropconnect_mask_is_fixed_within_a_sequence_and_changes_between_calls() -> None:
    layer = WeightDropLSTM(5, 6, weight_p=0.5).train()
    x = torch.randn(3, 12, 5)
    out, _ = layer(x)
    first = layer.last_weight_hh
    assert first is not None
    zeros = first == 0
    # About half of W_hh is dropped, the rest scaled by 1 / (1 - p).
    assert 0.3 < zeros.float().mean() < 0.7
    kept = ~zeros
    torch.testing.assert_close(first[kept], 2 * layer.lstm.weight_hh_l0.detach()[kept])
    # The recurrence with this ONE sampled matrix at every step reproduces the output: a
    # mask that changed between time steps would not.
    torch.testing.assert_close(out, _manual_lstm(layer.lstm, first, x), atol=1e-5, rtol=1e-5)
    # ... and with the undropped matrix it does not.
    assert not torch.allclose(out, _manual_lstm(layer.lstm, layer.lstm.weight_hh_l0, x), atol=1e-3)
    layer(x)
    second = layer.last_weight_hh
    assert second is not None
    assert ((second == 0) != zeros).any()  # the next batch draws a new mask


def test_dropconnect_keeps_the_raw_weight_and_is_off_at_eval() -> None:
    layer = WeightDropLSTM(4, 4, weight_p=0.5)
    raw = layer.lstm.weight_hh_l0.detach().clone()
    x = torch.randn(2, 7, 4)
    out, _ = layer.train()(x)
    out.sum().backward()
    assert layer.lstm.weight_hh_l0.grad is not None  # the raw matrix is what trains
    torch.testing.assert_close(layer.lstm.weight_hh_l0.detach(), raw)
    layer.eval()
    plain, _ = layer(x)
    torch.testing.assert_close(plain, layer.lstm(x)[0])
    torch.testing.assert_close(layer(x)[0], plain)  # deterministic at eval
    assert list(dict(layer.named_parameters())) == [
        "lstm.weight_ih_l0",
        "lstm.weight_hh_l0",
        "lstm.bias_ih_l0",
        "lstm.bias_hh_l0",
    ]


def test_locked_dropout_uses_one_mask_for_every_time_step() -> None:
    drop = LockedDropout(0.5).train()
    x = torch.ones(4, 9, 32)
    y = drop(x)
    zeros = y == 0
    # Same zero pattern at every time step, per sequence.
    assert torch.equal(zeros, zeros[:, :1].expand_as(zeros))
    assert 0.3 < zeros[:, 0].float().mean() < 0.7
    torch.testing.assert_close(y[~zeros], torch.full_like(y[~zeros], 2.0))
    # Different sequences get different masks.
    assert not torch.equal(zeros[0, 0], zeros[1, 0])
    drop.eval()
    assert torch.equal(drop(x), x)


def test_embedding_dropout_zeroes_whole_word_rows() -> None:
    table = nn.Embedding(50, 8)
    ids = torch.arange(50).repeat(3, 1)  # every word three times
    out = embedding_dropout(table, ids, 0.5, training=True)
    dropped = (out == 0).all(-1)  # (3, 50)
    # A word is dropped everywhere it occurs, or nowhere.
    assert torch.equal(dropped, dropped[:1].expand_as(dropped))
    assert 10 < int(dropped[0].sum()) < 40
    kept = ~dropped[0]
    torch.testing.assert_close(out[0][kept], 2 * table.weight.detach()[kept])
    eval_out = embedding_dropout(table, ids, 0.5, training=False)
    torch.testing.assert_close(eval_out, table(ids))


def test_ar_and_tar_equal_hand_computations() -> None:
    h = torch.tensor([[[1.0, -2.0], [3.0, 0.0], [0.5, 0.5]]])  # (1, 3, 2)
    # AR: alpha * mean(h^2) = 2 * (1 + 4 + 9 + 0 + 0.25 + 0.25) / 6
    assert float(activation_regularization(h, 2.0)) == pytest.approx(2 * 14.5 / 6)
    # TAR: beta * mean((h_t - h_{t-1})^2): diffs (2, 2), (-2.5, 0.5) -> (4 + 4 + 6.25 + 0.25) / 4
    assert float(temporal_activation_regularization(h, 1.0)) == pytest.approx(14.5 / 4)
    assert float(temporal_activation_regularization(h[:, :1], 1.0)) == 0.0
