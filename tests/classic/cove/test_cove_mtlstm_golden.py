"""Golden test of the MT-LSTM against salesforce/cove (cove/encoder.py, ``MTLSTM``).

``ReferenceMTLSTM`` transcribes the reference's construction and forward with plain torch:
the same ``nn.LSTM`` modules, the same splitting of the released two-layer state dict into
``rnn0``/``rnn1`` for ``layer0=True``, the same sort / pack / unpack / unsort. Only the
weights differ: random here (seeded) instead of downloaded, passed in as the state dict
the reference would load. ptm's :class:`MTLSTM` loads the same state dict and must give the
same outputs.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence as pack
from torch.nn.utils.rnn import pad_packed_sequence as unpack

from ptm_classic.cove.mt_lstm import MTLSTM, cove_keys


class ReferenceMTLSTM(nn.Module):
    """salesforce/cove's ``MTLSTM(n_vocab=None, vectors=None, ...)``, weights given."""

    def __init__(
        self,
        state_dict: dict[str, Tensor],
        residual_embeddings: bool = False,
        layer0: bool = False,
        layer1: bool = True,
    ) -> None:
        super().__init__()
        self.layer0, self.layer1 = layer0, layer1
        self.residual_embeddings = residual_embeddings
        if layer0:
            layer0_dict = {k: v for k, v in state_dict.items() if "l0" in k}
            self.rnn0 = nn.LSTM(300, 300, num_layers=1, bidirectional=True, batch_first=True)
            self.rnn0.load_state_dict(layer0_dict)
            if layer1:
                layer1_dict = {k.replace("l1", "l0"): v for k, v in state_dict.items() if "l1" in k}
                self.rnn1 = nn.LSTM(600, 300, num_layers=1, bidirectional=True, batch_first=True)
                self.rnn1.load_state_dict(layer1_dict)
        elif layer1:
            self.rnn1 = nn.LSTM(300, 300, num_layers=2, bidirectional=True, batch_first=True)
            self.rnn1.load_state_dict(state_dict)

    def forward(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        lens, indices = torch.sort(lengths, 0, True)
        outputs = [inputs] if self.residual_embeddings else []
        len_list = lens.tolist()
        packed_inputs = pack(inputs[indices], len_list, batch_first=True)
        if self.layer0:
            outputs0, _ = self.rnn0(packed_inputs)
            unpacked_outputs0 = unpack(outputs0, batch_first=True)[0]
            _, _indices = torch.sort(indices, 0)
            outputs.append(unpacked_outputs0[_indices])
            packed_inputs = outputs0
        if self.layer1:
            outputs1, _ = self.rnn1(packed_inputs)
            unpacked_outputs1 = unpack(outputs1, batch_first=True)[0]
            _, _indices = torch.sort(indices, 0)
            outputs.append(unpacked_outputs1[_indices])
        return torch.cat(outputs, 2).detach()


def released_layout() -> dict[str, Tensor]:
    """A state dict shaped as the released wmt-lstm weights: nn.LSTM(300, 300, 2 layers, bi)."""
    torch.manual_seed(7)
    return {
        k: v.clone()
        for k, v in nn.LSTM(300, 300, num_layers=2, bidirectional=True).state_dict().items()
    }


def test_the_released_layout_is_the_two_layer_bilstm_state_dict() -> None:
    state = released_layout()
    assert list(state) == cove_keys()
    ptm = MTLSTM(300, 300)
    mine = ptm.cove_state_dict()
    assert list(mine) == cove_keys()
    assert {k: tuple(v.shape) for k, v in mine.items()} == {
        k: tuple(v.shape) for k, v in state.items()
    }
    assert mine["weight_ih_l0"].shape == (1200, 300)
    assert mine["weight_ih_l1_reverse"].shape == (1200, 600)


@pytest.mark.parametrize(
    "switches",
    [
        {"layer0": False, "layer1": True, "residual_embeddings": False},
        {"layer0": True, "layer1": True, "residual_embeddings": False},
        {"layer0": True, "layer1": False, "residual_embeddings": False},
        {"layer0": False, "layer1": True, "residual_embeddings": True},
        {"layer0": True, "layer1": True, "residual_embeddings": True},
    ],
)
def test_same_weights_same_outputs_as_salesforce_cove(switches: dict[str, bool]) -> None:
    state = released_layout()
    reference = ReferenceMTLSTM(state, **switches).eval()
    ptm = MTLSTM.from_cove_state_dict(state).eval()
    torch.manual_seed(0)
    lengths = torch.tensor([5, 9, 1, 7])  # the longest is the padded width: unpack's width
    inputs = torch.randn(4, 9, 300) * 0.4  # GloVe's rough scale (cove's README)
    mask = torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)
    inputs = inputs * mask.unsqueeze(-1)
    expected = reference(inputs, lengths)
    got = ptm.cove(inputs, mask, **switches)
    width = 300 * switches["residual_embeddings"] + 600 * (switches["layer0"] + switches["layer1"])
    assert got.shape == expected.shape == (4, 9, width)
    assert torch.allclose(got, expected, atol=1e-6, rtol=0), (got - expected).abs().max()


def test_round_trip_and_refusals() -> None:
    state = released_layout()
    ptm = MTLSTM.from_cove_state_dict(state)
    assert all(torch.equal(ptm.cove_state_dict()[k], v) for k, v in state.items())
    with pytest.raises(ValueError, match="missing"):
        ptm.load_cove_state_dict({k: v for k, v in state.items() if k != "bias_hh_l1"})
    with pytest.raises(ValueError, match="build it with the sizes"):
        MTLSTM(300, 64).load_cove_state_dict(state)
    with pytest.raises(ValueError, match="at least one"):
        ptm.cove(torch.zeros(1, 2, 300), torch.ones(1, 2, dtype=torch.bool), layer1=False)
