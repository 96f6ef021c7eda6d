"""Hugging Face export of VisualBERT and LXMERT ``final/`` folders: the multimodal families'
``export`` hooks (``ptm export --format hf``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import HFExport


def _refuse_options(source: Path, options: dict[str, Any]) -> None:
    if options.get("text_layers_only"):
        raise CheckpointError(
            f"{source}: --text-layers-only is for ERNIE-THU folders (their text layers without "
            "the knowledge layers); this folder exports whole: leave the flag out"
        )


def export_lxmert(source: Path, target: Path, **options: Any) -> HFExport:
    """Write an LXMERT ``final/`` as a transformers LXMERT folder with its tokenizer.

    With the ``lm`` and ``itm`` heads the folder is an ``LxmertForPreTraining``
    (``AutoModelForPreTraining``, with the object and QA heads when trained); otherwise an
    ``LxmertModel``.

    Raises:
        CheckpointError: a model Hugging Face cannot express, or weights that do not fit.
    """
    _refuse_options(source, options)
    from ptm_multimodal.lxmert_hf import save_hf_lxmert
    from ptm_multimodal.lxmert_loading import load_lxmert

    wrapped, tokenizer = load_lxmert(source)
    try:
        architecture = save_hf_lxmert(wrapped, target)
    except CheckpointError as exc:
        raise CheckpointError(f"{source / 'config.json'}: {exc}") from exc
    positions = int(getattr(wrapped.encoder, "hyperparameters", {}).get("max_positions", 512))
    _write_tokenizer(tokenizer, target, positions)
    names = [name for name, _ in wrapped.objectives]
    pretraining = architecture == "LxmertForPreTraining"
    return HFExport(
        directory=target,
        family="lxmert",
        architecture=architecture,
        auto_class="AutoModelForPreTraining" if pretraining else "AutoModel",
        heads=names if pretraining else [],
        skipped=[] if pretraining else names,
    )


def export_visualbert(source: Path, target: Path, **options: Any) -> HFExport:
    """Write a VisualBERT ``final/`` as a transformers VisualBERT folder with its tokenizer.

    With both the ``mlm`` and ``itm`` objectives the folder is a
    ``VisualBertForPreTraining`` (``AutoModelForPreTraining``); otherwise a
    ``VisualBertModel``. Other objectives (masked regions, alignment) have no Hugging Face
    counterpart and are listed as skipped. The tokenizer is the WordPiece one, written by
    :func:`~ptm_core.checkpoints.hf.tokenizer_files.write_hf_tokenizer_files`; a RoBERTa
    folder's BPE tokenizer (a text stream started from one) is written as it is.

    Args:
        source: a ``final/`` with ``config.json`` (``architecture: visualbert``),
            ``model.safetensors`` and the WordPiece tokenizer.
        target: the folder to write (replaced as a whole).

    Raises:
        CheckpointError: ``box_position: true`` (no Hugging Face counterpart) or weights
            that do not fit.
    """
    _refuse_options(source, options)
    from ptm_multimodal.loading import load_multimodal
    from ptm_multimodal.visualbert_hf_export import save_hf_visualbert

    wrapped, tokenizer = load_multimodal(source)
    try:
        architecture = save_hf_visualbert(wrapped, target)
    except CheckpointError as exc:
        raise CheckpointError(f"{source / 'config.json'}: {exc}") from exc
    _write_tokenizer(tokenizer, target, int(getattr(wrapped.encoder, "text_positions", 512)))
    names = [name for name, _ in wrapped.objectives]
    exported = [n for n in names if n in ("mlm", "itm")]
    pretraining = architecture == "VisualBertForPreTraining"
    return HFExport(
        directory=target,
        family="visualbert",
        architecture=architecture,
        auto_class="AutoModelForPreTraining" if pretraining else "AutoModel",
        heads=exported if pretraining else [n for n in exported if n == "itm"],
        skipped=[n for n in names if n not in exported]
        + ([] if pretraining else [n for n in exported if n == "mlm"]),
    )


def _write_tokenizer(tokenizer: Any, target: Path, max_positions: int) -> None:
    """The captions' tokenizer as ``AutoTokenizer`` reads it: WordPiece files written for
    BERT's classes, a Hugging Face ``tokenizer.json`` (BPE, Unigram) saved as it is."""
    from ptm_core.checkpoints.hf.tokenizer_files import write_hf_tokenizer_files
    from ptm_core.tokenization import WordPieceTokenizer

    if isinstance(tokenizer, WordPieceTokenizer):
        write_hf_tokenizer_files(tokenizer, target, model_max_length=max_positions)
    else:
        tokenizer.save(target)
