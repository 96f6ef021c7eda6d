"""AWD-LSTM's regularisers (Merity et al., 2018, "Regularizing and Optimizing LSTM Language
Models", section 4), as small modules and functions.

- :class:`WeightDropLSTM`: DropConnect on the hidden-to-hidden matrix ``W_hh`` of an LSTM
  layer (Wan et al., 2013). One mask per forward call, so the same dropped weights serve
  every time step of the sequence (and every row of the batch); a new mask next call.
- :func:`embedding_dropout`: drops whole rows of the embedding matrix (whole word types,
  Gal & Ghahramani, 2016), rescaling the kept rows by ``1 / (1 - p)``.
- :class:`LockedDropout`: variational dropout: one mask per sequence, the same at every
  time step.
- :func:`activation_regularization` (AR) and :func:`temporal_activation_regularization`
  (TAR): penalties on the last layer's outputs.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# cuDNN compacts the weights of an LSTM whose W_hh was replaced by a dropped copy at every
# call and says so each time; the copy is the point of DropConnect, so the note is noise.
_NOT_CONTIGUOUS = ".*not part of single contiguous chunk of memory.*"

LSTMState = tuple[Tensor, Tensor]
# nn.LSTM's parameters of one unidirectional layer with biases, in its kernel's order.
_WEIGHTS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


class WeightDropLSTM(nn.Module):
    """One LSTM layer with DropConnect on its hidden-to-hidden weights (AWD-LSTM's WeightDrop).

    Paper: Merity et al., 2018, section 4.1 (weight-dropped LSTM), after Wan et al., 2013.
    In training, ``W_hh' = dropout(W_hh, p)`` (entries zeroed with probability ``p``, the
    rest scaled by ``1 / (1 - p)``) is sampled **once per forward call** and used at every
    time step, then the call runs torch's own LSTM kernel (``torch.lstm``, cuDNN on CUDA) with
    ``W_hh'`` in place of ``W_hh``; the raw ``W_hh`` stays the
    trained parameter. In eval mode the layer is a plain LSTM.

    The parameter names are ``nn.LSTM``'s under ``lstm.`` (``lstm.weight_ih_l0``,
    ``lstm.weight_hh_l0``, ``lstm.bias_ih_l0``, ``lstm.bias_hh_l0``).

    Args:
        input_size: features per time step in.
        hidden_size: features per time step out.
        weight_p: DropConnect probability on ``W_hh`` (AWD-LSTM's ``wdrop``: 0.5).

    Shapes:
        ``x``: ``(B, T, input_size)``; state ``(h, c)``: each ``(1, B, hidden_size)``;
        output ``(B, T, hidden_size)``.

    Attributes:
        last_weight_hh: the dropped ``W_hh'`` of the last training call (detached), for
            inspection; ``None`` before one.
    """

    def __init__(self, input_size: int, hidden_size: int, weight_p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= weight_p < 1.0:
            raise ValueError(f"weight_p (wdrop) must be in [0, 1), got {weight_p}")
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)
        self.weight_p = weight_p
        self.last_weight_hh: Tensor | None = None

    @property
    def hidden_size(self) -> int:
        return int(self.lstm.hidden_size)

    def sample_weight_hh(self) -> Tensor:
        """A DropConnect sample of ``W_hh`` ``(4 * hidden, hidden)`` (draws from torch's RNG)."""
        weight: Tensor = self.lstm.weight_hh_l0  # type: ignore[assignment]
        return F.dropout(weight, self.weight_p, training=True)

    def forward(self, x: Tensor, state: LSTMState | None = None) -> tuple[Tensor, LSTMState]:
        """Run the layer over a sequence.

        Args:
            x: ``(B, T, input_size)``.
            state: ``(h, c)``, each ``(1, B, hidden_size)``; ``None`` = zeros.

        Returns:
            ``(output (B, T, hidden_size), (h, c))``.
        """
        if not (self.training and self.weight_p > 0):
            output, new_state = self.lstm(x, state)
            return output, new_state
        weight = self.sample_weight_hh()  # one mask for the whole call
        self.last_weight_hh = weight.detach()
        if state is None:
            zeros = x.new_zeros(1, x.size(0), self.hidden_size)
            state = (zeros, zeros)
        # The weights are read by name, so a parametrized one (a LoRA or IA3 adapter,
        # ptm_classic.recurrent.lstm_peft) enters with its adapter; W_hh's adapter is
        # inside the DropConnect mask. torch.lstm is nn.LSTM's own kernel call.
        weights = [
            weight if name == "weight_hh_l0" else getattr(self.lstm, name) for name in _WEIGHTS
        ]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_NOT_CONTIGUOUS)
            output, h, c = torch.lstm(x, state, weights, True, 1, 0.0, True, False, True)
        return output, (h, c)


class LockedDropout(nn.Module):
    """Variational (locked) dropout: one mask per sequence, shared by all time steps.

    Paper: Gal & Ghahramani, 2016; Merity et al., 2018, section 4.2. A Bernoulli mask of
    shape ``(B, 1, D)`` is drawn per call, scaled by ``1 / (1 - p)`` and broadcast over
    time. Identity in eval mode or with ``p = 0``.

    Args:
        p: drop probability.

    Shapes:
        ``x``: ``(B, T, D)`` (batch first) -> same.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"locked dropout p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        mask = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1 - self.p) / (1 - self.p)
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}"


def embedding_dropout(
    embedding: nn.Embedding, input_ids: Tensor, p: float, *, training: bool = True
) -> Tensor:
    """Look up ``input_ids`` in ``embedding`` with whole rows (word types) dropped.

    Paper: Merity et al., 2018, section 4.3 (after Gal & Ghahramani, 2016). One mask
    ``(V, 1)`` per call: a dropped word is zero at every position it occurs in this batch;
    kept rows are scaled by ``1 / (1 - p)``.

    Args:
        embedding: the token table ``(V, D)``.
        input_ids: ``(B, T)`` ids.
        p: probability of dropping a row (AWD-LSTM's ``dropoute``: 0.1).
        training: no dropout when False.

    Returns:
        ``(B, T, D)`` embeddings.
    """
    weight = embedding.weight
    if training and p > 0:
        mask = weight.new_empty(weight.size(0), 1).bernoulli_(1 - p) / (1 - p)
        weight = weight * mask
    return F.embedding(input_ids, weight, padding_idx=embedding.padding_idx)


def activation_regularization(dropped_output: Tensor, alpha: float) -> Tensor:
    """AR: ``alpha * mean(h^2)`` over the **dropped** outputs of the last layer.

    Paper: Merity et al., 2018, section 4.6 (Merity et al., 2017b); AWD-LSTM uses
    ``alpha = 2``.

    Args:
        dropped_output: ``(B, T, D)``, after the output's locked dropout.
        alpha: the weight.

    Returns:
        A 0-d tensor.
    """
    return alpha * dropped_output.pow(2).mean()


def temporal_activation_regularization(raw_output: Tensor, beta: float) -> Tensor:
    """TAR: ``beta * mean((h_t - h_{t-1})^2)`` over the **undropped** last-layer outputs.

    Paper: Merity et al., 2018, section 4.6; AWD-LSTM uses ``beta = 1``. Zero for a
    single time step.

    Args:
        raw_output: ``(B, T, D)``, before dropout.
        beta: the weight.

    Returns:
        A 0-d tensor.
    """
    if raw_output.size(1) < 2:
        return raw_output.new_zeros(())
    return beta * (raw_output[:, 1:] - raw_output[:, :-1]).pow(2).mean()
