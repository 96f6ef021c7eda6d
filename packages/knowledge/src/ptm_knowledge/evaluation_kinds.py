"""The evaluations of the model kinds ptm-knowledge owns, registered on import.

ERNIE-THU (MLM, NSP and dEA on a linked corpus), KG embeddings (the link-prediction
scores ``ptm embed-kg`` recorded), CogQA (HotpotQA metrics, against System 1 alone), and
the fine-tuned K-BERT and ERNIE-THU task models. Heavy imports happen inside the scoring
functions, so importing this module costs no torch or spaCy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptm_core.evaluation.files import read_json_object, require_file
from ptm_core.evaluation.kinds import reinitialise
from ptm_core.evaluation.registry import Evaluation, register_evaluation
from ptm_knowledge import kinds
from ptm_knowledge.family_cogqa import COGQA as COGQA_KIND


def score_ernie_thu(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """MLM/NSP/dEA metrics of an ERNIE-THU checkpoint (or of its random init) on a linked
    corpus."""
    from ptm_knowledge.ernie import evaluate_ernie_thu

    assert corpus is not None  # needs_corpus
    return evaluate_ernie_thu(
        model_dir, corpus, seed=seed, random_init_seed=seed if random_init else None
    )


def score_knowbert(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """MLM/NSP/linking metrics of a KnowBERT checkpoint (or of its random init) on a
    linked corpus."""
    from ptm_knowledge.knowbert.evaluation import evaluate_knowbert

    assert corpus is not None  # needs_corpus
    return evaluate_knowbert(
        model_dir, corpus, seed=seed, random_init_seed=seed if random_init else None
    )


def score_kg_embeddings(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """The test split's link-prediction scores ``ptm embed-kg`` wrote to ``metrics.json``
    (``random_init``: those of the untrained model PyKEEN scored)."""
    metrics = json.loads((Path(model_dir) / "metrics.json").read_text())
    return dict(metrics.get("random_baseline", {}) if random_init else metrics["test"])


def score_cogqa(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """HotpotQA metrics of a CogQA system on a HotpotQA JSON; ``random_init``: of its
    System 1 alone (the best span without the cognitive graph)."""
    from ptm_knowledge.cogqa.checkpoint import load_cogqa
    from ptm_knowledge.cogqa.data import read_hotpot_json
    from ptm_knowledge.cogqa.evaluation import evaluate_predictions
    from ptm_knowledge.cogqa.training import predict_system1_only

    assert corpus is not None  # needs_corpus
    from ptm_core.progress import track

    system = load_cogqa(model_dir)
    examples = read_hotpot_json(corpus)
    questions = track(examples, "evaluate", len(examples), unit="question")
    if random_init:
        predictions = {ex.id: predict_system1_only(system.reader, ex) for ex in questions}
    else:
        predictions = {ex.id: system.predict(ex)[0] for ex in questions}
    return evaluate_predictions(examples, predictions)


def score_kbert(
    model_dir: str, corpus: str | None, seed: int = 0, random_init: bool = False
) -> dict[str, Any]:
    """A K-BERT ``final/`` on ``corpus`` (default: its dev file), with its KG."""
    from ptm_knowledge.kbert.finetune import score_kbert_final

    reinitialise_fn = (lambda model: reinitialise(model, seed)) if random_init else None
    metrics, _ = score_kbert_final(model_dir, corpus, reinitialise=reinitialise_fn)
    kind = read_json_object(Path(model_dir) / "task.json").get("kind")
    return {**metrics, "_metric": "f1" if kind == "tagging" else "accuracy"}


def score_ernie_finetuned(
    model_dir: str, corpus: str | None, seed: int = 0, random_init: bool = False
) -> dict[str, Any]:
    """A fine-tuned ERNIE-THU ``final/`` on ``corpus`` (default: its dev file), the text
    linked to the KG its ``task.json`` names."""
    from ptm_knowledge.ernie.finetune import predict_ernie

    reinitialise_fn = (lambda model: reinitialise(model, seed)) if random_init else None
    metrics, _ = predict_ernie(model_dir, corpus, reinitialise=reinitialise_fn)
    record = read_json_object(Path(model_dir) / "task.json", ("task",))
    task = record["task"] if isinstance(record["task"], dict) else {}
    return {**metrics, "_metric": str(task.get("metric") or "accuracy")}


def check_kg_embeddings(directory: Path) -> None:
    """The test scores ``ptm embed-kg`` wrote."""
    require_file(
        directory / "metrics.json",
        "KG embeddings are judged by the test scores `ptm embed-kg` writes there, re-run it",
    )
    read_json_object(directory / "metrics.json", ("test",))


ERNIE_THU = register_evaluation(
    Evaluation(
        name="ernie_thu",
        metric="dea/accuracy",
        higher_is_better=True,
        description="ERNIE-THU on the linked corpus: MLM, NSP and dEA (5/15/80 corruption), seeded",
        score=score_ernie_thu,
        kinds=(kinds.ERNIE_THU,),
        needs_corpus="linked corpus .jsonl",
    )
)
KNOWBERT = register_evaluation(
    Evaluation(
        name="knowbert",
        metric="linking/accuracy",
        higher_is_better=True,
        description="KnowBERT on the linked corpus: MLM, NSP and entity linking over the "
        "alias candidates (gold: the corpus's mentions), seeded",
        score=score_knowbert,
        kinds=(kinds.KNOWBERT,),
        needs_corpus="linked corpus .jsonl",
    )
)
KG_EMBEDDINGS = register_evaluation(
    Evaluation(
        name="kg_embeddings",
        metric="mrr",
        higher_is_better=True,
        description="link prediction on PyKEEN's held-out split",
        score=score_kg_embeddings,
        kinds=(kinds.KG_EMBEDDINGS,),
        corpus_note="PyKEEN test split",
        uses_corpus=False,
        baseline_name="random embeddings",
        check=check_kg_embeddings,
    )
)
COGQA = register_evaluation(
    Evaluation(
        name="cogqa",
        metric="joint_f1",
        higher_is_better=True,
        description="multi-hop QA (HotpotQA EM/F1, supporting-fact F1, joint F1); the "
        "baseline is System 1 alone (best span without the cognitive graph)",
        score=score_cogqa,
        kinds=(COGQA_KIND,),
        needs_corpus="HotpotQA-format .json",
        baseline_name="System 1 only",
    )
)
KBERT = register_evaluation(
    Evaluation(
        name="kbert",
        metric="",  # accuracy, or f1 for tagging (score_kbert)
        higher_is_better=True,
        description="K-BERT on its dev file with the KG it was trained with (sentence trees, "
        "visible matrix)",
        score=score_kbert,
        corpus_note="the run's dev file",
    )
)
ERNIE_FINETUNED = register_evaluation(
    Evaluation(
        name="ernie_finetuned",
        metric="",  # the task's own (task.json)
        higher_is_better=True,
        description="a fine-tuned ERNIE-THU on its task's dev file, the text linked to its KG "
        "as in training",
        score=score_ernie_finetuned,
        corpus_note="the run's dev file",
    )
)

__all__ = ["COGQA", "ERNIE_FINETUNED", "ERNIE_THU", "KBERT", "KG_EMBEDDINGS", "KNOWBERT"]
