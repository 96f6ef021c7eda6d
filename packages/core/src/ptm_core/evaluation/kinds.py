"""The evaluations of the model kinds ptm-core owns, registered on import.

Text encoders (masked LM; XLNet's permutation LM), encoder-decoders (BART, T5, MASS:
the decoder's denoising loss and token accuracy) and fine-tuned task models
(``task.json``). Each scores a model directory, or with ``random_init=True`` the same
architecture from random init seeded by ``seed``. Heavy imports happen inside the scoring functions.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ptm_core import model_kinds
from ptm_core.evaluation.files import (
    ENCODER_SHAPE_KEYS,
    read_json_object,
    require_file,
)
from ptm_core.evaluation.registry import Evaluation, register_evaluation

SEQ2SEQ_SHAPE_KEYS = ("vocab_size", "hidden_size", "encoder_layers", "decoder_layers", "num_heads")


def reinitialise(module: Any, seed: int) -> None:
    """The same architecture from random init (BERT's initialisation, seeded)."""
    import torch

    from ptm_core.modules import init_bert_weights
    from ptm_core.seeding import derive_seed

    torch.manual_seed(derive_seed(seed, "baseline"))
    init_bert_weights(module)


def score_masked_lm(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """MLM accuracy and perplexity of a ``final/`` directory (or of its random init)."""
    from ptm_core.evaluation.masked_lm import evaluate_masked_lm, load_masked_lm

    assert corpus is not None  # text_corpus: the flow passes the default
    encoder, objective, tokenizer = load_masked_lm(
        model_dir, random_init_seed=seed if random_init else None
    )
    return evaluate_masked_lm(encoder, objective, tokenizer, corpus, seed=seed).to_dict()


def score_permutation_lm(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Permutation-LM accuracy and perplexity of an XLNet ``final/`` directory."""
    from ptm_core.evaluation.permutation_lm import evaluate_permutation_lm, load_permutation_lm

    assert corpus is not None
    encoder, objective, tokenizer = load_permutation_lm(
        model_dir, random_init_seed=seed if random_init else None
    )
    return evaluate_permutation_lm(encoder, objective, tokenizer, corpus, seed=seed).to_dict()


def score_seq2seq(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Denoising loss and token accuracy of a BART/T5/MASS ``final/`` (or its random init),
    with the objective its run was trained with (else the architecture's usual one)."""
    from ptm_core.evaluation.seq2seq import evaluate_seq2seq, load_seq2seq, recorded_objective

    assert corpus is not None
    model, tokenizer = load_seq2seq(model_dir, random_init_seed=seed if random_init else None)
    objective = recorded_objective(model_dir)
    return evaluate_seq2seq(model, tokenizer, corpus, objective=objective, seed=seed).to_dict()


def score_finetuned(
    model_dir: str, corpus: str | None, seed: int = 0, random_init: bool = False
) -> dict[str, Any]:
    """The task metrics of a fine-tuned ``final/`` on ``corpus`` (default: its dev file).

    ``random_init``: the same architecture, head included, with random weights (chance).
    """
    import torch

    from ptm_core.finetune.recipe import evaluate_task, load_finetuned, read_task

    model, tokenizer, spec, record = load_finetuned(model_dir)
    if random_init:
        torch.manual_seed(seed)
        reinitialise(model, seed)
    labels = record.get("label_names") or None
    task_data = read_task(spec, "dev", tokenizer, labels, path=corpus)
    metrics, _ = evaluate_task(model, spec, task_data)
    return {**metrics, "_metric": spec.metric}


def check_encoder_with_heads(directory: Path) -> None:
    """A ptm encoder's ``config.json`` with its shape keys, and the heads it was trained with."""
    read_json_object(directory / "config.json", ENCODER_SHAPE_KEYS)
    require_file(
        directory / "heads.safetensors",
        "the language-model evaluation scores the pre-training heads; evaluate the run's "
        "final/ directory (config.json + heads.safetensors)",
    )


def check_seq2seq(directory: Path) -> None:
    """An encoder-decoder's ``config.json`` with its shape keys, and its tokenizer."""
    read_json_object(directory / "config.json", SEQ2SEQ_SHAPE_KEYS)
    require_file(directory / "model.safetensors", "copy the whole final/ directory of the run")
    if not (directory / "tokenizer").is_dir() and not (directory / "vocab.txt").exists():
        raise FileNotFoundError(
            f"{directory / 'tokenizer'}: missing; a seq2seq final/ holds its tokenizer there, "
            "copy the whole final/ directory of the run"
        )


MASKED_LM = register_evaluation(
    Evaluation(
        name="masked_lm",
        metric="accuracy",
        higher_is_better=True,
        description="masked-LM on seeded masks (15%, 80/10/10)",
        score=score_masked_lm,
        kinds=(model_kinds.ENCODER,),
        text_corpus=True,
        check=check_encoder_with_heads,
    )
)
PERMUTATION_LM = register_evaluation(
    Evaluation(
        name="permutation_lm",
        metric="accuracy",
        higher_is_better=True,
        description="XLNet permutation LM on seeded factorisation orders (last 1/K predicted)",
        score=score_permutation_lm,
        kinds=(model_kinds.XLNET,),
        text_corpus=True,
        check=check_encoder_with_heads,
    )
)
SEQ2SEQ = register_evaluation(
    Evaluation(
        name="seq2seq",
        metric="accuracy",
        higher_is_better=True,
        description="encoder-decoder denoising on seeded noise (the run's objective: BART "
        "infilling + permutation, T5 span corruption or MASS fragments); decoder token "
        "accuracy and loss on the predicted tokens",
        score=score_seq2seq,
        kinds=(model_kinds.ENCODER_DECODER,),
        text_corpus=True,
        check=check_seq2seq,
    )
)
FINETUNED = register_evaluation(
    Evaluation(
        name="finetuned",
        metric="",  # the task's own (task.json)
        higher_is_better=True,
        description="a fine-tuned model on its task's dev file (or the file given), with the "
        "task's metrics",
        score=score_finetuned,
        corpus_note="the task's dev file",
        downstream=False,
    )
)

#: The ``encoder`` family's evaluations: its pre-trained folders and the task models it
#: fine-tunes (``task.json``).
ENCODER_EVALUATIONS = (MASKED_LM, FINETUNED)
#: The ``modernbert`` family's: the same masked-LM scoring of its own kind.
MODERNBERT_MASKED_LM = register_evaluation(
    dataclasses.replace(MASKED_LM, name="modernbert_masked_lm", kinds=("modernbert",))
)
MODERNBERT_EVALUATIONS = (MODERNBERT_MASKED_LM, FINETUNED)

__all__ = [
    "ENCODER_EVALUATIONS",
    "FINETUNED",
    "MASKED_LM",
    "MODERNBERT_EVALUATIONS",
    "PERMUTATION_LM",
    "SEQ2SEQ",
    "reinitialise",
    "score_finetuned",
    "score_masked_lm",
    "score_permutation_lm",
    "score_seq2seq",
]
