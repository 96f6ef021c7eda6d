"""Step paths that change how the trainer computes, not what: tied token tables add their
lookups' gradient rows in place (trainer.sparse_lookups); clipping runs torch's multi-tensor
norm and scaling on CPU too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.sparse_lookups import TiedLookupRows


class Tied(nn.Module):
    """A table tied to an output layer, with a padding row, and an untied second table."""

    def __init__(self, vocab: int = 50, dim: int = 8) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, dim, padding_idx=0)
        self.other = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)
        self.out.weight = self.table.weight

    def forward(self, ids: torch.Tensor, decode: bool = True) -> torch.Tensor:
        h = torch.tanh(self.table(ids) * 1.5 + self.other(ids))
        if not decode:  # a step whose tied output layer gives no gradient
            return h.square().sum()
        return F.cross_entropy(self.out(h).flatten(0, 1), ((ids * 7 + 3) % 50).flatten())


def grads(model: Tied, batches: list[torch.Tensor], decode: bool = True) -> dict[str, torch.Tensor]:
    for ids in batches:  # several backwards: gradient accumulation
        model(ids, decode).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def batches() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    # repeated tokens and padding (id 0) in every batch
    return [torch.randint(0, 12, (4, 9), generator=gen) for _ in range(2)]


@pytest.mark.parametrize("decode", [True, False])
def test_gradients_equal_nn_embedding_with_padding_repeats_and_accumulation(decode: bool) -> None:
    torch.manual_seed(0)
    dense, rows = Tied(), Tied()
    rows.load_state_dict(dense.state_dict())
    lookups = TiedLookupRows(rows)
    assert lookups.tables == [rows.table]  # the untied table keeps nn.Embedding's backward
    expected = grads(dense, batches(), decode)
    got = grads(rows, batches(), decode)
    if not decode:
        assert rows.table.weight.grad is None  # no other gradient reached it: rows wait
        lookups.flush()
        got["table.weight"] = rows.table.weight.grad.clone()
    assert expected.keys() == got.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-6, atol=1e-7)
    assert expected["table.weight"][0].abs().sum() == 0 or decode  # padding row: no lookup grad
    assert not rows.table.weight.grad.is_sparse
    lookups.restore()
    assert "forward" not in vars(rows.table) and not hasattr(rows.table, "_ptm_rows")


def test_the_tables_look_up_the_same_values_and_eval_is_untouched() -> None:
    model = Tied()
    ids = batches()[0]
    before = model.table(ids)
    TiedLookupRows(model)
    torch.testing.assert_close(model.table(ids), before, rtol=0, atol=0)
    with torch.no_grad():
        assert model.table(ids).grad_fn is None


Fit = Callable[[str, "bool | None"], tuple[list[float], dict[str, torch.Tensor]]]


@pytest.fixture
def fit(
    make_model: Callable[..., Any], make_source: Callable[..., Any], make_config: Callable[..., Any]
) -> Fit:
    """``fit(name, sparse_lookups)``: the toy model (tied output layer) trained 12 steps."""

    def run(name: str, sparse: bool | None) -> tuple[list[float], dict[str, torch.Tensor]]:
        model = make_model()
        config = make_config(name, max_steps=12, log_every=1, sparse_lookups=sparse)
        result = Trainer(model, make_source(), config).fit()
        assert "forward" not in vars(model.embed)  # the model leaves fit() as it came
        return [row["loss"] for row in result.history], model.state_dict()

    return run


def test_trainer_run_matches_dense_lookups_up_to_rounding(fit: Fit) -> None:
    losses, weights = fit("rows", None)
    dense_losses, dense_weights = fit("dense", False)
    assert losses == pytest.approx(dense_losses, rel=1e-5)
    for name in weights:
        torch.testing.assert_close(weights[name], dense_weights[name], rtol=1e-4, atol=1e-6)


def test_true_is_refused_where_it_does_not_apply(tmp_path) -> None:
    with pytest.raises(ValueError, match="sparse_lookups"):
        TrainerConfig(output_dir=str(tmp_path), sparse_lookups=True, compile=True)
    with pytest.raises(ValueError, match="sparse_lookups"):
        TrainerConfig(output_dir=str(tmp_path), sparse_lookups="yes")  # type: ignore[arg-type]


def test_clipping_runs_torchs_multi_tensor_path_on_cpu_with_the_same_result(
    fit: Fit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On CPU torch's default is the per-tensor loop (two small ops per parameter); the
    # trainer asks for the multi-tensor one, which computes the same norm and scaling.
    calls: list[object] = []
    clip = torch.nn.utils.clip_grad_norm_

    def recording(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(kwargs.get("foreach"))
        return clip(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording)
    losses, weights = fit("foreach", None)
    assert calls and set(calls) == {True}
    monkeypatch.setattr(
        torch.nn.utils, "clip_grad_norm_", lambda *a, **k: clip(*a, **{**k, "foreach": None})
    )
    loop_losses, loop_weights = fit("loop", None)
    assert losses == loop_losses
    for name in weights:
        assert torch.equal(weights[name], loop_weights[name]), name
