"""Hugging Face model folders of odd sizes, built in a test (no downloads).

``roberta_folder`` writes a random ``RobertaForMaskedLM`` / ``XLMRobertaForMaskedLM`` (or
any ``transformers`` class of that model type) with a tokenizer trained by `tokenizers` on
the given lines: byte-level BPE (RoBERTa) or Unigram (XLM-R), re-saved through
``AutoTokenizer`` so the folder holds what a released checkpoint holds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers
from tokenizers import ByteLevelBPETokenizer, SentencePieceUnigramTokenizer

WORDS = ["Zürich", "café", "東京", "naïve", "river", "🤖", "garden", "北京", "déjà", "stone"]
CONFIGS = {"roberta": transformers.RobertaConfig, "xlm-roberta": transformers.XLMRobertaConfig}
MASKED_LM = {
    "roberta": transformers.RobertaForMaskedLM,
    "xlm-roberta": transformers.XLMRobertaForMaskedLM,
}
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def roberta_folder(
    root: Path,
    model_type: str = "roberta",
    *,
    lines: Sequence[str] | None = None,
    model_class: Any = None,
    **config: Any,
) -> Path:
    """``<root>/<model_type>``: a random model of odd sizes and its tokenizer.

    Args:
        root: where the folder is made.
        model_type: ``roberta`` (byte-level BPE) or ``xlm-roberta`` (Unigram).
        lines: text the tokenizer is trained on (default: lines of :data:`WORDS`).
        model_class: the ``transformers`` class saved (default its ``...ForMaskedLM``).
        config: overrides of the config (``hidden_size``, ``num_hidden_layers``, ...).
    """
    folder = root / model_type
    folder.mkdir(parents=True)
    text = list(lines or [" ".join(random.Random(i).sample(WORDS, 6)) for i in range(50)])
    if model_type == "roberta":
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(text, vocab_size=300, special_tokens=SPECIALS)
        bpe.save_model(str(folder))
        size = bpe.get_vocab_size()
    else:
        unigram = SentencePieceUnigramTokenizer()
        unigram.train_from_iterator(text, vocab_size=120, special_tokens=SPECIALS[:4])
        unigram.add_special_tokens(["<mask>"])
        unigram.save(str(root / "unigram.json"))
        tokenizer = transformers.XLMRobertaTokenizerFast(tokenizer_file=str(root / "unigram.json"))
        tokenizer.save_pretrained(folder)
        size = len(tokenizer)
    settings = {
        "vocab_size": size,
        "hidden_size": 24,
        "num_hidden_layers": 2,
        "num_attention_heads": 3,
        "intermediate_size": 37,
        "max_position_embeddings": 66,
        "type_vocab_size": 1,
        "layer_norm_eps": 1e-5,
        **config,
    }
    torch.manual_seed(0)
    (model_class or MASKED_LM[model_type])(CONFIGS[model_type](**settings)).save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(folder).save_pretrained(folder)
    return folder


SAMPLE_VOCAB = (
    Path(__file__).resolve().parents[1] / "data_specs" / "text_corpus" / "sample-vocab.txt"
)


def sample_wordpiece(size: int = 1200) -> transformers.BertTokenizer:
    """A lower-casing ``BertTokenizer`` on the sample vocabulary's first ``size`` pieces
    (not the data preset's whole vocabulary, so a run that ignored the folder's shows)."""
    lines = SAMPLE_VOCAB.read_text(encoding="utf-8").splitlines()[:size]
    return transformers.BertTokenizer(
        vocab={token: i for i, token in enumerate(lines)}, do_lower_case=True
    )


def off_init(model: Any, seed: int = 3) -> Any:
    """``model`` with every tensor moved off its init (zero biases, unit norms), so a
    tensor that is lost or left fresh on the way shows in the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=g))
    return model


def saved(model: Any, directory: Path, tokenizer: Any = None) -> Any:
    """:func:`off_init` ``model`` saved (with ``tokenizer``) to ``directory``; in eval mode."""
    off_init(model).save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return model.eval()


def hf_logits(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """A transformers model's output as one tensor: QA's start/end stacked last, else
    the logits, else the last hidden state."""
    with torch.no_grad():
        out = model(**inputs)
    if hasattr(out, "start_logits"):
        return torch.stack([out.start_logits, out.end_logits], dim=-1)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def assert_close_on_tokens(
    ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor, tol: float = 1e-5
) -> None:
    """Within ``tol`` where the token is real (padding outputs are nobody's business)."""
    if ours.dim() > 2 or ours.shape == mask.shape:
        ours, theirs = ours[mask.bool()], theirs[mask.bool()]
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() <= tol
