"""``ptm export --format hf FINAL_DIR OUT_DIR``: a ptm ``final/`` as a Hugging Face folder.

The conversion itself is :func:`ptm_core.checkpoints.hf.export.export_hf` for the core
families; XLM finals (written by ``ptm pretrain experiment=xlm_*``, recognised by their
``languages.json``), VisualBERT finals (``ptm pretrain experiment=visualbert_*``) and
LXMERT finals (``experiment=lxmert_*``) go through :func:`export_xlm`,
:func:`export_visualbert` and :func:`export_lxmert` here, because ptm-core does not import the
extensions. This module checks the command's arguments and prints what was written and how
to load it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text, check_output_directory
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import HEADS_FILE, HFExport, export_hf
from ptm_core.checkpoints.hf.knowledge_export import NOTE_FILE

FORMATS = ("hf",)
# Any one of these makes a folder loadable by AutoTokenizer.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)


def export(
    source: str | Path,
    target: str | Path,
    *,
    format: str = "hf",
    overwrite: bool = False,
    text_layers_only: bool = False,
) -> HFExport:
    """Export ``source`` to ``target`` in ``format`` and print a short summary.

    Args:
        source: a ``final/`` folder written by ``ptm pretrain`` or ``ptm finetune``.
        target: the folder to write: a new or empty one, or (with ``overwrite``) a folder
            ptm wrote before (it has ptm's marker); a user's folder is never replaced.
        format: ``"hf"`` (Hugging Face ``transformers``), the only format for now.
        overwrite: replace ``target`` when it holds an earlier ptm output.
        text_layers_only: ERNIE-THU only: export its text layers without the knowledge
            layers (refused without it), with a note of what was left out.

    Returns:
        What was written (:class:`~ptm_core.checkpoints.hf.export.HFExport`).

    Raises:
        ValueError: an unknown format, ``target`` inside ``source``, a ``target`` that may
            not be replaced (:class:`~ptm_core.atomic.OutputExistsError`), or a folder that
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
    check_output_directory(target, kind="export", overwrite=overwrite, option="--overwrite")
    if is_xlm_final(source):
        result = export_xlm(source, target)
    elif is_visualbert_final(source):
        result = export_visualbert(source, target)
    elif is_lxmert_final(source):
        result = export_lxmert(source, target)
    else:
        result = export_hf(source, target, text_layers_only=text_layers_only)
    print(f"exported       {source} -> {result.directory}")
    print(f"family         {result.family}")
    print(f"architecture   {result.architecture}")
    print(f"heads          {', '.join(result.heads) or '(none)'}")
    if result.family == "xlm":
        print("note           XLM pre-training saves the encoder only: exported as XLMModel")
    if result.skipped:
        print(f"not exported   {', '.join(result.skipped)} (no Hugging Face counterpart)")
    if text_layers_only:
        print(f"note           {result.directory / NOTE_FILE} lists what was left out")
    model_line = f"transformers.{result.auto_class}.from_pretrained({str(target)!r})"
    if any((Path(result.directory) / name).is_file() for name in TOKENIZER_FILES):
        print(f"load with      {model_line}, AutoTokenizer.from_pretrained({str(target)!r})")
    else:
        print(f"load with      {model_line}")
        print(
            f"tokenizer      none: {source} holds no tokenizer, so none was exported and "
            f"AutoTokenizer cannot load {target}; save the tokenizer the model was trained "
            "with into it (tokenizer.save_pretrained)"
        )
    return result


def _read_config(source: Path) -> dict[str, Any]:
    config = source / "config.json"
    if not config.is_file():
        return {}
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def is_xlm_final(source: Path) -> bool:
    """Whether ``source`` is an XLM folder (``XLMEncoder.save_pretrained`` + tokenizer)."""
    return str(_read_config(source).get("ptm_format", "")).startswith("ptm-xlm")


def is_visualbert_final(source: Path) -> bool:
    """Whether ``source`` is a VisualBERT ``final/`` of ``ptm pretrain`` (multimodal)."""
    return _read_config(source).get("architecture") == "visualbert"


def is_lxmert_final(source: Path) -> bool:
    """Whether ``source`` is an LXMERT ``final/`` of ``ptm pretrain`` (multimodal)."""
    return _read_config(source).get("architecture") == "lxmert"


def export_lxmert(source: Path, target: Path) -> HFExport:
    """Write an LXMERT ``final/`` as a transformers LXMERT folder with its tokenizer.

    With the ``lm`` and ``itm`` heads the folder is an ``LxmertForPreTraining``
    (``AutoModelForPreTraining``, with the object and QA heads when trained); otherwise an
    ``LxmertModel``.

    Raises:
        CheckpointError: a model Hugging Face cannot express, or weights that do not fit.
    """
    from ptm_core.checkpoints.hf.tokenizer_files import write_hf_tokenizer_files
    from ptm_multimodal.lxmert_hf import save_hf_lxmert
    from ptm_multimodal.lxmert_loading import load_lxmert

    wrapped, tokenizer = load_lxmert(source)
    try:
        architecture = save_hf_lxmert(wrapped, target)
    except CheckpointError as exc:
        raise CheckpointError(f"{source / 'config.json'}: {exc}") from exc
    positions = int(getattr(wrapped.encoder, "hyperparameters", {}).get("max_positions", 512))
    write_hf_tokenizer_files(tokenizer, target, model_max_length=positions)
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


def export_visualbert(source: Path, target: Path) -> HFExport:
    """Write a VisualBERT ``final/`` as a transformers VisualBERT folder with its tokenizer.

    With both the ``mlm`` and ``itm`` objectives the folder is a
    ``VisualBertForPreTraining`` (``AutoModelForPreTraining``); otherwise a
    ``VisualBertModel``. Other objectives (masked regions, alignment) have no Hugging Face
    counterpart and are listed as skipped. The tokenizer is the WordPiece one, written by
    :func:`~ptm_core.checkpoints.hf.tokenizer_files.write_hf_tokenizer_files`.

    Args:
        source: a ``final/`` with ``config.json`` (``architecture: visualbert``),
            ``model.safetensors`` and the WordPiece tokenizer.
        target: the folder to write (replaced as a whole).

    Raises:
        CheckpointError: ``box_position: true`` (no Hugging Face counterpart) or weights
            that do not fit.
    """
    from ptm_core.checkpoints.hf.tokenizer_files import write_hf_tokenizer_files
    from ptm_multimodal.loading import load_multimodal
    from ptm_multimodal.visualbert_hf_export import save_hf_visualbert

    wrapped, tokenizer = load_multimodal(source)
    try:
        architecture = save_hf_visualbert(wrapped, target)
    except CheckpointError as exc:
        raise CheckpointError(f"{source / 'config.json'}: {exc}") from exc
    write_hf_tokenizer_files(
        tokenizer, target, model_max_length=int(getattr(wrapped.encoder, "text_positions", 512))
    )
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


def _xlm_tokenizer_files(tokenizer: Any, target: Path) -> None:
    """``tokenizer.json`` + ``tokenizer_config.json`` for ``PreTrainedTokenizerFast``.

    ptm's :meth:`~ptm_multilingual.tokenizer.SharedBPETokenizer.encode` adds no special
    tokens, so the written ``tokenizer.json`` has no post-processor: ``AutoTokenizer`` gives
    the same ids with its default ``add_special_tokens=True``.
    """
    state = json.loads(tokenizer.tokenizer.to_str())
    state["post_processor"] = None
    state["truncation"] = None
    state["padding"] = None
    atomic_write_text(target / "tokenizer.json", json.dumps(state, ensure_ascii=False))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "cls_token": "<s>",
        "sep_token": "</s>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
        "languages": list(tokenizer.languages),
    }
    atomic_write_text(target / "tokenizer_config.json", json.dumps(config, indent=2) + "\n")


