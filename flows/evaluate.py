"""The `evaluate` flow: score a model by its family, compare with a baseline, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import flow, task

from flows.artifacts import markdown_table, publish_markdown, write_report
from flows.config import project_root

DEFAULT_EVAL_CORPUS = "data_specs/text_corpus/sample/corpus.jsonl"

# family -> (headline metric, higher is better, what the numbers mean)
FAMILIES = {
    "masked_lm": ("accuracy", True, "masked-LM on seeded masks (15%, 80/10/10)"),
    "permutation_lm": (
        "accuracy",
        True,
        "XLNet permutation LM on seeded factorisation orders (last 1/K predicted)",
    ),
    "ernie_thu": (
        "dea/accuracy",
        True,
        "ERNIE-THU on the linked corpus: MLM, NSP and dEA (5/15/80 corruption), seeded",
    ),
    "kg_embeddings": ("mrr", True, "link prediction on PyKEEN's held-out split"),
    "xlm": (
        "retrieval/mean",
        True,
        "parallel-sentence retrieval (cosine of mean-pooled states, both directions)",
    ),
    "cogqa": (
        "joint_f1",
        True,
        "multi-hop QA (HotpotQA EM/F1, supporting-fact F1, joint F1); the baseline is "
        "System 1 alone (best span without the cognitive graph)",
    ),
    "multimodal": (
        "matching/accuracy",
        True,
        "image-text matching (one true and one swapped caption per image; chance 0.5)",
    ),
}


def model_family(model_dir: str | Path) -> str:
    """Which evaluation fits a directory (see :data:`FAMILIES`)."""
    directory = Path(model_dir)
    if (directory / "knowledge_config.json").exists():
        return "ernie_thu"
    if (directory / "languages.json").exists():
        return "xlm"
    if (directory / "cogqa.json").exists():
        return "cogqa"
    config = directory / "config.json"
    if config.exists() and "feature_spec" in json.loads(config.read_text()):
        return "multimodal"
    if (directory / "entity_embeddings.safetensors").exists():
        return "kg_embeddings"
    if (directory / "config.json").exists() and (directory / "heads.safetensors").exists():
        encoder = json.loads((directory / "config.json").read_text())
        return "permutation_lm" if encoder.get("position_encoding") == "relative" else "masked_lm"
    raise ValueError(
        f"{directory}: cannot tell which evaluation fits; expected a pre-training run's final/ "
        "directory (config.json + heads.safetensors), an ERNIE-THU final/ directory "
        "(knowledge_config.json) or KG embeddings (entity_embeddings.safetensors)"
    )


@task(name="evaluate-masked-lm")
def evaluate_masked_lm_task(
    model_dir: str, corpus: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """MLM accuracy and perplexity of a ``final/`` directory (or of its random init)."""
    from ptm_core.evaluation import evaluate_masked_lm, load_masked_lm

    encoder, objective, tokenizer = load_masked_lm(
        model_dir, random_init_seed=seed if random_init else None
    )
    return evaluate_masked_lm(encoder, objective, tokenizer, corpus, seed=seed).to_dict()


@task(name="evaluate-permutation-lm")
def evaluate_permutation_lm_task(
    model_dir: str, corpus: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Permutation-LM accuracy and perplexity of an XLNet ``final/`` directory."""
    from ptm_core.evaluation import evaluate_permutation_lm, load_permutation_lm

    encoder, objective, tokenizer = load_permutation_lm(
        model_dir, random_init_seed=seed if random_init else None
    )
    return evaluate_permutation_lm(encoder, objective, tokenizer, corpus, seed=seed).to_dict()


