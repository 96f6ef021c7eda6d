"""The evaluations of the model kinds ptm-classic owns (AWD-LSTM, ELMo): the ``evaluation``
of the awd_lstm and elmo family specs (:mod:`ptm_classic.families`), which ``ptm evaluate``
registers.

Both score held-out perplexity on a text corpus with the vocabulary saved in the ``final/``
(:mod:`ptm_classic.evaluation`), or with ``random_init=True`` the same architecture from
random init seeded by ``seed``. Heavy imports happen inside the scoring functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptm_classic import kinds
from ptm_core.evaluation.files import read_json_object, require_file
from ptm_core.evaluation.registry import Evaluation


def score_awd_lstm(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Held-out perplexity of an AWD-LSTM ``final/`` (or its random init)."""
    from ptm_classic.evaluation import evaluate_awd_lstm

    assert corpus is not None  # text_corpus: the flow passes the default
    return evaluate_awd_lstm(model_dir, corpus, random_init_seed=seed if random_init else None)


def score_bilm(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Held-out perplexity of an ELMo biLM ``final/`` (or its random init)."""
    from ptm_classic.evaluation import evaluate_bilm

    assert corpus is not None
    return evaluate_bilm(model_dir, corpus, random_init_seed=seed if random_init else None)


def score_cove(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Held-out translation perplexity of a CoVe ``final/`` (or its random init)."""
    from ptm_classic.cove.pretraining import evaluate_translation

    assert corpus is not None  # needs_corpus
    return evaluate_translation(model_dir, corpus, random_init_seed=seed if random_init else None)


def check_cove(directory: Path) -> None:
    """A CoVe ``final/``: config, weights, target words and the GloVe table."""
    read_json_object(directory / "config.json")
    for name in ("model.safetensors", "target_vocab.txt"):
        require_file(directory / name, "copy the whole final/ directory of the run")
    if not (directory / "glove").is_dir():
        raise FileNotFoundError(
            f"{directory / 'glove'}: missing; the GloVe table the MT-LSTM reads (copy the "
            "whole final/ directory of the run)"
        )


def check_recurrent(directory: Path) -> None:
    """A recurrent LM's ``config.json``, weights and vocabulary."""
    read_json_object(directory / "config.json")
    require_file(directory / "model.safetensors", "copy the whole final/ directory of the run")
    require_file(directory / "vocab.txt", "copy the whole final/ directory of the run")


AWD_LSTM = Evaluation(
    name="awd_lstm",
    metric="perplexity",
    higher_is_better=False,
    description="AWD-LSTM language model: held-out perplexity (BPTT windows of 70, "
    "hidden state carried)",
    score=score_awd_lstm,
    kinds=(kinds.AWD_LSTM,),
    text_corpus=True,
    check=check_recurrent,
)
ELMO = Evaluation(
    name="elmo",
    metric="perplexity",
    higher_is_better=False,
    description="ELMo biLM: held-out perplexity of both directions (full softmax, the "
    "run's output vocabulary)",
    score=score_bilm,
    kinds=(kinds.ELMO,),
    text_corpus=True,
    check=check_recurrent,
)

COVE = Evaluation(
    name="cove",
    metric="perplexity",
    higher_is_better=False,
    description="CoVe: held-out translation perplexity per target word (teacher-forced, "
    "</s> included) in the languages the model was trained on",
    score=score_cove,
    kinds=(kinds.COVE,),
    needs_corpus="parallel corpus, e.g. data_specs/parallel_corpus/heldout",
    check=check_cove,
)

__all__ = [
    "AWD_LSTM",
    "COVE",
    "ELMO",
    "check_cove",
    "check_recurrent",
    "score_awd_lstm",
    "score_bilm",
    "score_cove",
]
