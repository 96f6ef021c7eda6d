"""The MT-LSTM: CoVe's encoder (McCann et al., 2017, Section 3), and the layout of the
MT-LSTM that salesforce/cove released.

The released weights are the state dict of one ``nn.LSTM(300, 300, num_layers=2,
bidirectional=True)``: keys ``{weight_ih, weight_hh, bias_ih, bias_hh}_l{0,1}`` and their
``_reverse`` twins. :class:`MTLSTM` keeps each layer as its own one-layer BiLSTM, so that the
first layer's outputs can be read too (CoVe's ``layer0`` switch) and dropout can sit between
the layers while the translation model trains; :meth:`MTLSTM.cove_state_dict` and
:meth:`MTLSTM.load_cove_state_dict` convert between the two layouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

#: The parameters of one direction of one nn.LSTM layer.
_PARAMETERS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
_DIRECTIONS = ("", "_reverse")


def cove_keys() -> list[str]:
    """The state-dict keys of salesforce/cove's released MT-LSTM, in ``nn.LSTM`` order."""
    return [
        f"{name}_l{layer}{direction}"
        for layer in (0, 1)
        for direction in _DIRECTIONS
        for name in _PARAMETERS
    ]


@dataclass
class MTLSTMOutput:
    """What :class:`MTLSTM` returns.

    Attributes:
        layer0: ``(B, L, 2H)`` first-layer outputs (forward; backward), 0 past each length.
        layer1: ``(B, L, 2H)`` second-layer outputs: CoVe proper.
        final_h: ``(2, B, 2H)`` each layer's last hidden state, both directions
            concatenated (the decoder starts from it).
        final_c: ``(2, B, 2H)`` the same for the cell states.
    """

    layer0: Tensor
    layer1: Tensor
    final_h: Tensor
    final_c: Tensor


class MTLSTM(nn.Module):
    """The MT-LSTM (McCann et al., 2017): a two-layer bidirectional LSTM over GloVe vectors.

    ``CoVe(w) = MT-LSTM(GloVe(w))``; the paper's is ``MTLSTM(300, 300)`` over 300-d
    Common Crawl GloVe. Padding never leaks into a sequence: rows are packed by length.

    Args:
        input_size: width of the GloVe vectors ``D``.
        hidden_size: LSTM units per direction ``H``.
        dropout: dropout between the two layers (while translating; the features are read
            in eval mode).

    Shapes:
        ``forward(inputs (B, L, D), mask (B, L) bool) -> MTLSTMOutput``;
        ``cove(inputs, mask) -> (B, L, width)``.
    """

    def __init__(self, input_size: int = 300, hidden_size: int = 300, dropout: float = 0.0):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.layer0 = nn.LSTM(input_size, hidden_size, batch_first=True, bidirectional=True)
        self.layer1 = nn.LSTM(2 * hidden_size, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)

    @property
    def output_size(self) -> int:
        """Width of one layer's outputs, ``2H``."""
        return 2 * self.hidden_size

    @staticmethod
    def _run(lstm: nn.LSTM, inputs: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = lstm(packed)
        outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=inputs.shape[1])
        # (2, B, H) forward and backward -> (B, 2H), as the outputs are laid out.
        return outputs, torch.cat([h[0], h[1]], -1), torch.cat([c[0], c[1]], -1)

    def forward(self, inputs: Tensor, mask: Tensor) -> MTLSTMOutput:
        lengths = mask.sum(1).clamp(min=1).cpu()
        out0, h0, c0 = self._run(self.layer0, inputs, lengths)
        out1, h1, c1 = self._run(self.layer1, self.dropout(out0), lengths)
        return MTLSTMOutput(out0, out1, torch.stack([h0, h1]), torch.stack([c0, c1]))

    def cove(
        self,
        inputs: Tensor,
        mask: Tensor,
        *,
        layer0: bool = False,
        layer1: bool = True,
        residual_embeddings: bool = False,
    ) -> Tensor:
        """The contextual vectors as salesforce/cove's ``MTLSTM`` returns them: the
        concatenation of ``[inputs]`` (``residual_embeddings``), the first layer's and the
        second layer's outputs, in that order; 0 past each row's length.

        Raises:
            ValueError: neither layer chosen.
        """
        if not (layer0 or layer1):
            raise ValueError("MTLSTM.cove: at least one of layer0 and layer1 must be True")
        out = self(inputs, mask)
        parts = [inputs] if residual_embeddings else []
        parts += [out.layer0] if layer0 else []
        parts += [out.layer1] if layer1 else []
        return torch.cat(parts, -1)

    def cove_state_dict(self) -> dict[str, Tensor]:
        """The weights in the released MT-LSTM's layout (one two-layer ``nn.LSTM``)."""
        state: dict[str, Tensor] = {}
        for layer, lstm in enumerate((self.layer0, self.layer1)):
            for direction in _DIRECTIONS:
                for name in _PARAMETERS:
                    value = getattr(lstm, f"{name}_l0{direction}")
                    state[f"{name}_l{layer}{direction}"] = value.detach().clone()
        return state

    def load_cove_state_dict(self, state: Mapping[str, Tensor]) -> None:
        """Load weights in the released MT-LSTM's layout (``cove_keys()``).

        Raises:
            ValueError: keys missing or extra, or a shape that does not fit this MT-LSTM;
                the message names them.
        """
        expected = cove_keys()
        missing = sorted(set(expected) - set(state))
        extra = sorted(set(state) - set(expected))
        if missing or extra:
            raise ValueError(
                f"not an MT-LSTM state dict: missing {missing[:4]}, unexpected {extra[:4]}; "
                "give the state dict of nn.LSTM(D, H, num_layers=2, bidirectional=True)"
            )
        with torch.no_grad():
            for layer, lstm in enumerate((self.layer0, self.layer1)):
                for direction in _DIRECTIONS:
                    for name in _PARAMETERS:
                        target = getattr(lstm, f"{name}_l0{direction}")
                        value = state[f"{name}_l{layer}{direction}"]
                        if value.shape != target.shape:
                            raise ValueError(
                                f"{name}_l{layer}{direction}: shape {tuple(value.shape)}, this "
                                f"MTLSTM({self.input_size}, {self.hidden_size}) has "
                                f"{tuple(target.shape)}; build it with the sizes of the weights"
                            )
                        target.copy_(value)

    @classmethod
    def from_cove_state_dict(cls, state: Mapping[str, Tensor]) -> MTLSTM:
        """An MT-LSTM sized and loaded from a state dict in the released layout."""
        if "weight_ih_l0" not in state:
            raise ValueError("not an MT-LSTM state dict: no weight_ih_l0 (see cove_keys())")
        four_h, input_size = state["weight_ih_l0"].shape
        model = cls(int(input_size), int(four_h) // 4)
        model.load_cove_state_dict(state)
        return model


__all__ = ["MTLSTM", "MTLSTMOutput", "cove_keys"]
