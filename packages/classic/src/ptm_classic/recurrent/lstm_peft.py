"""Parameter-efficient fine-tuning of ULMFiT's AWD-LSTM (``finetune.peft``).

Hugging Face ``peft`` wraps ``nn.Linear``/``nn.Embedding`` modules by replacing their
``forward``; an LSTM's weights are read inside torch's recurrent kernel (cuDNN on CUDA),
and AWD-LSTM reads its token table through ``F.embedding`` (embedding dropout), so no
module ``forward`` is there to wrap. The LSTM analogues, written here:

- :class:`LSTMLoRA` (Hu et al., 2022): ``W' = W + alpha / r * B A`` on each layer's
  ``weight_ih`` / ``weight_hh`` (and, on request, the token table), a
  :mod:`torch.nn.utils.parametrize` parametrization. AWD-LSTM's DropConnect
  (:class:`~ptm_classic.recurrent.regularization.WeightDropLSTM`) reads ``weight_hh_l0``
  through the parametrization and drops ``W_hh + delta``: the delta is added to the raw
  weight before the mask, as if the merged weight had been trained. ``B`` starts at zero,
  so the first step is the base model's.
- :class:`LSTMIA3` (Liu et al., 2022): ``W_ih' = diag(l_gate) W_ih diag(l_in)``. ``l_gate``
  (``4H``, ones) rescales every gate unit's input projection (IA3's keys and values: how
  the layer reads its input); ``l_in`` (ones) rescales the hidden state that the layer
  below feeds in (IA3's feed-forward scale on the activations entering a projection), on
  every layer but the first, whose input is the token vectors. Biases and ``W_hh`` are
  not scaled.
- :class:`SoftPromptLSTMEncoder` (Lester et al., 2021): ``P`` trained vectors, drawn from
  the token table's rows, before the embedded sequence; the outputs at the prompt steps
  are cut off, so the classifier's concat pooling reads the real tokens only.
- :class:`InitialStateLSTMEncoder`: prefix tuning's recurrent analogue. Li & Liang (2021)
  train keys and values that every token attends: the attention's memory. An LSTM's
  memory is its state, so the trained prefix is each layer's initial ``(h0, c0)`` (zeros
  at the start: the base model's own start). ``finetune.peft_virtual_tokens`` is not read.

Only these tensors and the classifier head train (:func:`attach_lstm_peft`). Tensor names
end in ``lora_*``, ``ia3_*``, ``prompt`` or ``prefix_state_*``, which
:func:`~ptm_core.peft.attach.is_adapter_tensor` picks for the adapter-only ``final/``.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMOutput
from ptm_classic.recurrent.regularization import LSTMState, WeightDropLSTM
from ptm_core.peft import PeftConfig

LORA_TARGETS: tuple[str, ...] = ("weight_ih", "weight_hh", "embeddings")
DEFAULT_LORA_TARGETS: tuple[str, ...] = ("weight_ih", "weight_hh")


class LSTMLoRA(nn.Module):
    """A LoRA update of a weight matrix, as a parametrization (Hu et al., 2022).

    ``W' = W + (alpha / r) * B A`` with ``A (r, in)`` (Kaiming-uniform, as ``peft``) and
    ``B (out, r)`` (zeros). ``dropout`` is the recurrent form of LoRA's dropout on the
    adapter's input: in training, one mask over the ``in`` input features per evaluation
    of the weight (one per forward call under :func:`~torch.nn.utils.parametrize.cached`),
    applied to ``A``'s columns; the frozen path sees the whole input.

    Args:
        out_features: rows of ``W`` (``4H`` for an LSTM's gates; the vocabulary for a table).
        in_features: columns of ``W``.
        r: rank.
        alpha: scale numerator.
        dropout: probability of dropping an input feature on the adapter's path.

    Shapes:
        ``weight (out, in) -> (out, in)``.
    """

    def __init__(
        self, out_features: int, in_features: int, r: int, alpha: float, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.lora_A = nn.Parameter(torch.empty(r, in_features))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(out_features, r))
        self.scaling = alpha / r
        self.dropout = dropout

    def forward(self, weight: Tensor) -> Tensor:
        a: Tensor = self.lora_A
        if self.training and self.dropout > 0:
            keep = a.new_empty(1, a.size(1)).bernoulli_(1 - self.dropout) / (1 - self.dropout)
            a = a * keep
        return weight + (self.scaling * (self.lora_B @ a)).to(weight.dtype)


class LSTMIA3(nn.Module):
    """IA3 scales of an LSTM layer's input projection (Liu et al., 2022), a parametrization.

    ``W_ih' = diag(l_gate) W_ih diag(l_in)``; both vectors start at one (the base layer).

    Args:
        out_features: ``4H`` (the gate units).
        in_features: the layer's input size.
        scale_input: learn ``l_in`` (the hidden state fed from the layer below).

    Shapes:
        ``weight (4H, in) -> (4H, in)``.
    """

    def __init__(self, out_features: int, in_features: int, *, scale_input: bool) -> None:
        super().__init__()
        self.ia3_gate = nn.Parameter(torch.ones(out_features))
        self.ia3_input = nn.Parameter(torch.ones(in_features)) if scale_input else None

    def forward(self, weight: Tensor) -> Tensor:
        scaled = weight * self.ia3_gate.to(weight.dtype).unsqueeze(1)
        if self.ia3_input is not None:
            scaled = scaled * self.ia3_input.to(weight.dtype).unsqueeze(0)
        return scaled


def _cut(outputs: list[Tensor], count: int) -> list[Tensor]:
    return [output[:, count:] for output in outputs]


class SoftPromptLSTMEncoder(nn.Module):
    """An AWD-LSTM with ``P`` trained vectors before every sequence (Lester et al., 2021).

    The vectors start as ``P`` rows of the token table drawn at random (the paper's
    vocabulary initialisation) and go through the encoder's input dropout with the tokens;
    the LSTM reads them first, so every real step sees them through the state. The output
    is the wrapped encoder's :class:`~ptm_classic.recurrent.awd_lstm.AWDLSTMOutput` over
    the real steps only (the final state is the real sequence's end).

    Args:
        encoder: the frozen encoder.
        num_virtual_tokens: ``P``.

    Shapes:
        ``input_ids (B, T)`` -> outputs ``(B, T, H_l)``.
    """

    def __init__(self, encoder: AWDLSTMEncoder, num_virtual_tokens: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.num_virtual_tokens = num_virtual_tokens
        table = encoder.embeddings.weight.detach()
        drawn = torch.randint(0, table.shape[0], (num_virtual_tokens,))
        self.prompt = nn.Parameter(table[drawn].clone())  # (P, E)

    @property
    def config(self) -> AWDLSTMConfig:
        return self.encoder.config

    @property
    def layers(self) -> nn.ModuleList:
        return self.encoder.layers

    def forward(self, input_ids: Tensor, state: list[LSTMState] | None = None) -> AWDLSTMOutput:
        embedded = self.encoder.embed(input_ids)  # (B, T, E)
        prompt = self.prompt.to(embedded.dtype).unsqueeze(0).expand(embedded.size(0), -1, -1)
        out = self.encoder.encode_embeddings(torch.cat([prompt, embedded], dim=1), state)
        count = self.num_virtual_tokens
        return AWDLSTMOutput(
            out.last_hidden_state[:, count:],
            _cut(out.raw_outputs, count),
            _cut(out.dropped_outputs, count),
            out.state,
        )


class InitialStateLSTMEncoder(nn.Module):
    """An AWD-LSTM that starts every sequence from trained states: the recurrent prefix.

    Li & Liang (2021) prepend trained keys and values to every attention layer: memory
    that each token reads. An LSTM layer's memory is its ``(h, c)``; here each layer's
    initial ``h0``, ``c0`` is trained (zeros at first, the base model's start).

    Args:
        encoder: the frozen encoder.

    Shapes:
        ``input_ids (B, T)`` -> the encoder's outputs; ``prefix_state_h.<l>`` and
        ``prefix_state_c.<l>`` are ``(1, 1, H_l)``, broadcast over the batch.
    """

    def __init__(self, encoder: AWDLSTMEncoder) -> None:
        super().__init__()
        self.encoder = encoder
        sizes = [n_out for _, n_out in encoder.config.layer_sizes()]
        self.prefix_state_h = nn.ParameterList(nn.Parameter(torch.zeros(1, 1, s)) for s in sizes)
        self.prefix_state_c = nn.ParameterList(nn.Parameter(torch.zeros(1, 1, s)) for s in sizes)

    @property
    def config(self) -> AWDLSTMConfig:
        return self.encoder.config

    @property
    def layers(self) -> nn.ModuleList:
        return self.encoder.layers

    def initial_state(self, batch_size: int, dtype: torch.dtype) -> list[LSTMState]:
        """The trained ``(h0, c0)`` of every layer, each ``(1, B, H_l)``."""
        return [
            (
                h.to(dtype).expand(1, batch_size, -1).contiguous(),
                c.to(dtype).expand(1, batch_size, -1).contiguous(),
            )
            for h, c in zip(self.prefix_state_h, self.prefix_state_c, strict=True)
        ]

    def forward(self, input_ids: Tensor, state: list[LSTMState] | None = None) -> AWDLSTMOutput:
        if state is None:
            state = self.initial_state(input_ids.size(0), self.encoder.embeddings.weight.dtype)
        return self.encoder(input_ids, state)


def lora_targets(config: PeftConfig) -> tuple[str, ...]:
    """The AWD-LSTM weights LoRA adapts (``finetune.peft_target_modules``), checked."""
    targets = config.target_modules or DEFAULT_LORA_TARGETS
    unknown = sorted(set(targets) - set(LORA_TARGETS))
    if unknown:
        raise ValueError(
            f"finetune.peft_target_modules: {unknown} are not AWD-LSTM weights; LoRA on an "
            f"AWD-LSTM adapts {', '.join(LORA_TARGETS)} (default: "
            f"{', '.join(DEFAULT_LORA_TARGETS)})"
        )
    return tuple(targets)


def _lstms(encoder: AWDLSTMEncoder) -> list[nn.LSTM]:
    """Each layer's ``nn.LSTM`` (inside its :class:`WeightDropLSTM`)."""
    return [layer.lstm for layer in encoder.layers if isinstance(layer, WeightDropLSTM)]


def attach_lstm_peft(model: Any, config: PeftConfig) -> Any:
    """Freeze ``model.encoder`` (an :class:`AWDLSTMEncoder`) and put ``config``'s method on
    it; the head keeps training.

    Args:
        model: a :class:`~ptm_classic.recurrent.ulmfit.ULMFiTClassifier`.
        config: the method (``none`` returns ``model`` untouched).

    Returns:
        ``model``, changed in place: LoRA/IA3 parametrize the layers' weights; ``prompt``
        and ``prefix`` wrap the encoder (``model.encoder.encoder`` is the frozen one).

    Raises:
        ValueError: target names that are not AWD-LSTM weights, or IA3 targets.
    """
    if not config.enabled:
        return model
    encoder: AWDLSTMEncoder = model.encoder
    for param in encoder.parameters():
        param.requires_grad_(False)
    if config.method == "lora":
        targets = lora_targets(config)
        for lstm in _lstms(encoder):
            for name in ("weight_ih", "weight_hh"):
                if name in targets:
                    rows, cols = getattr(lstm, f"{name}_l0").shape
                    lora = LSTMLoRA(rows, cols, config.r, config.alpha, config.dropout)
                    parametrize.register_parametrization(lstm, f"{name}_l0", lora)
        if "embeddings" in targets:
            rows, cols = encoder.embeddings.weight.shape
            lora = LSTMLoRA(rows, cols, config.r, config.alpha, config.dropout)
            parametrize.register_parametrization(encoder.embeddings, "weight", lora)
    elif config.method == "ia3":
        if config.target_modules is not None:
            raise ValueError(
                "finetune.peft_target_modules is not read by IA3 on an AWD-LSTM (it scales "
                "every layer's gate inputs and the hidden state between layers); set it to null"
            )
        for i, lstm in enumerate(_lstms(encoder)):
            rows, cols = cast(Tensor, lstm.weight_ih_l0).shape
            ia3 = LSTMIA3(rows, cols, scale_input=i > 0)
            parametrize.register_parametrization(lstm, "weight_ih_l0", ia3)
    elif config.method == "prompt":
        model.encoder = SoftPromptLSTMEncoder(encoder, config.num_virtual_tokens)
    else:
        model.encoder = InitialStateLSTMEncoder(encoder)
    return model


def frozen_encoder(model: Any) -> AWDLSTMEncoder:
    """The AWD-LSTM under a prompt or prefix wrapper (or the encoder itself)."""
    encoder = model.encoder
    inner: AWDLSTMEncoder = getattr(encoder, "encoder", encoder)
    return inner


__all__ = [
    "DEFAULT_LORA_TARGETS",
    "LORA_TARGETS",
    "LSTMIA3",
    "InitialStateLSTMEncoder",
    "LSTMLoRA",
    "SoftPromptLSTMEncoder",
    "attach_lstm_peft",
    "frozen_encoder",
    "lora_targets",
]
