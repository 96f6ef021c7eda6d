"""Hugging Face export of XLM ``final/`` folders: the ``xlm`` family's ``export`` hook
(``ptm export --format hf``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import HEADS_FILE, HFExport


def _refuse_options(source: Path, options: dict[str, Any]) -> None:
    if options.get("text_layers_only"):
        raise CheckpointError(
            f"{source}: --text-layers-only is for ERNIE-THU folders (their text layers without "
            "the knowledge layers); this folder exports whole: leave the flag out"
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


def export_xlm(source: Path, target: Path, **options: Any) -> HFExport:
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
    _refuse_options(source, options)
    from ptm_multilingual.hf_xlm import save_hf_xlm
    from ptm_multilingual.model import XLMEncoder
    from ptm_multilingual.tokenizer import SharedBPETokenizer

    encoder = XLMEncoder.from_pretrained(source)
    hf_type = getattr(encoder.encoder.config, "hf_model_type", None)
    if hf_type is not None:
        # transformers' XLM classes have neither XLM-R's token-type vector nor its MLM
        # transform, and XLM-R's classes have no language table: no class holds this model.
        raise CheckpointError(
            f"{source / 'config.json'}: this XLM run started from an {hf_type} folder (its "
            "text layers keep XLM-R's layout) and also learnt a language table; no "
            "transformers class holds both, so it is not exported. Fine-tune and serve it "
            "with ptm (ptm finetune model=<folder>, ptm predict)"
        )
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
