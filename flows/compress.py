"""``ptm compress FINAL_DIR --method M --output DIR``: a ``final/`` made smaller or portable.

The work is :func:`ptm_core.compress.compress_final`; this module checks the command's
arguments (each option belongs to one method) and prints the one-line summary: weight-file
size before and after, and what was done.

    ptm compress runs/x/final --method int8 --output runs/x/final-int8
    ptm compress runs/x/final --method prune-heads --fraction 0.3 --output runs/x/final-p30
    ptm compress runs/x/final --method drop-layers --keep bottom:2 --output runs/x/final-l2
    ptm compress runs/x/final --method onnx --output runs/x/onnx
"""

from __future__ import annotations

from pathlib import Path

from flows.end_table import print_end_table
from ptm_core.atomic import check_output_directory
from ptm_core.compress.methods import METHODS, CompressionResult, compress_final

DEFAULT_FRACTION = 0.3


def compress(
    source: str | Path,
    output: str | Path,
    method: str,
    *,
    fraction: float | None = None,
    keep: str | None = None,
    data: str | Path | None = None,
    importance: str | Path | None = None,
    group_size: int | None = None,
    exporter: str | None = None,
    overwrite: bool = False,
) -> CompressionResult:
    """Compress ``source`` into ``output`` with ``method`` and print the summary line.

    Args:
        source: a ``final/`` of ``ptm pretrain`` or ``ptm finetune``.
        output: the directory to write (a new folder; the source is never changed).
        method: one of :data:`~ptm_core.compress.methods.METHODS`.
        fraction: ``prune-heads`` only: share of all heads to remove (default 0.3).
        keep: ``drop-layers`` only: ``bottom:K``, ``top:K``, ``every-other`` or ``0,2,3``.
        data: ``prune-heads`` only: labelled file to score heads on (default the task's dev).
        importance: ``prune-heads`` only: rank heads by this saved importance
            (``heads.json`` of ``ptm analyze MODEL heads``) instead of scoring them again.
        group_size: ``int4-weight`` only: input channels per scale (32, 64, 128 or 256).
        exporter: ``onnx`` only: ``dynamo`` (default) or ``torchscript``.
        overwrite: replace ``output`` when it holds an earlier ptm output (never a folder
            ptm did not write).

    Raises:
        ValueError: an unknown method, an option given to a method that does not take it,
            a broken ``final/`` (a :class:`~ptm_core.checkpoints.CheckpointError` naming the
            file and the fix).
    """
    if method not in METHODS:
        raise ValueError(f"--method {method!r} is not known; valid: {', '.join(METHODS)}")
    owners = {
        "--fraction": (fraction, "prune-heads"),
        "--keep": (keep, "drop-layers"),
        "--data": (data, "prune-heads"),
        "--importance": (importance, "prune-heads"),
        "--group-size": (group_size, "int4-weight"),
        "--exporter": (exporter, "onnx"),
    }
    for option, (value, owner) in owners.items():
        if value is not None and method != owner:
            raise ValueError(f"{option} belongs to --method {owner}, not {method}; drop it")
    if data is not None and importance is not None:
        raise ValueError("--data scores the heads, --importance reads saved scores; give one")
    if method == "drop-layers" and keep is None:
        raise ValueError(
            "--method drop-layers needs --keep (bottom:K, top:K, every-other or 0,2,3)"
        )
    if not Path(source).is_dir():
        raise FileNotFoundError(
            f"{source}: no such directory; pass a final/ folder of ptm pretrain or ptm finetune"
        )
    if Path(output).resolve() != Path(source).resolve():  # compress_final names that case
        check_output_directory(output, kind="compress", overwrite=overwrite, option="--overwrite")
    result = compress_final(
        source,
        output,
        method,
        fraction=DEFAULT_FRACTION if fraction is None else fraction,
        keep=keep,
        data=data,
        importance=importance,
        group_size=32 if group_size is None else group_size,
        exporter=exporter or "dynamo",
    )
    print(result.summary())
    mib = 2**20
    print_end_table(
        f"compress {method}",
        {
            "weights MiB before": result.bytes_before / mib,
            "weights MiB after": result.bytes_after / mib,
            "size ratio": result.bytes_after / max(result.bytes_before, 1),
            "parameters before": result.params_before,
            "parameters after": result.params_after,
        },
        {"compressed model": result.output, "source": result.source},
    )
    return result
