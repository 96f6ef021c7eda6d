"""Start a multimodal model's text stream from a BERT folder (``init_from=<folder>``).

VisualBERT's encoder, ViLBERT's text stream and LXMERT's language layers are core
:class:`~ptm_core.encoders.TransformerEncoder` stacks (``WrapsTextEncoder.text_stack``),
so a BERT checkpoint fills them tensor for tensor; the image stream, co-attention,
cross-modal layers and every head start fresh. VisualBERT's tables have extra rows for the
regions (a visual position, visual segments): the folder fills the text rows, the visual
rows start fresh.

The captions are tokenised with the data's own ``vocab.txt``, so the folder's vocabulary
must be that file (the token table is indexed by its ids). A RoBERTa or XLM-R folder
(BPE/Unigram, no ``vocab.txt``) is refused in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ptm_core.checkpoints.init_report import InitReport, report_init
from ptm_core.encoders.transformer import TransformerEncoder

# Tables whose first rows are the text's (VisualBERT appends visual rows after them).
_TABLES = ("embeddings.position.weight", "embeddings.token_type.weight")
_SIZES = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size")


def init_text_stream(network: Any, folder: str | Path, vocab_path: str | Path) -> InitReport:
    """Copy a BERT folder's encoder into ``network``'s text stream; log loaded/fresh.

    Args:
        network: a VisualBERT, ViLBERT or LXMERT model (``text_stack``).
        folder: the ``init_from`` folder (a Hugging Face BERT folder or a ptm ``final/``).
        vocab_path: the ``vocab.txt`` the captions were tokenised with.

    Returns:
        The :class:`~ptm_core.checkpoints.init_report.InitReport` that was logged.

    Raises:
        ValueError: no ``vocab.txt`` in the folder (RoBERTa, XLM-R), another vocabulary
            than the captions', or sizes that differ from the text stream's (one line
            naming the file and the key).
    """
    path = Path(folder)
    own = path / "vocab.txt"
    if not own.is_file():
        raise ValueError(
            f"init_from={folder}: no vocab.txt; image-text captions are tokenised with the "
            "data's own vocab.txt, so the text stream starts only from a WordPiece (BERT) "
            "folder, not a RoBERTa/XLM-R BPE or Unigram one"
        )
    if (
        own.read_text(encoding="utf-8").split()
        != Path(vocab_path).read_text(encoding="utf-8").split()
    ):
        raise ValueError(
            f"{vocab_path}: the captions' vocabulary is not {own}'s, whose ids index the "
            f"folder's token table; put {own} in the data folder as vocab.txt and prepare it "
            "again"
        )
    source = TransformerEncoder.from_pretrained(path)
    stack: TransformerEncoder = network.text_stack
    for key in _SIZES:
        theirs, ours = getattr(source.config, key), getattr(stack.config, key)
        if theirs != ours:
            raise ValueError(
                f"{path / 'config.json'}: {key} is {theirs} but the model's text stream has "
                f"{ours}; build the model with the folder's sizes (model.{key}={theirs})"
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


__all__ = ["init_text_stream"]
