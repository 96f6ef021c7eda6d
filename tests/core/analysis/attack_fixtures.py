"""A generated sentiment task, a tiny classifier fine-tuned on it by ptm, a random Hugging
Face classifier and a hand-made word-vector table (for tests/core/analysis/test_word_attack.py)."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from ptm_core.data.vector_table import VectorTable
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.recipe import finetune
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

POSITIVE = ["good", "great", "excellent", "superb", "lovely"]
NEGATIVE = ["bad", "awful", "terrible", "poor", "dreadful"]
UNSEEN = ["fine", "nice", "weak", "dull"]
NOUNS = ["movie", "film", "story", "plot", "cast", "music", "ending", "acting"]
FILLERS = ["today", "overall", "honestly", "mostly", "really"]
TEMPLATES = [
    "the {noun} was {adj} {filler} .",
    "{filler} , the {noun} is {adj} .",
    "what a {adj} {noun} !",
    "i found the {noun} {adj} and the {noun2} {filler} .",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def sentence(rng: random.Random, adjective: str) -> str:
    template = rng.choice(TEMPLATES)
    return template.format(
        noun=rng.choice(NOUNS),
        noun2=rng.choice(NOUNS),
        adj=adjective,
        filler=rng.choice(FILLERS),
    )


def write_task(path: Path, n: int, seed: int) -> Path:
    """``n`` labelled sentences (``sentence<TAB>label``, pos/neg by the adjective)."""
    rng = random.Random(seed)
    lines = ["sentence\tlabel"]
    for i in range(n):
        label = "pos" if i % 2 == 0 else "neg"
        words = POSITIVE if label == "pos" else NEGATIVE
        lines.append(f"{sentence(rng, rng.choice(words))}\t{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_vocab(path: Path) -> Path:
    words = POSITIVE + NEGATIVE + UNSEEN + NOUNS + FILLERS
    words += ["the", "was", "is", "what", "a", "i", "found", "and", ".", ",", "!"]
    path.write_text("\n".join(SPECIALS + sorted(set(words))) + "\n", encoding="utf-8")
    return path


def finetuned_classifier(root: Path, steps: int = 120) -> Path:
    """A ptm ``final/`` fine-tuned on the generated task (about 100% right on its dev set)."""
    root.mkdir(parents=True, exist_ok=True)
    train = write_task(root / "train.tsv", 240, seed=1)
    dev = write_task(root / "dev.tsv", 40, seed=2)
    tokenizer = WordPieceTokenizer.from_vocab(write_vocab(root / "vocab.txt"))
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
    )
    spec = TaskSpec(
        name="sentiment",
        kind="classification",
        train=str(train),
        dev=str(dev),
        max_length=32,
        batch_size=16,
        eval_batch_size=32,
    )
    trainer = TrainerConfig(
        output_dir=str(root / "run"),
        max_steps=steps,
        learning_rate=3e-3,
        progress=False,
        device="cpu",
        save_every=10_000,
        log_every=1000,
    )
    return finetune(spec, encoder=encoder, tokenizer=tokenizer, trainer=trainer).encoder_dir


def _hf_folder(folder: Path, model_class: str, seed: int, **config: object) -> Path:
    """A random ``transformers`` BERT model of ``model_class`` with the task's vocabulary."""
    import transformers

    folder.mkdir(parents=True)
    vocab = write_vocab(folder.parent / f"{folder.name}-vocab.txt")
    torch.manual_seed(seed)
    settings = transformers.BertConfig(
        vocab_size=len(vocab.read_text().split()),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=64,
        **config,
    )
    getattr(transformers, model_class)(settings).save_pretrained(folder)
    transformers.BertTokenizer(str(vocab), do_lower_case=True).save_pretrained(folder)
    return folder


def hf_classifier(root: Path) -> Path:
    """A random ``BertForSequenceClassification`` folder (labels neg, pos)."""
    labels = {"num_labels": 2, "id2label": {0: "neg", 1: "pos"}, "label2id": {"neg": 0, "pos": 1}}
    return _hf_folder(root / "hf", "BertForSequenceClassification", 0, **labels)


def hf_masked_lm(root: Path) -> Path:
    """A random ``BertForMaskedLM`` folder."""
    return _hf_folder(root / "mlm", "BertForMaskedLM", 1)


def sentiment_table() -> VectorTable:
    """Word vectors whose evaluative adjectives share one direction, so a word's nearest
    neighbours mix both polarities, as antonyms do in word2vec (they share contexts)."""
    words = POSITIVE + NEGATIVE + UNSEEN + ["the", "movie"]
    g = torch.Generator().manual_seed(0)
    base = torch.randn(len(words), 16, generator=g)
    sentiment = torch.randn(16, generator=g)
    vectors = base * 0.2
    for i, word in enumerate(words):
        if word in POSITIVE + NEGATIVE + UNSEEN:
            vectors[i] += sentiment  # one "evaluative adjective" direction
    return VectorTable(words, vectors, "hand")