def export_xlm(source: Path, target: Path) -> HFExport:
    """Write an XLM ``final/`` as a ``transformers`` XLM folder with its tokenizer.

    A ``final/`` from XLM pre-training keeps its MLM output bias in ``heads.safetensors``
    (the output weight is the tied token table), and is written as an
    ``XLMWithLMHeadModel``: the same MLM logits as ptm. A folder without it (an encoder
    saved alone, or pre-trained before the heads were saved) is written as an ``XLMModel``:
    hidden states only. Language ids keep ptm's numbering (``languages.json`` order, also
    written as ``lang2id`` in ``config.json``).

    Args:
        source: folder with ``config.json`` (``ptm_format`` ``ptm-xlm-1``),
            ``model.safetensors``, ``tokenizer.json`` and ``languages.json`` (and
            ``heads.safetensors`` for the MLM head).
        target: the folder to write (replaced as a whole).

    Returns:
        What was written.

    Raises:
        CheckpointError: the folder lacks the tokenizer, or the encoder has a shape XLM
            cannot express.
    """
    from ptm_multilingual.hf_xlm import save_hf_xlm
    from ptm_multilingual.model import XLMEncoder
    from ptm_multilingual.tokenizer import SharedBPETokenizer

    encoder = XLMEncoder.from_pretrained(source)
    try:
        tokenizer = SharedBPETokenizer.from_directory(source)
    except FileNotFoundError as exc:
        raise CheckpointError(f"{source}: no XLM tokenizer to export ({exc})") from exc
    vocab = tokenizer.vocab_info
    if vocab.vocab_size != encoder.vocab_size:
        raise CheckpointError(
            f"{source / 'tokenizer.json'}: {vocab.vocab_size} tokens but the model's "
            f"vocab_size is {encoder.vocab_size}; export the folder they were saved in"
        )
    model, heads = _xlm_with_head(source, encoder)
    try:
        save_hf_xlm(
            model,
            target,
            bos_index=vocab.cls_id,
            eos_index=vocab.sep_id,
            pad_index=vocab.pad_id,
            unk_index=vocab.unk_id,
            mask_index=vocab.mask_id,
        )
    except ValueError as exc:
        raise CheckpointError(f"{source / 'config.json'}: {exc}") from exc
    _xlm_tokenizer_files(tokenizer, target)
    return HFExport(
        directory=target,
        family="xlm",
        architecture="XLMWithLMHeadModel" if heads else "XLMModel",
        auto_class="AutoModelForMaskedLM" if heads else "AutoModel",
        heads=heads,
        skipped=[],
    )


