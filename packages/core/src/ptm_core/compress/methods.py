"""``compress_final``: one compression method applied to a ``final/``, written to a new one.

The methods (``ptm compress <final> --method ...``):

* ``int8``: dynamic int8 quantisation of every linear layer (:mod:`.quantize`);
* ``int8-weight`` / ``int4-weight``: weight-only int8 / int4 linears (:mod:`.quantize`);
* ``prune-heads``: remove ``fraction`` of all attention heads, least important first by
  Michel et al.'s (2019) score on the task's dev set (:mod:`.prune`); fine-tuned finals only
  (the score needs the task loss), or any final/ with a saved importance file
  (``--importance heads.json`` of ``ptm analyze MODEL heads``);
* ``drop-layers``: keep the layers ``keep`` names (:func:`.prune.layers_to_keep`);
* ``onnx``: ``model.onnx`` with dynamic batch and length, checked against ONNX Runtime
  (:mod:`.onnx_export`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ptm_core.checkpoints import CheckpointError
from ptm_core.compress.final_dir import (
    FinalModel,
    check_output,
    compression_writer,
    copy_other_files,
    load_final,
    save_float_final,
    save_quantized_final,
    weight_bytes,
)
from ptm_core.compress.pruned import PrunedEncoderConfig
from ptm_core.finetune.model import TASK_JSON, TaskModel
from ptm_core.progress import track

METHODS: tuple[str, ...] = (
    "int8",
    "int8-weight",
    "int4-weight",
    "prune-heads",
    "drop-layers",
    "onnx",
)


@dataclass
class CompressionResult:
    """What :func:`compress_final` did.

    Attributes:
        method: the method.
        source: the ``final/`` read.
        output: the directory written.
        bytes_before: weight-file bytes of the source.
        bytes_after: weight-file bytes written.
        params_before: parameters of the float source.
        params_after: parameters after pruning / dropping (equal for quantisation and ONNX).
        details: method facts (pruned heads, kept layers, quantised layers, ONNX diffs).
    """

    method: str
    source: Path
    output: Path
    bytes_before: int
    bytes_after: int
    params_before: int
    params_after: int
    details: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: sizes before and after, and what was done."""
        mb = 2**20
        what = self.details.get("summary", self.method)
        return (
            f"compress {self.method}: {self.source} -> {self.output}: "
            f"{self.bytes_before / mb:.2f} MiB -> {self.bytes_after / mb:.2f} MiB "
            f"({self.bytes_after / max(self.bytes_before, 1):.2f}x); {what}"
        )


def dev_batches(final: FinalModel, *, batch_size: int = 32, data: str | Path | None = None) -> Any:
    """Labelled batches of the task's dev file (or ``data``), as the finetune recipe reads them.

    Raises:
        CheckpointError: a pre-trained encoder (no task, no loss) or a ``task.json`` without
            the task settings.
    """
    from ptm_core.finetune.data.task_batches import TaskBatches
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.finetune.task_data import read_task
    from ptm_core.finetune.task_spec import TaskSpec

    if final.task_config is None:
        raise CheckpointError(
            f"{final.directory}: prune-heads scores heads by the task loss on dev data, and "
            "this is a pre-trained encoder (no task.json); prune a fine-tuned final/ or use "
            "--method drop-layers / int8 / onnx"
        )
    if "task" not in final.task_config:
        raise CheckpointError(
            f"{final.directory / TASK_JSON}: no 'task' settings (written by save_task_model, "
            "not by ptm finetune), so the dev data is unknown; pass --data <dev file>"
        )
    task = TaskSpec.from_mapping(final.task_config["task"])
    tokenizer = load_task_tokenizer(final.directory)
    names = final.task_config.get("label_names") or None
    rows = read_task(task, "dev", tokenizer, names, path=data)
    batches = TaskBatches(
        rows.rows, rows.featurizer, batch_size, shuffle=False, feature_index=task.kind == "qa"
    )
    return track(batches.iter_batches(0), "score heads", len(batches), "batch")


