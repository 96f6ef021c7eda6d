"""ONNX export of encoders and fine-tuned task models, checked against ONNX Runtime.

``torch.onnx.export`` (the dynamo exporter by default, the TorchScript one on request) with
dynamic batch and length axes and the padding mask as an input; the exported graph is run
by ONNX Runtime on inputs of two other shapes and compared with the eager model (max
absolute difference). This is what users otherwise reach Optimum's ``optimum-cli export
onnx`` for. onnx, onnxscript and onnxruntime come with ``pip install 'ptm-core[compress]'``.

The graph is traced through :class:`ExportableEncoder`: the same modules as
:class:`~ptm_core.encoders.TransformerEncoder`, with the padding mask turned into the SDPA
mask by tensor operations only (the eager encoder skips the mask when nothing is padded,
a data-dependent branch an exported graph cannot hold).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import TaskModel
from ptm_core.modules.positions import bias_mask

Exporter = Literal["dynamo", "torchscript"]
ONNX_FILE = "model.onnx"
DEFAULT_OPSET = 18


def require(module: str) -> ModuleType:
    """Import an optional dependency of the compress extra, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{module} is not installed; ONNX export and its check need the compress extra: "
            "pip install 'ptm-core[compress]' (onnx, onnxscript, onnxruntime)"
        ) from None


class ExportableEncoder(nn.Module):
    """The encoder's forward (absolute or bucketed positions) without data-dependent branches.

    Args:
        encoder: the encoder (its modules are shared, not copied).

    Shapes:
        ``input_ids``, ``attention_mask`` (1 = real token), ``token_type_ids``: ``(B, L)``
        -> ``(B, L, D)``, the encoder's ``last_hidden_state``.
    """

    def __init__(self, encoder: TransformerEncoder) -> None:
        super().__init__()
        if encoder.config.relative:
            raise ValueError(
                "ONNX export covers absolute and bucketed (T5) positions; an XLNet / "
                "Transformer-XL encoder (position_encoding='relative') is not exported"
            )
        self.encoder = encoder

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
    ) -> Tensor:
        encoder = self.encoder
        hidden = encoder.embeddings(input_ids, token_type_ids=token_type_ids)  # (B, L, E)
        if encoder.embedding_projection is not None:
            hidden = encoder.embedding_projection(hidden)  # (B, L, D)
        keys = attention_mask.bool()
        # An all-padding row would softmax over nothing (NaN); let it attend everywhere.
        keys = keys | ~keys.any(dim=-1, keepdim=True)
        mask: Tensor = keys[:, None, None, :]  # (B, 1, 1, L)
        if encoder.relative_position_bias is not None:
            length = hidden.shape[1]
            mask = bias_mask(encoder.relative_position_bias(length, length), mask)
        for layer in encoder.layers:
            hidden = layer(hidden, mask)
        if encoder.final_norm is not None:
            hidden = encoder.final_norm(hidden)
        return hidden


class ExportableTaskModel(nn.Module):
    """A :class:`TaskModel` as a function of tensors: ``(ids, mask[, types]) -> logits``.

    Shapes:
        ``(B, L)`` inputs (``(B, C, L)`` for multiple choice) -> the task's logits
        (:class:`~ptm_core.finetune.model.TaskOutput`).
    """

    def __init__(self, model: TaskModel) -> None:
        super().__init__()
        self.model = model
        self.encoder = ExportableEncoder(model.encoder)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
    ) -> Tensor:
        choices = input_ids.shape[1] if self.model.kind == "multiple_choice" else 0
        if choices:
            input_ids, attention_mask = input_ids.flatten(0, 1), attention_mask.flatten(0, 1)
            token_type_ids = token_type_ids.flatten(0, 1) if token_type_ids is not None else None
        hidden = self.encoder(input_ids, attention_mask, token_type_ids)
        if choices:
            return self.model.head(hidden, attention_mask, num_choices=choices)
        return self.model.head(hidden, attention_mask)


@dataclass
class OnnxExport:
    """What :func:`export_onnx` wrote and how well it matches the eager model.

    Attributes:
        path: the ``.onnx`` file.
        input_names: the graph's inputs, in order.
        output_name: the graph's output (``last_hidden_state`` or ``logits``).
        max_abs_diff: per checked shape ``"BxL"``, ONNX Runtime vs eager (float32).
        exporter: ``"dynamo"`` or ``"torchscript"``.
    """

    path: Path
    input_names: list[str]
    output_name: str
    exporter: str
    max_abs_diff: dict[str, float] = field(default_factory=dict)

    @property
    def worst_diff(self) -> float:
        """The largest difference over the checked shapes."""
        return max(self.max_abs_diff.values(), default=float("nan"))


def _wrap(model: nn.Module) -> tuple[nn.Module, str, TransformerEncoder]:
    if isinstance(model, TaskModel):
        return ExportableTaskModel(model).eval(), "logits", model.encoder
    if isinstance(model, TransformerEncoder):
        return ExportableEncoder(model).eval(), "last_hidden_state", model
    raise TypeError(f"export a TransformerEncoder or a TaskModel, got {type(model).__name__}")


def _output_axes(model: nn.Module) -> dict[int, str]:
    """The dynamic axes of the output: per-token outputs have a length axis."""
    kind = model.kind if isinstance(model, TaskModel) else "encoder"
    if kind in ("encoder", "tagging", "qa"):
        return {0: "batch", 1: "length"}
    return {0: "batch", 1: "choices"} if kind == "multiple_choice" else {0: "batch"}


