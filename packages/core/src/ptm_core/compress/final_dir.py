"""Reading a ``final/`` to compress and writing the compressed one beside it.

A ``final/`` is either a pre-trained encoder directory (``config.json`` +
``model.safetensors``, as :meth:`~ptm_core.encoders.TransformerEncoder.save_pretrained`
writes it, or a Hugging Face BERT-family folder) or a fine-tuned task directory (the same
plus ``task.json`` and ``task_head.safetensors``, as
:func:`~ptm_core.finetune.model.save_task_model` writes it). A compressed directory keeps the
source's other files (tokenizer, pre-training heads) and adds ``compression.json``, which
records what was done; it is written atomically.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import TASK_HEAD_FILE, TASK_JSON, TaskModel, load_task_model

COMPRESSION_JSON = "compression.json"
COMPRESSION_FORMAT = 1
# Files a compressed directory writes itself; every other file of the source is copied.
OWN_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", TASK_HEAD_FILE, TASK_JSON)


@dataclass
class FinalModel:
    """A loaded ``final/``.

    Attributes:
        model: the :class:`TaskModel` (fine-tuned directory) or the
            :class:`TransformerEncoder` (pre-trained directory), in eval mode.
        directory: where it was read from.
        task_config: ``task.json`` without ``ptm_task`` for a task directory, else ``None``.
    """

    model: nn.Module
    directory: Path
    task_config: dict[str, Any] | None

    @property
    def encoder(self) -> TransformerEncoder:
        """The encoder (the task model's, or the model itself)."""
        model = self.model
        return model.encoder if isinstance(model, TaskModel) else model  # type: ignore[return-value]


def load_final(directory: str | Path) -> FinalModel:
    """Load a pre-trained encoder or fine-tuned task ``final/`` in float precision.

    Args:
        directory: the folder.

    Returns:
        The :class:`FinalModel`, in eval mode.

    Raises:
        CheckpointError: not a directory, missing or damaged files, an unsupported kind
            (feature-based tagger, BART/T5 task, a quantised folder); the message names the
            file and the fix.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: not a directory; pass a final/ folder (a pre-trained encoder with "
            "config.json and model.safetensors, or a fine-tuned model with task.json too)"
        )
    config_path = directory / "config.json"
    if not config_path.exists():
        raise CheckpointError(
            f"{config_path}: missing; a final/ folder holds config.json and model.safetensors "
            "(copy the whole folder the run wrote)"
        )
    task_path = directory / TASK_JSON
    if task_path.exists():
        record = _read_json(task_path)
        for key, what in (("feature_based", "feature-based tagger"), ("seq2seq", "BART/T5 task")):
            if record.get(key):
                raise CheckpointError(
                    f"{task_path}: {key} is set: a {what} is not a TransformerEncoder task "
                    "model, which is what ptm compress handles; compress a classifier, "
                    "tagger, QA or multiple-choice final/ fine-tuned end to end"
                )
        model, task_config = load_task_model(directory)
        return FinalModel(model.eval(), directory, task_config)
    return FinalModel(TransformerEncoder.from_pretrained(directory).eval(), directory, None)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def weight_bytes(directory: str | Path) -> int:
    """Bytes of the weight files of a directory: ``*.safetensors``, ``*.bin``, ``*.onnx``
    and ONNX external data (``*.onnx.data``)."""
    suffixes = (".safetensors", ".bin", ".onnx", ".data")
    return sum(
        p.stat().st_size for p in Path(directory).iterdir() if p.is_file() and p.suffix in suffixes
    )


def check_output(source: Path, output: str | Path) -> Path:
    """Refuse to overwrite the source: compression writes a new directory."""
    output = Path(output)
    if output.resolve() == source.resolve():
        raise ValueError(
            f"--output {output} is the source final/ itself; write the compressed model to "
            "another directory (the source stays as it is)"
        )
    return output


def copy_other_files(source: Path, skip: tuple[str, ...] = OWN_FILES) -> Callable[[Path], None]:
    """An ``extra_writers`` callable that copies the source's other files (tokenizer, heads)."""

    def write(tmp: Path) -> None:
        for path in sorted(source.iterdir()):
            if path.name in skip or path.name == COMPRESSION_JSON or path.name.startswith("."):
                continue
            if path.is_dir():
                shutil.copytree(path, tmp / path.name)
            else:
                shutil.copy2(path, tmp / path.name)

    return write


def compression_writer(record: dict[str, Any]) -> Callable[[Path], None]:
    """An ``extra_writers`` callable that writes ``compression.json`` (``record`` + format)."""
    text = json.dumps({"ptm_compression": COMPRESSION_FORMAT, **record}, indent=2) + "\n"

    def write(tmp: Path) -> None:
        (tmp / COMPRESSION_JSON).write_text(text, encoding="utf-8")

    return write


def read_compression_json(directory: str | Path) -> dict[str, Any] | None:
    """``compression.json`` of a directory, or ``None`` when it has none."""
    path = Path(directory) / COMPRESSION_JSON
    if not path.exists():
        return None
    record = _read_json(path)
    if record.get("ptm_compression") != COMPRESSION_FORMAT:
        raise CheckpointError(
            f"{path}: ptm_compression is {record.get('ptm_compression')!r}, expected "
            f"{COMPRESSION_FORMAT}; written by another ptm version (upgrade ptm)"
        )
    return record


def save_float_final(final: FinalModel, output: str | Path, record: dict[str, Any]) -> Path:
    """Write a float (pruned or layer-dropped) model as a ``final/`` that
    :func:`~ptm_core.finetune.model.load_task_model` / ``TransformerEncoder.from_pretrained``
    load as they are; ``compression.json`` records ``record``."""
    from ptm_core.finetune.model import save_task_model

    writers = [copy_other_files(final.directory), compression_writer(record)]
    if isinstance(final.model, TaskModel):
        assert final.task_config is not None
        return save_task_model(
            final.model, output, task_config=dict(final.task_config), extra_writers=writers
        )
    return final.encoder.save_pretrained(output, extra_writers=writers)


def save_quantized_final(
    final: FinalModel, quantized: nn.Module, output: str | Path, record: dict[str, Any]
) -> Path:
    """Write a quantised model (``record["method"]``: ``int8``, ``int8-weight``,
    ``int4-weight``) atomically.

    Layout: ``config.json`` (the encoder's, plus ``ptm_quantization``, so float loaders
    refuse it by name), ``model.safetensors`` (the whole model's tensors under its
    ``state_dict`` names: ``encoder.*`` and ``head.*`` for a task model; int8 weights with
    their scales), ``task.json`` (task models), ``compression.json``, and the source's other
    files. :func:`load_compressed` reads it.
    """
    from safetensors.torch import save_file

    from ptm_core.atomic import atomic_directory
    from ptm_core.checkpoints.encoder import PTM_ENCODER_FORMAT, encoder_kind
    from ptm_core.compress.quantize import dynamic_int8_state
    from ptm_core.model_kinds import with_kind

    method = record["method"]
    if method == "int8":
        state = dynamic_int8_state(quantized)
    else:
        state = {k: v.detach().contiguous() for k, v in quantized.state_dict().items()}
    config = with_kind(
        {
            "ptm_format": PTM_ENCODER_FORMAT,
            "ptm_quantization": method,
            **final.encoder.config.to_dict(),
        },
        encoder_kind(final.encoder.config),
    )
    task_text = None
    if final.task_config is not None:
        task_text = json.dumps({"ptm_task": 1, **final.task_config}, indent=2) + "\n"
    with atomic_directory(output, kind="compress") as tmp:
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        if task_text is not None:
            (tmp / TASK_JSON).write_text(task_text, encoding="utf-8")
        copy_other_files(final.directory)(tmp)
        compression_writer(record)(tmp)
    return Path(output)


def load_compressed(directory: str | Path) -> FinalModel:
    """Load any ``final/``: float, pruned, layer-dropped or quantised by ``ptm compress``.

    Float directories (no ``compression.json``, or a pruned / layer-dropped one) load as
    :func:`load_final` loads them (they are ordinary ``final/`` folders); quantised ones are
    rebuilt as the float skeleton from ``config.json`` / ``task.json``, given the same
    quantised modules, and filled from ``model.safetensors``. CPU only.

    Args:
        directory: the folder ``ptm compress`` wrote (or any ``final/``).

    Returns:
        The :class:`FinalModel` in eval mode.

    Raises:
        CheckpointError: missing or damaged files, naming them and the fix.
    """
    from safetensors.torch import load_file

    from ptm_core.compress.pruned import encoder_config_from_dict
    from ptm_core.compress.quantize import (
        WeightBits,
        load_dynamic_int8_state,
        quantize_dynamic_int8,
        weight_only_shell,
    )
    from ptm_core.finetune.model import build_task_model, pooler_variant, read_task_json

    directory = Path(directory)
    record = read_compression_json(directory) if directory.is_dir() else None
    method = record.get("method") if record else None
    if method not in ("int8", "int8-weight", "int4-weight"):
        return load_final(directory)
    assert record is not None
    config_path = directory / "config.json"
    raw = _read_json(config_path)
    raw.pop("ptm_quantization", None)
    try:
        config = encoder_config_from_dict(raw, source=str(config_path))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(str(exc)) from None
    encoder = encoder_from_config(config)
    model: nn.Module = encoder
    task_config = None
    if (directory / TASK_JSON).exists():
        task = read_task_json(directory / TASK_JSON)
        model = build_task_model(
            encoder,
            task["kind"],
            task["num_labels"],
            float(task.get("dropout", 0.1)),
            pool=task.get("pool", "first"),
            label_names=task.get("label_names"),
            **pooler_variant(task),
        )
        task_config = {k: v for k, v in task.items() if k != "ptm_task"}
    model.eval()
    weights_path = directory / "model.safetensors"
    try:
        state = load_file(str(weights_path))
    except FileNotFoundError:
        raise CheckpointError(
            f"{weights_path}: missing; copy the whole compressed folder"
        ) from None
    except Exception as exc:
        raise CheckpointError(
            f"{weights_path}: cannot read the weights ({type(exc).__name__}: {exc}); the file "
            "is damaged or truncated: compress the source final/ again"
        ) from None
    try:
        if method == "int8":
            model = quantize_dynamic_int8(model, inplace=True)
            load_dynamic_int8_state(model, state, source=str(weights_path))
        else:
            bits: WeightBits = 4 if method == "int4-weight" else 8
            weight_only_shell(
                model, list(record["quantized_modules"]), bits, int(record.get("group_size", 32))
            )
            missing, unknown = model.load_state_dict(state, strict=False)
            if missing or unknown:
                raise ValueError(
                    f"{weights_path}: does not fit the {method} model: missing {missing}, "
                    f"unknown {unknown}"
                )
    except (KeyError, ValueError) as exc:
        raise CheckpointError(
            f"{exc}\nThe weights, config.json and compression.json come from different "
            "saves: compress the source final/ again"
        ) from None
    return FinalModel(model.eval(), directory, task_config)
