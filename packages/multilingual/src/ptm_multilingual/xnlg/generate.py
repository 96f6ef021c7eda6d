"""Generate with XNLG in a chosen language and score it (stage-2 check and fine-tuning)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ptm_multilingual.tokenizer import SharedBPETokenizer
from ptm_multilingual.xnlg.metrics import generation_scores
from ptm_multilingual.xnlg.model import XNLGModel


def encode_sources(
    tokenizer: SharedBPETokenizer, texts: Sequence[str], lang: str, max_length: int
) -> dict[str, torch.Tensor]:
    """``[CLS] text [SEP]`` rows (truncated to ``max_length``), right-padded, with their
    source-language ids: ``input_ids``, ``attention_mask``, ``langs`` ``(B, S)``."""
    vocab = tokenizer.vocab_info
    rows = [
        [vocab.cls_id, *ids[: max_length - 2], vocab.sep_id]
        for ids in tokenizer.encode_batch(list(texts))
    ]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), vocab.pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    langs = torch.full_like(ids, tokenizer.lang_id(lang))
    return {"input_ids": ids, "attention_mask": mask, "langs": langs}


def generate_texts(
    model: XNLGModel,
    tokenizer: SharedBPETokenizer,
    sources: Sequence[str],
    source_lang: str,
    target_lang: str,
    *,
    max_source_length: int = 64,
    max_length: int = 32,
    num_beams: int = 1,
    batch_size: int = 32,
) -> list[str]:
    """Generate one text in ``target_lang`` per source (special tokens removed)."""
    vocab = tokenizer.vocab_info
    device = next(model.parameters()).device
    specials = set(vocab.special_ids)
    texts: list[str] = []
    for start in range(0, len(sources), batch_size):
        batch = encode_sources(
            tokenizer, sources[start : start + batch_size], source_lang, max_source_length
        )
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model.generate(
            batch["input_ids"],
            batch["attention_mask"],
            batch["langs"],
            target_lang,
            max_length=max_length,
            num_beams=num_beams,
        )
        texts.extend(tokenizer.decode([t for t in out if t not in specials]) for out in outputs)
    return texts


def score_generation(
    model: XNLGModel,
    tokenizer: SharedBPETokenizer,
    pairs: Sequence[tuple[str, str]],
    source_lang: str,
    target_lang: str,
    *,
    max_source_length: int = 64,
    max_length: int = 32,
    num_beams: int = 1,
    batch_size: int = 32,
    bleu_tokenize: str = "13a",
    bleu_max_order: int = 4,
) -> tuple[dict[str, float], list[str]]:
    """Generate for every ``(source, reference)`` pair and score against the references.

    Returns:
        The scores of :func:`~ptm_multilingual.xnlg.metrics.generation_scores` and the
        generated texts.
    """
    hypotheses = generate_texts(
        model,
        tokenizer,
        [s for s, _ in pairs],
        source_lang,
        target_lang,
        max_source_length=max_source_length,
        max_length=max_length,
        num_beams=num_beams,
        batch_size=batch_size,
    )
    references = [r for _, r in pairs]
    scores = generation_scores(
        hypotheses, references, bleu_tokenize=bleu_tokenize, bleu_max_order=bleu_max_order
    )
    return scores, hypotheses


__all__ = ["encode_sources", "generate_texts", "score_generation"]