def _xlm_with_head(source: Path, encoder: Any) -> tuple[Any, list[str]]:
    """``(XLMForMaskedLM with the saved output bias, [objective])`` when ``source`` has an
    XLM MLM head in ``heads.safetensors``; ``(encoder, [])`` when it has none."""
    import torch
    from safetensors.torch import load_file

    from ptm_multilingual.model import XLMForMaskedLM

    path = source / HEADS_FILE
    if not path.is_file():
        return encoder, []
    try:
        state = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for a broken file
        raise CheckpointError(
            f"{path}: cannot read ({exc}); copy it again from the run's final/, or remove it "
            "to export the encoder alone as an XLMModel"
        ) from exc
    biases = {k: v for k, v in state.items() if k.endswith(".head.proj.bias")}
    if not biases:
        return encoder, []
    if len(biases) > 1:
        raise CheckpointError(
            f"{path}: {len(biases)} XLM output layers ({', '.join(sorted(biases))}); "
            "transformers' XLMWithLMHeadModel has one"
        )
    ((name, bias),) = biases.items()
    if tuple(bias.shape) != (encoder.vocab_size,):
        raise CheckpointError(
            f"{path}: {name} has shape {tuple(bias.shape)}, the model's vocabulary needs "
            f"({encoder.vocab_size},); the heads belong to another checkpoint"
        )
    model = XLMForMaskedLM(encoder)
    with torch.no_grad():
        model.head.proj.bias.copy_(bias)
    return model, [name.split(".")[1]]
