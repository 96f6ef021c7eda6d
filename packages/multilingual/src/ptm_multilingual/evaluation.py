"""Cross-lingual evaluation: parallel-sentence retrieval and zero-shot classifier transfer."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.data import pad_examples
from ptm_core.progress import batch_starts
from ptm_multilingual.model import XLMEncoder, encode_mean
from ptm_multilingual.tokenizer import SharedBPETokenizer


def embed_sentences(
    encoder: XLMEncoder,
    tokenizer: SharedBPETokenizer,
    sentences: Sequence[str],
    lang: str,
    *,
    batch_size: int = 64,
    max_length: int = 128,
) -> Tensor:
    """Mean-pooled last-layer states of ``<s> sentence </s>`` with ``lang``'s id.

    Returns:
        ``(N, D)`` float tensor on the CPU.
    """
    vocab = tokenizer.vocab_info
    lang_id = tokenizer.lang_id(lang)
    device = next(encoder.parameters()).device
    out: list[Tensor] = []
    for start in batch_starts(len(sentences), batch_size, f"encode {lang}", "sentence"):
        ids = tokenizer.encode_batch(sentences[start : start + batch_size])
        rows = [{"input_ids": [vocab.cls_id, *s[: max_length - 2], vocab.sep_id]} for s in ids]
        batch = pad_examples(rows, vocab.pad_id)
        langs = torch.full_like(batch["input_ids"], lang_id)
        pooled = encode_mean(
            encoder,
            batch["input_ids"].to(device),
            batch["attention_mask"].to(device),
            langs.to(device),
        )
        out.append(pooled.float().cpu())
    return torch.cat(out)


def retrieval_accuracy(
    encoder: XLMEncoder,
    tokenizer: SharedBPETokenizer,
    pairs: Sequence[tuple[str, str]],
    source_lang: str,
    target_lang: str,
    *,
    center: bool = True,
) -> dict[str, float]:
    """Parallel-sentence retrieval in both directions.

    For every source sentence, is its translation the target with the highest cosine
    similarity of mean-pooled states (and vice versa)? Chance is ``1 / len(pairs)``.
    With ``center`` each language's mean vector is subtracted first, which removes the
    language identity shared by all sentences of a side (Libovický et al., 2020).

    Returns:
        ``{"<src>-><tgt>": acc, "<tgt>-><src>": acc, "mean": average}``.
    """
    if len(pairs) < 2:
        raise ValueError("retrieval needs at least 2 sentence pairs")
    src = embed_sentences(encoder, tokenizer, [p[0] for p in pairs], source_lang)
    tgt = embed_sentences(encoder, tokenizer, [p[1] for p in pairs], target_lang)
    if center:
        src, tgt = src - src.mean(0), tgt - tgt.mean(0)
    src, tgt = F.normalize(src, dim=-1), F.normalize(tgt, dim=-1)
    sim = src @ tgt.T  # (N, N) cosine
    gold = torch.arange(len(pairs))
    forward = (sim.argmax(dim=1) == gold).float().mean().item()
    backward = (sim.argmax(dim=0) == gold).float().mean().item()
    return {
        f"{source_lang}->{target_lang}": forward,
        f"{target_lang}->{source_lang}": backward,
        "mean": (forward + backward) / 2,
    }


def average_retrieval(results: Mapping[str, Mapping[str, float]]) -> float:
    """One retrieval score over several language pairs: the mean of every direction.

    Each pair contributes its two directions (its ``"mean"`` entry is their average and is
    not counted again), so every pair weighs the same. A direction without a finite score
    is left out rather than counted as zero.

    Args:
        results: pair name (``"en-fr"``) -> what :func:`retrieval_accuracy` returned.

    Returns:
        The average accuracy, in ``[0, 1]``.

    Raises:
        ValueError: no pair has a finite score.
    """
    values = [
        float(value)
        for scores in results.values()
        for direction, value in scores.items()
        if direction != "mean" and math.isfinite(value)
    ]
    if not values:
        raise ValueError(f"no retrieval scores to average (pairs: {sorted(results) or 'none'})")
    return sum(values) / len(values)


def zero_shot_transfer(
    encoder: XLMEncoder,
    tokenizer: SharedBPETokenizer,
    train: tuple[Sequence[str], Sequence[str], str],
    test: tuple[Sequence[str], Sequence[str], str],
    *,
    epochs: int = 200,
    learning_rate: float = 0.1,
    seed: int = 0,
) -> dict[str, float]:
    """Train a sentence classifier in one language, test it in another (zero-shot).

    The encoder is frozen; a logistic-regression layer is trained on the mean-pooled states
    of ``train``'s sentences (full-batch Adam, features standardised with the training
    statistics) and applied unchanged to ``test``'s language (Conneau et al., 2018, XNLI
    protocol at toy scale).

    Args:
        train: ``(sentences, labels, lang)``.
        test: ``(sentences, labels, lang)``; labels must be among the training labels.

    Returns:
        ``{"train_accuracy", "test_accuracy", "chance"}`` (chance = majority-class share of
        the test set).
    """
    train_x = embed_sentences(encoder, tokenizer, train[0], train[2])
    test_x = embed_sentences(encoder, tokenizer, test[0], test[2])
    names = sorted(set(train[1]))
    unknown = sorted(set(test[1]) - set(names))
    if unknown:
        raise ValueError(f"test labels {unknown} never occur in training labels {names}")
    train_y = torch.tensor([names.index(y) for y in train[1]])
    test_y = torch.tensor([names.index(y) for y in test[1]])
    mean, std = train_x.mean(0), train_x.std(0).clamp(min=1e-6)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    generator = torch.Generator().manual_seed(seed)
    weight = (
        torch.randn(train_x.shape[1], len(names), generator=generator) * 0.01
    ).requires_grad_()
    bias = torch.zeros(len(names), requires_grad=True)
    optimizer = torch.optim.Adam([weight, bias], lr=learning_rate)
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(train_x @ weight + bias, train_y) + 1e-3 * weight.pow(2).sum()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        train_acc = ((train_x @ weight + bias).argmax(1) == train_y).float().mean().item()
        test_acc = ((test_x @ weight + bias).argmax(1) == test_y).float().mean().item()
    chance = test_y.bincount().max().item() / len(test_y)
    return {"train_accuracy": train_acc, "test_accuracy": test_acc, "chance": chance}
