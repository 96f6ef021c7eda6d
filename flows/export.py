"""``ptm export --format hf FINAL_DIR OUT_DIR``: a ptm ``final/`` as a Hugging Face folder.

The conversion itself is :func:`ptm_core.checkpoints_hf.export.export_hf`; this module
checks the command's arguments and prints what was written and how to load it.
"""

from __future__ import annotations

from pathlib import Path

from ptm_core.checkpoints_hf.export import HFExport, export_hf

FORMATS = ("hf",)


def export(source: str | Path, target: str | Path, *, format: str = "hf") -> HFExport:
    """Export ``source`` to ``target`` in ``format`` and print a short summary.

    Args:
        source: a ``final/`` folder written by ``ptm pretrain`` or ``ptm finetune``.
        target: the folder to write (replaced as a whole).
        format: ``"hf"`` (Hugging Face ``transformers``), the only format for now.

    Returns:
        What was written (:class:`~ptm_core.checkpoints_hf.export.HFExport`).

    Raises:
        ValueError: an unknown format, ``target`` inside ``source``, or a folder that
            cannot be exported (a :class:`~ptm_core.checkpoints.CheckpointError` that names
            it and the supported kinds).
    """
    if format not in FORMATS:
        raise ValueError(f"--format {format!r} is not known; valid: {', '.join(FORMATS)}")
    source, target = Path(source), Path(target)
    if target.resolve() == source.resolve() or source.resolve() in target.resolve().parents:
        raise ValueError(
            f"{target}: the output folder must not be {source} or inside it; give another one"
        )
    result = export_hf(source, target)
    print(f"exported       {source} -> {result.directory}")
    print(f"family         {result.family}")
    print(f"architecture   {result.architecture}")
    print(f"heads          {', '.join(result.heads) or '(none)'}")
    if result.skipped:
        print(f"not exported   {', '.join(result.skipped)} (no Hugging Face counterpart)")
    print(
        f"load with      transformers.{result.auto_class}.from_pretrained({str(target)!r}), "
        f"AutoTokenizer.from_pretrained({str(target)!r})"
    )
    return result