def compress_final(
    source: str | Path,
    output: str | Path,
    method: str,
    *,
    fraction: float = 0.3,
    keep: str | None = None,
    data: str | Path | None = None,
    importance: str | Path | None = None,
    group_size: int = 32,
    exporter: str = "dynamo",
) -> CompressionResult:
    """Compress the ``final/`` at ``source`` into ``output`` (atomically; the source stays).

    Args:
        source: a pre-trained encoder or fine-tuned task ``final/``.
        output: the new directory.
        method: one of :data:`METHODS`.
        fraction: ``prune-heads``: share of all heads to remove.
        keep: ``drop-layers``: ``bottom:K``, ``top:K``, ``every-other`` or ``0,2,3``.
        data: ``prune-heads``: a labelled file of the task's format (default its dev file).
        importance: ``prune-heads``: a saved importance file (``heads.json`` of ``ptm analyze
            MODEL heads``, :func:`~ptm_core.analysis.heads.read_head_importance`) to rank
            by instead of scoring the heads on ``data``; a pre-trained final/ then works too.
        group_size: ``int4-weight``: input channels per scale.
        exporter: ``onnx``: ``dynamo`` or ``torchscript``.

    Returns:
        :class:`CompressionResult`.
    """
    from ptm_core.compress import prune, quantize
    from ptm_core.compress.quantize import WeightBits

    if method not in METHODS:
        raise ValueError(f"unknown compression method {method!r}; valid: {', '.join(METHODS)}")
    final = load_final(source)
    output = check_output(final.directory, output)
    params_before = prune.parameter_count(final.model)
    record: dict[str, Any] = {"method": method, "source": str(final.directory)}
    details: dict[str, Any] = {}
    params_after = params_before
    if method == "int8":
        quantised = quantize.quantize_dynamic_int8(final.model)
        names = [n for n, m in quantised.named_modules() if quantize.is_quantized_linear(m)]
        record.update(quantized_modules=names)
        details["summary"] = f"{len(names)} linear layers to dynamic int8"
        save_quantized_final(final, quantised, output, record)
    elif method in ("int8-weight", "int4-weight"):
        bits: WeightBits = 4 if method == "int4-weight" else 8
        quantised, names, skipped = quantize.quantize_weight_only(final.model, bits, group_size)
        record.update(quantized_modules=names, skipped_modules=skipped, group_size=group_size)
        details["summary"] = f"{len(names)} linear layers to int{bits} weights" + (
            f", {len(skipped)} kept float (e.g. {skipped[0]})" if skipped else ""
        )
        save_quantized_final(final, quantised, output, record)
    elif method == "prune-heads":
        if importance is not None:
            from ptm_core.analysis.heads import read_head_importance

            counts = [m.num_heads for m in prune.attention_modules(final.encoder)]
            scores = read_head_importance(importance, counts)
            record["importance_file"] = str(importance)
        else:
            scores = prune.head_importance(final.model, dev_batches(final, data=data))
        heads = prune.select_heads_to_prune(scores, fraction)
        encoder = prune.prune_heads(final.encoder, heads)
        final = FinalModel(
            prune.replace_encoder(final.model, encoder), final.directory, final.task_config
        )
        total = sum(len(s) for s in scores)
        removed = sum(len(h) for h in heads.values())
        pruned_heads = cast(PrunedEncoderConfig, encoder.config).heads_per_layer
        record.update(
            fraction=fraction,
            pruned_heads={str(k): v for k, v in heads.items()},
            importance=[s.tolist() for s in scores],
            heads_per_layer=pruned_heads,
        )
        details["summary"] = f"pruned {removed}/{total} heads, per layer {pruned_heads}"
        params_after = prune.parameter_count(final.model)
        save_float_final(final, output, record)
    elif method == "drop-layers":
        if keep is None:
            raise ValueError(
                "--method drop-layers needs --keep (bottom:K, top:K, every-other or 0,2,3)"
            )
        kept = prune.layers_to_keep(keep, final.encoder.config.num_layers)
        encoder = prune.drop_layers(final.encoder, kept)
        before = final.encoder.config.num_layers
        final = FinalModel(
            prune.replace_encoder(final.model, encoder), final.directory, final.task_config
        )
        record.update(keep=keep, kept_layers=kept)
        details["summary"] = f"kept layers {kept} of {before}"
        params_after = prune.parameter_count(final.model)
        save_float_final(final, output, record)
    else:
        details.update(_export(final, Path(output), record, exporter))
    details["record"] = record
    return CompressionResult(
        method,
        final.directory,
        Path(output),
        weight_bytes(final.directory),
        weight_bytes(output),
        params_before,
        params_after,
        details,
    )


def _export(
    final: FinalModel, output: Path, record: dict[str, Any], exporter: str
) -> dict[str, Any]:
    """``model.onnx`` + the source's tokenizer / ``task.json`` + ``compression.json``."""
    from ptm_core.atomic import atomic_directory
    from ptm_core.compress.onnx_export import ONNX_FILE, export_onnx

    with atomic_directory(output, kind="compress") as tmp:
        result = export_onnx(final.model, tmp / ONNX_FILE, exporter=exporter)  # type: ignore[arg-type]
        record.update(
            exporter=exporter,
            inputs=result.input_names,
            output=result.output_name,
            max_abs_diff=result.max_abs_diff,
            kind=final.model.kind if isinstance(final.model, TaskModel) else "encoder",
        )
        skip = (
            "model.safetensors",
            "pytorch_model.bin",
            "task_head.safetensors",
            "heads.safetensors",
        )
        copy_other_files(final.directory, skip=skip)(tmp)
        compression_writer(record)(tmp)
    return {
        "summary": f"ONNX ({exporter}) checked with ONNX Runtime, max |diff| {result.worst_diff:.2e}",
        "max_abs_diff": result.max_abs_diff,
    }
