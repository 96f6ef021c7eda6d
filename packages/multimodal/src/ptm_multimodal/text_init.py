"""Start a multimodal model's text stream from a BERT or RoBERTa folder (``init_from=<folder>``).

VisualBERT's encoder, ViLBERT's text stream and LXMERT's language layers are core
:class:`~ptm_core.encoders.TransformerEncoder` stacks (``WrapsTextEncoder.text_stack``),
so a BERT or RoBERTa checkpoint fills them tensor for tensor; the image stream,
co-attention, cross-modal layers and every head start fresh. VisualBERT's tables have extra
rows for the regions (a visual position, visual segments): the folder fills the text rows
(RoBERTa's one token type fills the text segment), the visual rows start fresh.

The captions are tokenised with the data folder's own tokenizer, so it must be the
folder's (the token table is indexed by its ids): a BERT folder's ``vocab.txt``, or a
RoBERTa/XLM-R folder's ``tokenizer.json`` copied into the data folder in place of
``vocab.txt`` (:mod:`ptm_multimodal.caption_tokenizer`). Anything else is refused in one
line that says which file to copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from ptm_core.checkpoints.init_report import InitReport, report_init
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_multimodal.caption_tokenizer import TOKENIZER_JSON, VOCAB

# Tables whose first rows are the text's (VisualBERT appends visual rows after them).
_TABLES = ("embeddings.position.weight", "embeddings.token_type.weight")
_SIZES = (
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "vocab_size",
    "layer_norm_eps",
)


def init_text_stream(network: Any, folder: str | Path, vocab_path: str | Path) -> InitReport:
    """Copy a BERT/RoBERTa folder's encoder into ``network``'s text stream; log loaded/fresh.

    Args:
        network: a VisualBERT, ViLBERT or LXMERT model (``text_stack``).
        folder: the ``init_from`` folder (a Hugging Face BERT/RoBERTa/XLM-R folder or a ptm
            ``final/``).
        vocab_path: the captions' ``vocab.txt`` or ``tokenizer.json``.

    Returns:
        The :class:`~ptm_core.checkpoints.init_report.InitReport` that was logged.

    Raises:
        ValueError: the captions' tokenizer is not the folder's, or sizes that differ from
            the text stream's (one line naming the file and the key).
    """
    path = Path(folder)
    _check_same_tokenizer(path, Path(vocab_path))
    source = TransformerEncoder.from_pretrained(path)
    stack: TransformerEncoder = network.text_stack
    for key in _SIZES:
        theirs, ours = getattr(source.config, key), getattr(stack.config, key)
        if theirs != ours:
            raise ValueError(
                f"{path / 'config.json'}: {key} is {theirs} but the model's text stream has "
                f"{ours}; build the model with the folder's sizes (++model.{key}={theirs})"
            )
    theirs_state = source.state_dict()
    loaded: list[str] = []
    with torch.no_grad():
        for name, tensor in stack.state_dict().items():
            found = theirs_state.get(name)
            if found is None:
                continue
            if name in _TABLES and found.shape[1:] == tensor.shape[1:]:
                rows = min(found.shape[0], tensor.shape[0])
                tensor[:rows].copy_(found[:rows])
            elif found.shape == tensor.shape:
                tensor.copy_(found)
            else:
                raise ValueError(
                    f"{path}: tensor {name!r} has shape {tuple(found.shape)} but the model's "
                    f"text stream needs {tuple(tensor.shape)}; build it with the folder's sizes"
                )
            loaded.append(name)
    prefix = next(n for n, m in network.named_modules() if m is stack)
    return report_init(network, path, [f"{prefix}.{n}" for n in loaded], what="init_from")


def _check_same_tokenizer(folder: Path, captions: Path) -> None:
    """The captions' tokenizer file must be the folder's (same pieces, same ids)."""
    own = next((folder / n for n in (VOCAB, TOKENIZER_JSON) if (folder / n).is_file()), None)
    if own is None:
        raise ValueError(
            f"init_from={folder}: no {VOCAB} or {TOKENIZER_JSON}; the text stream starts from "
            "a folder with the tokenizer its token table is indexed by"
        )
    if captions.name == VOCAB and own.name == VOCAB:
        same = own.read_text(encoding="utf-8").split() == captions.read_text("utf-8").split()
    elif captions.name == TOKENIZER_JSON and (folder / TOKENIZER_JSON).is_file():
        own = folder / TOKENIZER_JSON
        same = Tokenizer.from_file(str(own)).get_vocab() == (
            Tokenizer.from_file(str(captions)).get_vocab()
        )
    else:
        same = False
    if not same:
        raise ValueError(
            f"{captions}: the captions' tokenizer is not {own}, whose ids index the folder's "
            f"token table; copy {own} into the data folder (in place of {captions.name}) and "
            "prepare it again"
        )


__all__ = ["init_text_stream"]
