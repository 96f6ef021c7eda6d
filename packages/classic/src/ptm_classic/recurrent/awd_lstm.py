"""ULMFiT's language model: the AWD-LSTM (Merity et al., 2018; Howard & Ruder, 2018).

- :class:`AWDLSTMConfig`: sizes and every dropout of the paper (``dropoute``, ``dropouti``,
  ``dropouth``, ``dropout``, ``wdrop``); :func:`awd_lstm_paper` is the published
  configuration (3 layers, 1150 hidden, 400 embedding, tied weights).
- :class:`AWDLSTMEncoder`: embedding (with embedding dropout) -> locked dropout -> weight-
  dropped LSTM layers with locked dropout between them. ULMFiT's classifier reads it.
- :class:`AWDLSTMLanguageModel`: the encoder plus a decoder tied to the token table (the
  last layer outputs the embedding size so the two can share one matrix).
- :class:`BPTTLanguageModel`: what the runner pre-trains: next-token cross-entropy
  + AR + TAR over contiguous BPTT windows, the hidden state carried (detached) from one
  batch to the next. The state is a persistent buffer, so checkpoints hold it and a
  resumed run continues exactly.
- ``save_pretrained`` / :meth:`AWDLSTMLanguageModel.from_pretrained`: a ``final/`` with
  ``config.json`` + ``model.safetensors``, written atomically.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_classic.kinds import AWD_LSTM
from ptm_classic.recurrent.regularization import (
    LockedDropout,
    LSTMState,
    WeightDropLSTM,
    activation_regularization,
    embedding_dropout,
    temporal_activation_regularization,
)
from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, read_json_object
from ptm_core.model_kinds import KIND_KEY, with_kind

MODEL_TYPE = "awd_lstm"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


@dataclass
class AWDLSTMConfig:
    """Sizes and regularisation of an AWD-LSTM.

    Defaults are the paper's PTB settings (Merity et al., 2018, section 5 and the released
    ``main.py``: ``emsize 400, nhid 1150, nlayers 3, dropout 0.4, dropouth 0.25,
    dropouti 0.4, dropoute 0.1, wdrop 0.5, alpha 2, beta 1``).

    Attributes:
        vocab_size: token ids.
        embedding_size: token vector size (the last layer's output size when tied).
        hidden_size: every LSTM layer's size except the last when ``tie_weights``.
        num_layers: LSTM layers.
        tie_weights: the decoder shares the token table (Inan et al., 2017; Press & Wolf, 2017).
        dropoute: embedding dropout (whole word rows).
        dropouti: locked dropout on the embedding output.
        dropouth: locked dropout between LSTM layers.
        dropout: locked dropout on the last layer's output.
        wdrop: DropConnect on every layer's ``W_hh``.
        alpha: AR weight.
        beta: TAR weight.
        init_range: the token table's uniform init range (``0.1``).
    """

    vocab_size: int
    embedding_size: int = 400
    hidden_size: int = 1150
    num_layers: int = 3
    tie_weights: bool = True
    dropoute: float = 0.1
    dropouti: float = 0.4
    dropouth: float = 0.25
    dropout: float = 0.4
    wdrop: float = 0.5
    alpha: float = 2.0
    beta: float = 1.0
    init_range: float = 0.1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"AWDLSTMConfig.{name} must be a positive integer, got {value!r}")
        for name in ("dropoute", "dropouti", "dropouth", "dropout", "wdrop"):
            value = getattr(self, name)
            if not 0.0 <= float(value) < 1.0:
                raise ValueError(f"AWDLSTMConfig.{name} must be in [0, 1), got {value!r}")
        for name in ("alpha", "beta"):
            if float(getattr(self, name)) < 0:
                raise ValueError(f"AWDLSTMConfig.{name} must be >= 0, got {getattr(self, name)}")

    def layer_sizes(self) -> list[tuple[int, int]]:
        """``(input, output)`` size of each LSTM layer."""
        sizes = []
        for i in range(self.num_layers):
            n_in = self.embedding_size if i == 0 else self.hidden_size
            last = i == self.num_layers - 1
            n_out = self.embedding_size if last and self.tie_weights else self.hidden_size
            sizes.append((n_in, n_out))
        return sizes

    def to_dict(self) -> dict[str, Any]:
        return {"model_type": MODEL_TYPE, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> AWDLSTMConfig:
        """Read a config written by :meth:`to_dict`; unknown keys are an error naming them."""
        fields = {f.name for f in dataclasses.fields(cls)}
        # "ptm_model" (written since #17) is not a field; older configs lack it.
        values = {k: v for k, v in data.items() if k not in ("model_type", KIND_KEY)}
        unknown = sorted(set(values) - fields)
        if unknown or data.get("model_type", MODEL_TYPE) != MODEL_TYPE:
            raise CheckpointError(
                f"{source}: not an AWD-LSTM config (model_type={data.get('model_type')!r}, "
                f"unknown keys {unknown}); expected model_type={MODEL_TYPE!r} with fields "
                f"{', '.join(sorted(fields))}"
            )
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{source}: {exc}") from None


def awd_lstm_paper(vocab_size: int = 10000) -> AWDLSTMConfig:
    """The published AWD-LSTM: 3 layers, 1150 hidden, 400 embedding, tied (24M params on
    PTB's 10k vocabulary, 33M on WikiText-2's 33,278)."""
    return AWDLSTMConfig(vocab_size=vocab_size)


@dataclass
class AWDLSTMOutput:
    """What the encoder returns.

    Attributes:
        last_hidden_state: the last layer's output after its locked dropout ``(B, T, D)``.
        raw_outputs: each layer's output before dropout, ``(B, T, H_l)``.
        dropped_outputs: each layer's output after its locked dropout.
        state: the final ``(h, c)`` of each layer, each ``(1, B, H_l)``.
    """

    last_hidden_state: Tensor
    raw_outputs: list[Tensor]
    dropped_outputs: list[Tensor]
    state: list[LSTMState]


class AWDLSTMEncoder(nn.Module):
    """The AWD-LSTM stack: token table -> LSTM layers, with all of the paper's dropouts.

    Paper: Merity et al., 2018 (sections 4.1-4.3). Per call: embedding dropout
    (``dropoute``) on the table, locked dropout ``dropouti`` on the embeddings, then each
    :class:`WeightDropLSTM` (``wdrop``), locked dropout ``dropouth`` after every layer but
    the last, and ``dropout`` after the last.

    Args:
        config: the sizes and dropouts.

    Shapes:
        ``input_ids (B, T)`` -> :class:`AWDLSTMOutput`.
    """

    def __init__(self, config: AWDLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        nn.init.uniform_(self.embeddings.weight, -config.init_range, config.init_range)
        self.layers = nn.ModuleList(
            WeightDropLSTM(n_in, n_out, config.wdrop) for n_in, n_out in config.layer_sizes()
        )
        self.input_dropout = LockedDropout(config.dropouti)
        self.hidden_dropout = LockedDropout(config.dropouth)
        self.output_dropout = LockedDropout(config.dropout)

    def zero_state(self, batch_size: int, device: torch.device | None = None) -> list[LSTMState]:
        """Zero ``(h, c)`` for every layer, each ``(1, batch_size, H_l)``."""
        device = device or self.embeddings.weight.device
        dtype = self.embeddings.weight.dtype
        sizes = [n_out for _, n_out in self.config.layer_sizes()]
        return [
            (
                torch.zeros(1, batch_size, size, device=device, dtype=dtype),
                torch.zeros(1, batch_size, size, device=device, dtype=dtype),
            )
            for size in sizes
        ]

    def forward(self, input_ids: Tensor, state: Sequence[LSTMState] | None = None) -> AWDLSTMOutput:
        """Encode ``input_ids (B, T)`` from ``state`` (default zeros)."""
        return self.encode_embeddings(self.embed(input_ids), state)

    def embed(self, input_ids: Tensor) -> Tensor:
        """The token vectors with embedding dropout (``dropoute``): ``(B, T) -> (B, T, E)``."""
        return embedding_dropout(
            self.embeddings, input_ids, self.config.dropoute, training=self.training
        )

    def encode_embeddings(
        self, embedded: Tensor, state: Sequence[LSTMState] | None = None
    ) -> AWDLSTMOutput:
        """Run the LSTM layers over token vectors ``(B, T, E)`` (what :meth:`embed` gives,
        or with vectors put before them: a soft prompt), from ``state`` (default zeros)."""
        x = self.input_dropout(embedded)  # (B, T, E)
        raw_outputs: list[Tensor] = []
        dropped_outputs: list[Tensor] = []
        new_state: list[LSTMState] = []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x, layer_state = layer(x, None if state is None else state[i])
            raw_outputs.append(x)
            new_state.append(layer_state)
            x = (self.output_dropout if i == last else self.hidden_dropout)(x)
            dropped_outputs.append(x)
        return AWDLSTMOutput(x, raw_outputs, dropped_outputs, new_state)


@dataclass
class LanguageModelOutput:
    """Logits of the next token, with the encoder's outputs.

    Attributes:
        logits: ``(B, T, V)``.
        encoder: the :class:`AWDLSTMOutput`.
    """

    logits: Tensor
    encoder: AWDLSTMOutput


class AWDLSTMLanguageModel(nn.Module):
    """AWD-LSTM language model: :class:`AWDLSTMEncoder` + a (tied) linear decoder.

    Paper: Merity et al., 2018; the pre-training stage of ULMFiT (Howard & Ruder, 2018,
    section 3.1). With ``tie_weights`` the decoder's weight *is* the token table.

    Args:
        config: the sizes and dropouts.

    Shapes:
        ``input_ids (B, T)`` -> logits ``(B, T, V)``.
    """

    def __init__(self, config: AWDLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = AWDLSTMEncoder(config)
        out_size = config.layer_sizes()[-1][1]
        self.decoder = nn.Linear(out_size, config.vocab_size)
        nn.init.zeros_(self.decoder.bias)
        if config.tie_weights:
            self.decoder.weight = self.encoder.embeddings.weight

    def forward(
        self, input_ids: Tensor, state: Sequence[LSTMState] | None = None
    ) -> LanguageModelOutput:
        encoded = self.encoder(input_ids, state)
        return LanguageModelOutput(self.decoder(encoded.last_hidden_state), encoded)

    def save_pretrained(
        self, path: str | Path, *, extra_writers: Sequence[Callable[[Path], object]] = ()
    ) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ extras) to ``path`` atomically.

        The tied decoder weight is stored once (as the token table) and re-tied on load.
        """
        state = {
            k: v.detach().contiguous().cpu()
            for k, v in self.state_dict().items()
            if not (self.config.tie_weights and k == "decoder.weight")
        }
        with atomic_directory(path) as tmp:
            (tmp / CONFIG_FILE).write_text(
                json.dumps(with_kind(self.config.to_dict(), AWD_LSTM), indent=2) + "\n",
                encoding="utf-8",
            )
            save_file(state, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
            for write in extra_writers:
                write(tmp)
        return Path(path)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> AWDLSTMLanguageModel:
        """Load a directory written by :meth:`save_pretrained`.

        Raises:
            CheckpointError: the directory, ``config.json`` or the weights are missing,
                damaged or of another model; the message names the file and the fix.
        """
        directory = Path(path)
        if not directory.is_dir():
            raise CheckpointError(
                f"{directory}: no such directory; give the final/ directory of an AWD-LSTM "
                "run (`ptm pretrain experiment=awd_lstm_tiny` writes runs/awd_lstm_tiny/final)"
            )
        config = AWDLSTMConfig.from_dict(
            read_json_object(
                directory / CONFIG_FILE,
                "an AWD-LSTM final/ holds config.json and model.safetensors; re-run the "
                "pre-training or copy the whole final/ directory",
            ),
            source=str(directory / CONFIG_FILE),
        )
        weights = directory / WEIGHTS_FILE
        try:
            state = load_file(str(weights))
        except FileNotFoundError:
            raise CheckpointError(
                f"{weights}: missing; copy the whole final/ directory or re-run the pre-training"
            ) from None
        except Exception as exc:
            raise CheckpointError(
                f"{weights}: cannot read the weights ({type(exc).__name__}: {exc}); the file is "
                "damaged or truncated, restore it or re-run the pre-training"
            ) from None
        model = cls(config)
        if config.tie_weights:
            state["decoder.weight"] = state.get("encoder.embeddings.weight", torch.empty(0))
        own = model.state_dict()
        problems = [f"missing {k}" for k in sorted(set(own) - set(state))]
        problems += [f"unexpected {k}" for k in sorted(set(state) - set(own))]
        problems += [
            f"{k}: file {tuple(v.shape)} vs config {tuple(own[k].shape)}"
            for k, v in state.items()
            if k in own and v.shape != own[k].shape
        ]
        if problems:
            raise CheckpointError(
                f"{weights}: does not fit {directory / CONFIG_FILE} ({'; '.join(problems[:5])}); "
                "the two files come from different runs, copy both from one final/"
            )
        model.load_state_dict(state)
        return model


@dataclass
class LMTrainingOutput:
    """What the Trainer reads: ``loss`` (cross-entropy + AR + TAR) and ``metrics``."""

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class BPTTLanguageModel(nn.Module):
    """The AWD-LSTM language model as the runner pre-trains it, with BPTT state.

    Paper: Merity et al., 2018 (training: truncated BPTT over contiguous batches, the
    hidden state carried across batches, AR/TAR, section 4.6). The network of the
    awd_lstm family's plan (``input_keys``): ``forward`` takes ``input_ids (B, T)``,
    ``labels (B, T)`` (the next tokens) and ``reset`` (a 0-d bool: the first window of an
    epoch, which starts from zeros). The loss (with AR and TAR, which read the network's
    dropped and raw outputs) is its own; the one objective,
    :class:`~ptm_classic.recurrent.lm_objective.NetworkLoss`, passes it on. The final state is kept,
    detached, in persistent buffers (``state_h_<l>``, ``state_c_<l>``), so a checkpoint
    holds it and a resumed run carries on exactly.

    Args:
        model: the language model.
        batch_size: rows of every batch (fixed: row ``b`` of one window continues row
            ``b`` of the previous window).

    Returns (forward):
        :class:`LMTrainingOutput`: ``loss`` = CE + AR + TAR; ``metrics``: ``lm_loss`` (the
        cross-entropy alone: perplexity = ``exp(lm_loss)``), ``ar``, ``tar``.
    """

    def __init__(self, model: AWDLSTMLanguageModel, batch_size: int) -> None:
        super().__init__()
        self.lm = model
        self.batch_size = batch_size
        for i, (h, c) in enumerate(model.encoder.zero_state(batch_size, torch.device("cpu"))):
            self.register_buffer(f"state_h_{i}", h)
            self.register_buffer(f"state_c_{i}", c)

    def _state(self) -> list[LSTMState]:
        return [
            (getattr(self, f"state_h_{i}"), getattr(self, f"state_c_{i}"))
            for i in range(len(self.lm.encoder.layers))
        ]

    @property
    def config(self) -> AWDLSTMConfig:
        return self.lm.config

    def forward(
        self, input_ids: Tensor, labels: Tensor, reset: Tensor | None = None
    ) -> LMTrainingOutput:
        if input_ids.size(0) != self.batch_size:
            raise ValueError(
                f"BPTT batch has {input_ids.size(0)} rows, the model carries state for "
                f"{self.batch_size}; build the batches and the model with one batch_size"
            )
        state = self._state()
        if reset is not None and bool(reset):
            state = [(torch.zeros_like(h), torch.zeros_like(c)) for h, c in state]
        out = self.lm(input_ids, state)
        for i, (h, c) in enumerate(out.encoder.state):
            # Truncated BPTT: the next window starts from these values, without their graph.
            # (Rebound, not copied into: the old values are saved for this backward.)
            for name, value in ((f"state_h_{i}", h), (f"state_c_{i}", c)):
                setattr(self, name, value.detach().to(getattr(self, name).dtype))
        lm_loss = F.cross_entropy(out.logits.float().flatten(0, 1), labels.flatten())
        config = self.lm.config
        ar = activation_regularization(out.encoder.dropped_outputs[-1].float(), config.alpha)
        tar = temporal_activation_regularization(out.encoder.raw_outputs[-1].float(), config.beta)
        loss = lm_loss + ar + tar
        return LMTrainingOutput(
            loss, {"lm_loss": lm_loss.detach(), "ar": ar.detach(), "tar": tar.detach()}
        )


@torch.no_grad()
def evaluate_perplexity(
    model: AWDLSTMLanguageModel, batches: Any, *, device: torch.device | str = "cpu"
) -> dict[str, float]:
    """Perplexity of ``model`` (eval mode: no dropout) over a BPTT batch source, the
    hidden state carried across its windows.

    Args:
        model: the language model.
        batches: a :class:`~ptm_classic.recurrent.bptt.BPTTBatches` (epoch 0, in order).
        device: where to run.

    Returns:
        ``{"loss": mean cross-entropy per token, "perplexity": exp(loss), "tokens": n}``.
    """
    was_training = model.training
    model.eval()
    device = torch.device(device)
    state: list[LSTMState] | None = None
    total, count = 0.0, 0
    for batch in batches.iter_batches(0):
        logits_out = model(batch["input_ids"].to(device), state)
        state = logits_out.encoder.state
        labels = batch["labels"].to(device)
        total += float(
            F.cross_entropy(
                logits_out.logits.float().flatten(0, 1), labels.flatten(), reduction="sum"
            )
        )
        count += labels.numel()
    model.train(was_training)
    loss = total / max(count, 1)
    return {"loss": loss, "perplexity": math.exp(min(loss, 700.0)), "tokens": float(count)}


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (a tied matrix counted once), as the papers count them."""
    return sum(p.numel() for p in model.parameters())