def evaluate_language_model(
    model_dir: str, corpus: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """The text-LM evaluation that fits ``model_dir``: permutation LM for a
    relative-position (XLNet) encoder, else masked LM. Same keys either way."""
    task_for = (
        evaluate_permutation_lm_task
        if model_family(model_dir) == "permutation_lm"
        else evaluate_masked_lm_task
    )
    return task_for(model_dir, corpus, seed, random_init=random_init)


@task(name="evaluate-ernie-thu")
def evaluate_ernie_thu_task(
    model_dir: str, linked_corpus: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """MLM/NSP/dEA metrics of an ERNIE-THU checkpoint (or of its random init)."""
    from ptm_knowledge.ernie import evaluate_ernie_thu

    return evaluate_ernie_thu(
        model_dir, linked_corpus, seed=seed, random_init_seed=seed if random_init else None
    )


def _reinitialise(module: Any, seed: int) -> None:
    """The same architecture from random init (BERT's initialisation, seeded)."""
    import torch

    from ptm_core.modules import init_bert_weights
    from ptm_core.seeding import derive_seed

    torch.manual_seed(derive_seed(seed, "baseline"))
    init_bert_weights(module)


@task(name="evaluate-xlm")
def evaluate_xlm_task(
    model_dir: str, parallel: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Retrieval accuracy on every parallel corpus under ``parallel``, both directions."""
    from ptm_multilingual.corpora import read_parallel_corpora
    from ptm_multilingual.evaluation import retrieval_accuracy
    from ptm_multilingual.model import XLMEncoder
    from ptm_multilingual.tokenizer import SharedBPETokenizer

    encoder = XLMEncoder.from_pretrained(model_dir).eval()
    if random_init:
        _reinitialise(encoder, seed)
    tokenizer = SharedBPETokenizer.from_directory(model_dir)
    scores: dict[str, Any] = {}
    for corpus in read_parallel_corpora(parallel):
        pair = f"{corpus.source_lang}-{corpus.target_lang}"
        result = retrieval_accuracy(
            encoder, tokenizer, corpus.pairs, corpus.source_lang, corpus.target_lang
        )
        for key, value in result.items():
            scores[f"retrieval/{pair}/{key}"] = value
    values = [v for k, v in scores.items() if isinstance(v, float) and "accuracy" in k]
    scores["retrieval/mean"] = sum(values) / max(len(values), 1)
    return scores


@task(name="evaluate-multimodal")
def evaluate_multimodal_task(
    model_dir: str, pairs_dir: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Matching accuracy (and with shuffled images) and caption->image recall@1/5."""
    from dataclasses import asdict

    from ptm_multimodal.data import ImageTextBatches, read_image_text_pairs
    from ptm_multimodal.evaluation import matching_accuracy, retrieval_recall
    from ptm_multimodal.loading import load_multimodal

    data = read_image_text_pairs(pairs_dir)
    # Raises FeatureMismatchError when the pairs' features are not the checkpoint's.
    model, tokenizer = load_multimodal(model_dir, features=data.features.spec)
    if random_init:
        _reinitialise(model, seed)
    batches = ImageTextBatches(data, tokenizer, 64, shuffle=False)
    scores: dict[str, Any] = {}
    for name, result in (
        ("matching", matching_accuracy(model, batches, seed=seed)),
        ("matching_shuffled", matching_accuracy(model, batches, seed=seed, shuffle_images=True)),
        ("retrieval", retrieval_recall(model, batches)),
    ):
        for key, value in asdict(result).items():
            if isinstance(value, (int, float)):
                scores[f"{name}/{key}"] = value
    return scores


@task(name="evaluate-cogqa")
def evaluate_cogqa_task(model_dir: str, questions: str, system1_only: bool = False) -> dict:
    """HotpotQA metrics of a CogQA system (or of its System 1 alone) on a HotpotQA JSON."""
    from ptm_knowledge.cogqa.checkpoint import load_cogqa
    from ptm_knowledge.cogqa.data import read_hotpot_json
    from ptm_knowledge.cogqa.evaluation import evaluate_predictions
    from ptm_knowledge.cogqa.training import predict_system1_only

    system = load_cogqa(model_dir)
    examples = read_hotpot_json(questions)
    if system1_only:
        predictions = {ex.id: predict_system1_only(system.reader, ex) for ex in examples}
    else:
        predictions = {ex.id: system.predict(ex)[0] for ex in examples}
    return evaluate_predictions(examples, predictions)


def _kg_scores(model_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    metrics = json.loads((Path(model_dir) / "metrics.json").read_text())
    return metrics["test"], metrics.get("random_baseline", {})


@flow(name="evaluate", log_prints=True)
def evaluate(
    model_dir: str,
    corpus: str | None = None,
    baseline: str = "random",
    seed: int = 0,
    report_path: str | None = None,
) -> dict[str, Any]:
    """Evaluate a model with the evaluation of its family, against a baseline; report.

    Families: text encoders with an MLM head (masked-LM accuracy, perplexity), ERNIE-THU
    (MLM, NSP and dEA accuracy on a linked corpus), KG embeddings (MRR, Hits@k), XLM
    (parallel-sentence retrieval), VisualBERT/ViLBERT (image-text matching, recall@k) and
    CogQA (HotpotQA metrics, against System 1 alone).

    Args:
        model_dir: a ``final/`` directory, or a KG-embedding directory.
        corpus: evaluation data: a text corpus (default: the bundled JSONL sample); for
            ERNIE-THU a linked corpus, for XLM a parallel corpus (file or directory), for
            multimodal models an image-text pairs directory, for CogQA a HotpotQA-format
            JSON (required for those).
        baseline: ``"random"`` (same architecture from random init; for KG embeddings the
            untrained model PyKEEN scored) or another model directory (e.g. the champion).
        seed: seed of the evaluation's masks, corruption and random baseline.
        report_path: where to write the markdown report (default beside ``model_dir``).

    Returns:
        ``{"family", "metric", "model", "baseline", "report"}``.
    """
    family = model_family(model_dir)
    metric, higher, what = FAMILIES[family]
    if family == "kg_embeddings":
        scores, base = _kg_scores(model_dir)
        base_name = "random embeddings"
        if baseline != "random":
            base, _ = _kg_scores(baseline)
            base_name = f"`{baseline}`"
        corpus_note = "PyKEEN test split"
    elif family == "ernie_thu":
        if corpus is None:
            raise ValueError("evaluating an ERNIE-THU model needs corpus=<linked corpus .jsonl>")
        scores = evaluate_ernie_thu_task(model_dir, corpus, seed)
        random_base = baseline == "random"
        base = evaluate_ernie_thu_task(
            model_dir if random_base else baseline, corpus, seed, random_init=random_base
        )
        base_name = "random init" if random_base else f"`{baseline}`"
        corpus_note = corpus
    elif family == "cogqa":
        if corpus is None:
            raise ValueError("evaluating a CogQA model needs corpus=<HotpotQA-format .json>")
        scores = evaluate_cogqa_task(model_dir, corpus)
        if baseline == "random":  # the baseline: System 1 without the graph
            base, base_name = evaluate_cogqa_task(model_dir, corpus, True), "System 1 only"
        else:
            base, base_name = evaluate_cogqa_task(baseline, corpus), f"`{baseline}`"
        corpus_note = corpus
    elif family in ("xlm", "multimodal"):
        if corpus is None:
            needs = "parallel corpus" if family == "xlm" else "image-text pairs directory"
            raise ValueError(f"evaluating a {family} model needs corpus=<{needs}>")
        score = evaluate_xlm_task if family == "xlm" else evaluate_multimodal_task
        scores = score(model_dir, corpus, seed)
        random_base = baseline == "random"
        base = score(model_dir if random_base else baseline, corpus, seed, random_init=random_base)
        base_name = "random init" if random_base else f"`{baseline}`"
        corpus_note = corpus
    else:
        corpus = corpus or str(project_root() / DEFAULT_EVAL_CORPUS)
        scores = evaluate_language_model(model_dir, corpus, seed)
        random_base = baseline == "random"
        base = evaluate_language_model(
            model_dir if random_base else baseline, corpus, seed, random_init=random_base
        )
        base_name = "random init" if random_base else f"`{baseline}`"
        corpus_note = corpus
    columns = ["model", *sorted(k for k in scores if isinstance(scores[k], (int, float)))]
    rows = [{"model": "model", **scores}, {"model": base_name, **base}]
    delta = scores[metric] - base.get(metric, float("nan"))
    better = delta > 0 if higher else delta < 0
    markdown = (
        f"# Evaluation of `{model_dir}`\n\n{what}; data: `{corpus_note}`.\n\n"
        + markdown_table(rows, columns)
        + f"\n\n**{metric}: {scores[metric]:.4f} vs {base.get(metric, float('nan')):.4f} "
        f"for {base_name} ({delta:+.4f}, {'better' if better else 'not better'}).**\n"
    )
    path = Path(report_path) if report_path else Path(model_dir).resolve().parent / "evaluation.md"
    write_report(path, markdown)
    publish_markdown("evaluation-report", markdown, f"evaluation of {model_dir}")
    print(f"evaluation report: {path}")
    return {
        "family": family,
        "metric": metric,
        "model": scores,
        "baseline": base,
        "report": str(path),
    }
