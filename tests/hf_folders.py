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