def _uses_segments(encoder: TransformerEncoder) -> bool:
    return encoder.embeddings.token_type is not None


def sample_inputs(
    model: nn.Module, batch: int, length: int, *, choices: int = 2, seed: int = 0
) -> dict[str, Tensor]:
    """Random inputs for ``model``: token ids, a padding mask whose first row is padded
    from the middle on, and (when the model has segments) token types ``0``/``1``."""
    _, _, encoder = _wrap(model)
    generator = torch.Generator().manual_seed(seed)
    config = encoder.config
    shape: tuple[int, ...] = (batch, length)
    if isinstance(model, TaskModel) and model.kind == "multiple_choice":
        shape = (batch, choices, length)
    ids = torch.randint(1, config.vocab_size, shape, generator=generator)
    mask = torch.ones(shape, dtype=torch.long)
    mask[0, ..., max(1, length // 2) :] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    if _uses_segments(encoder):
        types = torch.zeros(shape, dtype=torch.long)
        types[..., length // 3 :] = 1 if config.type_vocab_size > 1 else 0
        inputs["token_type_ids"] = types
    return inputs


def export_onnx(
    model: nn.Module,
    path: str | Path,
    *,
    exporter: Exporter = "dynamo",
    opset: int = DEFAULT_OPSET,
    check_shapes: tuple[tuple[int, int], ...] = ((2, 16), (3, 9)),
) -> OnnxExport:
    """Export an encoder or task model to ONNX with dynamic batch and length, then check it.

    Args:
        model: a float :class:`TransformerEncoder` or :class:`TaskModel` (CPU).
        path: the ``.onnx`` file to write (parents created).
        exporter: ``"dynamo"`` (``torch.onnx.export(dynamo=True)``, torch's default and
            supported exporter) or ``"torchscript"`` (the older tracer, ``dynamo=False``;
            seconds instead of tens of seconds, deprecated by torch).
        opset: ONNX opset.
        check_shapes: ``(batch, length)`` pairs on which ONNX Runtime is compared with the
            eager model (other than the traced ``(2, 8)``, so the dynamic axes are used);
            empty = no check.

    Returns:
        :class:`OnnxExport` with the differences.
    """
    require("onnx")
    if exporter == "dynamo":
        require("onnxscript")
    wrapper, output_name, encoder = _wrap(model)
    model.eval()
    example = sample_inputs(model, 2, 8)
    names = list(example)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    multiple_choice = isinstance(model, TaskModel) and model.kind == "multiple_choice"
    axes = {0: "batch", 1: "choices", 2: "length"} if multiple_choice else {0: "batch", 1: "length"}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            # Learned positions bound the length (the eager model raises beyond it).
            bounded = encoder.embeddings.position is not None
            dims: dict[str, Any] = {
                "batch": torch.export.Dim("batch"),
                "choices": torch.export.Dim("choices"),
                "length": torch.export.Dim(
                    "length", max=encoder.config.max_positions if bounded else None
                ),
            }
            shapes = {name: {i: dims[axis] for i, axis in axes.items()} for name in names}
            torch.onnx.export(
                wrapper,
                tuple(example.values()),
                str(path),
                dynamo=True,
                input_names=names,
                output_names=[output_name],
                dynamic_shapes=shapes,
                opset_version=opset,
                external_data=False,
            )
        elif exporter == "torchscript":
            dynamic = {name: dict(axes) for name in names}
            dynamic[output_name] = _output_axes(model)
            torch.onnx.export(
                wrapper,
                tuple(example.values()),
                str(path),
                dynamo=False,
                input_names=names,
                output_names=[output_name],
                dynamic_axes=dynamic,
                opset_version=opset,
            )
        else:
            raise ValueError(f"unknown exporter {exporter!r}; valid: dynamo, torchscript")
    result = OnnxExport(path, names, output_name, exporter)
    for batch, length in check_shapes:
        result.max_abs_diff[f"{batch}x{length}"] = onnx_max_abs_diff(model, path, batch, length)
    return result


def onnx_session(path: str | Path, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session for ``path`` (``threads`` intra-op threads, default ORT's)."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@torch.no_grad()
def onnx_max_abs_diff(
    model: nn.Module, path: str | Path, batch: int, length: int, *, session: Any = None
) -> float:
    """Max absolute difference of ONNX Runtime's output and the eager model's, on random
    inputs of shape ``(batch, length)`` (:func:`sample_inputs`), over the real tokens."""
    session = session or onnx_session(path)
    inputs = sample_inputs(model, batch, length, seed=batch * 1000 + length)
    (got,) = session.run(None, {k: v.numpy() for k, v in inputs.items()})
    if isinstance(model, TaskModel):
        expected = model(dict(inputs)).logits
    else:
        expected = model(
            inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            token_type_ids=inputs.get("token_type_ids"),
        ).last_hidden_state
    diff = (torch.from_numpy(got) - expected).abs()
    real = inputs["attention_mask"].bool()
    if diff.dim() >= 2 and diff.shape[:2] == real.shape:
        # Per-token outputs: padding positions carry no information (the eager encoder's
        # unpadded path leaves zeros there, the exported padded graph does not).
        diff = diff[real]
    return float(diff.max())
