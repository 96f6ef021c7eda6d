"""The `evaluate` flow: score a model by its family, compare with a baseline, report."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import Flow, task

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
    "kbert": (
        "accuracy",
        True,
        "K-BERT on its dev file with the KG it was trained with (sentence trees, visible matrix)",
    ),
    "multimodal_task": (
        "",
        True,
        "a fine-tuned VisualBERT/ViLBERT on its image-text task's dev file (accuracy or VQA "
        "accuracy), with its region features",
    ),
    "ernie_finetuned": (
        "",
        True,
        "a fine-tuned ERNIE-THU on its task's dev file, the text linked to its KG as in training",
    ),
    # The headline metric is the task's own (task.json); see evaluate_finetuned_task.
    "finetuned": (
        "",
        True,
        "a fine-tuned model on its task's dev file (or the file given), with the task's metrics",
    ),
}


# Keys a ptm encoder's config.json must have: they fix the weights' shapes, so a default in
# their place would build another architecture and fail later with a list of mismatches.
ENCODER_SHAPE_KEYS = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
# Families whose evaluation data has no bundled default: what ``corpus`` must be.
NEEDS_CORPUS = {
    "ernie_thu": "linked corpus .jsonl",
    "cogqa": "HotpotQA-format .json",
    "xlm": "parallel corpus",
    "multimodal": "image-text pairs directory",
}


def _read_json(path: Path) -> Any:
    """Parse a JSON file; every failure is one line naming the file and what is wrong."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: missing; the model directory is incomplete, copy the whole final/ "
            "directory of the run"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 text (byte {exc.start}); restore the file from the run"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); "
            "restore the file from the run or re-save the model"
        ) from None


def _read_json_object(
    path: Path, required: tuple[str, ...] = (), *, within: str | None = None
) -> dict[str, Any]:
    """A JSON object with ``required`` keys (of its ``within`` member, when given)."""
    data = _read_json(path)
    node = data.get(within) if isinstance(data, dict) and within else data
    where = f"{within!r} in " if within else ""
    if not isinstance(node, dict):
        found = "nothing" if node is None else f"a JSON {type(node).__name__}"
        raise ValueError(f"{path}: expected a JSON object {where}the file, found {found}")
    missing = [key for key in required if key not in node]
    if missing:
        keys = ", ".join(repr(key) for key in missing)
        plural = "s" if len(missing) > 1 else ""
        scope = f" in {within!r}" if within else ""
        raise ValueError(
            f"{path}: missing key{plural} {keys}{scope}; restore the file from the run or "
            "re-save the model"
        )
    return data


def _final_dirs_near(directory: Path) -> str:
    """The run ``final/`` folders under the nearest existing parent of ``directory``."""
    base = directory.parent
    while not base.is_dir() and base != base.parent:
        base = base.parent
    found = sorted(
        str(path)
        for depth in range(4)
        for path in base.glob("/".join(["*"] * depth + ["final"]))
        if (path / "config.json").is_file() and not any(p.startswith(".") for p in path.parts)
    )
    if not found:
        return (
            f"no final/ folder with config.json under {base} (ptm pretrain writes "
            "<trainer.output_dir>/final; ptm demo writes runs/demo/pretrain/final)"
        )
    shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
    return f"final/ folders under {base}: {shown}"


def model_family(model_dir: str | Path) -> str:
    """Which evaluation fits a directory (see :data:`FAMILIES`).

    The marker files that decide the family are read and checked here, so a missing
    directory or a broken file is reported before any model is loaded.

    Raises:
        FileNotFoundError: the directory (or a file the family needs) does not exist.
        ValueError: a JSON file is invalid or lacks a key, or no family fits.
    """
    directory = Path(model_dir)
    if not directory.exists():
        raise FileNotFoundError(
            f"{directory}: the model directory does not exist; pass a run's final/ directory "
            "(or a KG-embedding directory): " + _final_dirs_near(directory)
        )
    if not directory.is_dir():
        raise ValueError(f"{directory}: is a file; pass the model directory that holds it")
    config_path = directory / "config.json"
    if (directory / "task.json").exists():
        marker = _read_json_object(directory / "task.json", ("kind",))
        if marker.get("family") == "multimodal":
            return "multimodal_task"  # regions from the task's feature store (task.json)
        recipe = marker.get("recipe")
        if recipe == "kbert":
            _read_json_object(config_path, ENCODER_SHAPE_KEYS)
            return "kbert"  # scored with its KG (task.json's provenance names KG and dev file)
        if recipe == "ernie_thu_finetune":
            return "ernie_finetuned"  # its knowledge layers and KG links (task.json names both)
        record = _read_json_object(directory / "task.json", ("kind", "task"))
        # ULMFiT's classifier holds an AWD-LSTM (its own config.json), not a Transformer.
        _read_json_object(
            config_path, ("model_type",) if record.get("ulmfit") else ENCODER_SHAPE_KEYS
        )
        if not isinstance(record["task"], dict):
            raise ValueError(f"{directory / 'task.json'}: 'task' must be an object")
        return "finetuned"
    if (directory / "knowledge_config.json").exists():
        _read_json_object(directory / "knowledge_config.json")
        return "ernie_thu"
    if (directory / "languages.json").exists():
        _read_json(directory / "languages.json")
        if _read_json_object(config_path).get("model_type") != "xlm":  # else Hugging Face's
            _read_json_object(config_path, ("encoder", "languages"))
            _read_json_object(config_path, ENCODER_SHAPE_KEYS, within="encoder")
        return "xlm"
    if (directory / "cogqa.json").exists():
        _read_json_object(directory / "cogqa.json")
        return "cogqa"
    config = _read_json_object(config_path) if config_path.exists() else None
    if config is not None and "feature_spec" in config:
        return "multimodal"
    if (directory / "entity_embeddings.safetensors").exists():
        metrics_path = directory / "metrics.json"
        if not metrics_path.exists():
            raise FileNotFoundError(
                f"{metrics_path}: missing; KG embeddings are judged by the test scores "
                "`ptm embed-kg` writes there, re-run it"
            )
        _read_json_object(metrics_path, ("test",))
        return "kg_embeddings"
    if config is not None and (directory / "heads.safetensors").exists():
        if "model_type" not in config:  # a ptm config; Hugging Face's use other names
            _read_json_object(config_path, ENCODER_SHAPE_KEYS)
        return "permutation_lm" if config.get("position_encoding") == "relative" else "masked_lm"
    raise ValueError(
        f"{directory}: cannot tell which evaluation fits; expected a pre-training run's final/ "
        "directory (config.json + heads.safetensors), an ERNIE-THU final/ directory "
        "(knowledge_config.json) or KG embeddings (entity_embeddings.safetensors)"
    )


def check_evaluation(
    model_dir: str | Path, corpus: str | None = None, baseline: str = "random"
) -> str:
    """Check what :func:`evaluate` needs before it starts; return the model's family.

    Raises:
        FileNotFoundError: the model or baseline directory does not exist.
        ValueError: a broken file, no family that fits, or a family without its ``corpus``.
    """
    family = model_family(model_dir)
    if family in NEEDS_CORPUS and corpus is None:
        raise ValueError(
            f"evaluating a {family} model needs corpus=<{NEEDS_CORPUS[family]}> (--corpus)"
        )
    if baseline != "random" and not Path(baseline).exists():
        raise FileNotFoundError(
            f"{baseline}: the baseline directory does not exist; pass another model "
            "directory or 'random'"
        )
    return family


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
    """Retrieval accuracy on every parallel corpus under ``parallel``, both directions.

    ``retrieval/mean`` averages every pair's directions (see
    :func:`~ptm_multilingual.evaluation.average_retrieval`).
    """
    from ptm_multilingual.corpora import read_parallel_corpora
    from ptm_multilingual.evaluation import average_retrieval, retrieval_accuracy
    from ptm_multilingual.model import XLMEncoder
    from ptm_multilingual.tokenizer import SharedBPETokenizer

    encoder = XLMEncoder.from_pretrained(model_dir).eval()
    if random_init:
        _reinitialise(encoder, seed)
    tokenizer = SharedBPETokenizer.from_directory(model_dir)
    scores: dict[str, Any] = {}
    by_pair: dict[str, dict[str, float]] = {}
    for corpus in read_parallel_corpora(parallel):
        pair = f"{corpus.source_lang}-{corpus.target_lang}"
        by_pair[pair] = retrieval_accuracy(
            encoder, tokenizer, corpus.pairs, corpus.source_lang, corpus.target_lang
        )
        for key, value in by_pair[pair].items():
            scores[f"retrieval/{pair}/{key}"] = value
    scores["retrieval/mean"] = average_retrieval(by_pair)
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


@task(name="evaluate-finetuned")
def evaluate_finetuned_task(
    model_dir: str, data: str | None = None, random_init: bool = False, seed: int = 0
) -> dict[str, Any]:
    """The task metrics of a fine-tuned ``final/`` on ``data`` (default: its dev file).

    ``random_init``: the same architecture, head included, with random weights (chance).
    """
    import torch

    from ptm_core.finetune.recipe import evaluate_task, load_finetuned, read_task

    model, tokenizer, spec, record = load_finetuned(model_dir)
    if random_init:
        torch.manual_seed(seed)
        _reinitialise(model, seed)
    labels = record.get("label_names") or None
    task_data = read_task(spec, "dev", tokenizer, labels, path=data)
    metrics, _ = evaluate_task(model, spec, task_data)
    return {**metrics, "_metric": spec.metric}


@task(name="evaluate-ernie-finetuned")
def evaluate_ernie_finetuned_task(
    model_dir: str, data: str | None = None, random_init: bool = False, seed: int = 0
) -> dict[str, Any]:
    """A fine-tuned ERNIE-THU ``final/`` on ``data`` (default: its dev file), the text linked
    to the KG its ``task.json`` names."""
    from ptm_knowledge.ernie.finetune import predict_ernie

    reinitialise = (lambda model: _reinitialise(model, seed)) if random_init else None
    metrics, _ = predict_ernie(model_dir, data, reinitialise=reinitialise)
    record = _read_json_object(Path(model_dir) / "task.json", ("task",))
    task = record["task"] if isinstance(record["task"], dict) else {}
    return {**metrics, "_metric": str(task.get("metric") or "accuracy")}


@task(name="evaluate-multimodal-finetuned")
def evaluate_multimodal_finetuned_task(
    model_dir: str, data: str | None = None, random_init: bool = False, seed: int = 0
) -> dict[str, Any]:
    """A fine-tuned VisualBERT/ViLBERT ``final/`` on ``data`` (default: its dev file)."""
    from ptm_multimodal.finetune import evaluate_finetuned_image_text

    return evaluate_finetuned_image_text(model_dir, data, random_init, seed)


@task(name="evaluate-kbert")
def evaluate_kbert_task(
    model_dir: str, data: str | None = None, random_init: bool = False, seed: int = 0
) -> dict[str, Any]:
    """A K-BERT ``final/`` on ``data`` (default: its dev file), with its KG."""
    from ptm_knowledge.kbert.finetune import score_kbert_final

    reinitialise = (lambda model: _reinitialise(model, seed)) if random_init else None
    metrics, _ = score_kbert_final(model_dir, data, reinitialise=reinitialise)
    kind = _read_json_object(Path(model_dir) / "task.json").get("kind")
    return {**metrics, "_metric": "f1" if kind == "tagging" else "accuracy"}


def downstream_rows(
    model_dir: str,
    baseline: str,
    tasks: list[str],
    out_dir: Path,
    seed: int,
    overrides: list[str] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """Fine-tune the model and the baseline on every task preset: their dev metrics."""
    from flows.finetune import downstream_scores

    model: dict[str, float] = {}
    base: dict[str, float] = {}
    extra = list(overrides or [])
    for name in tasks:
        print(f"downstream: fine-tuning on {name} (model, then baseline)")
        model |= downstream_scores(
            model_dir, name, out_dir / "model" / name, seed=seed, overrides=extra
        )
        if baseline == "random":
            base |= downstream_scores(
                model_dir,
                name,
                out_dir / "random" / name,
                seed=seed,
                random_init=True,
                overrides=extra,
            )
        else:
            base |= downstream_scores(
                baseline, name, out_dir / "baseline" / name, seed=seed, overrides=extra
            )
    return model, base


def _kg_scores(model_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    metrics = json.loads((Path(model_dir) / "metrics.json").read_text())
    return metrics["test"], metrics.get("random_baseline", {})


class _CheckedFlow(Flow[..., dict[str, Any]]):
    """The evaluate flow, with its arguments checked before Prefect starts a run.

    A user's mistake (a missing directory, a broken ``config.json``) then reaches the
    caller, and ``ptm evaluate``, as one line: no temporary API server is started and no
    failed run is logged with a traceback. Deployed runs check inside the flow instead.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        params = {k: v for k, v in kwargs.items() if k not in ("return_state", "wait_for")}
        bound = inspect.signature(self.fn).bind(*args, **params)
        bound.apply_defaults()
        arguments = bound.arguments
        check_evaluation(arguments["model_dir"], arguments["corpus"], arguments["baseline"])
        return super().__call__(*args, **kwargs)


def _checked_flow(fn: Callable[..., dict[str, Any]]) -> _CheckedFlow:
    # Decorating keeps the function's name, so the deployment entrypoint
    # (flows/evaluate.py:evaluate) still names this flow object.
    return _CheckedFlow(fn, name="evaluate", log_prints=True)


@_checked_flow
def evaluate(
    model_dir: str,
    corpus: str | None = None,
    baseline: str = "random",
    seed: int = 0,
    report_path: str | None = None,
    tasks: list[str] | None = None,
    task_overrides: list[str] | None = None,
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
        tasks: task presets (``configs/task/``) to fine-tune the model and the baseline on;
            their dev metrics (``<task>/<metric>``) are reported beside the intrinsic ones.
            For a fine-tuned ``final/`` (``task.json``) the task's own dev file is scored
            instead (``corpus`` = another file of the task's format).
        task_overrides: overrides of those fine-tuning runs (``trainer.max_steps=50``).

    Returns:
        ``{"family", "metric", "model", "baseline", "report"}``.
    """
    family = check_evaluation(model_dir, corpus, baseline)
    metric, higher, what = FAMILIES[family]
    if family == "kg_embeddings":
        scores, base = _kg_scores(model_dir)
        base_name = "random embeddings"
        if baseline != "random":
            base, _ = _kg_scores(baseline)
            base_name = f"`{baseline}`"
        corpus_note = "PyKEEN test split"
    elif family == "ernie_thu":
        assert corpus is not None  # check_evaluation
        scores = evaluate_ernie_thu_task(model_dir, corpus, seed)
        random_base = baseline == "random"
        base = evaluate_ernie_thu_task(
            model_dir if random_base else baseline, corpus, seed, random_init=random_base
        )
        base_name = "random init" if random_base else f"`{baseline}`"
        corpus_note = corpus
    elif family == "finetuned":
        scores = evaluate_finetuned_task(model_dir, corpus, seed=seed)
        metric = str(scores.pop("_metric"))
        higher = metric not in ("loss", "mse")
        if baseline == "random":
            base = evaluate_finetuned_task(model_dir, corpus, True, seed)
            base_name = "random init"
        else:
            base, base_name = evaluate_finetuned_task(baseline, corpus), f"`{baseline}`"
        base.pop("_metric", None)
        corpus_note = corpus or "the task's dev file"
    elif family in ("kbert", "ernie_finetuned", "multimodal_task"):
        score_task = {
            "kbert": evaluate_kbert_task,
            "ernie_finetuned": evaluate_ernie_finetuned_task,
            "multimodal_task": evaluate_multimodal_finetuned_task,
        }[family]
        scores = score_task(model_dir, corpus)
        if baseline == "random":
            base, base_name = score_task(model_dir, corpus, True, seed), "random init"
        else:
            base, base_name = score_task(baseline, corpus), f"`{baseline}`"
        metric = str(scores.pop("_metric"))
        base.pop("_metric", None)
        corpus_note = corpus or "the run's dev file"
    elif family == "cogqa":
        assert corpus is not None  # check_evaluation
        scores = evaluate_cogqa_task(model_dir, corpus)
        if baseline == "random":  # our baseline: System 1 without the graph
            base, base_name = evaluate_cogqa_task(model_dir, corpus, True), "System 1 only"
        else:
            base, base_name = evaluate_cogqa_task(baseline, corpus), f"`{baseline}`"
        corpus_note = corpus
    elif family in ("xlm", "multimodal"):
        assert corpus is not None  # check_evaluation
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
    if tasks and family != "finetuned":
        report_dir = (
            Path(report_path).resolve().parent if report_path else Path(model_dir).resolve().parent
        )
        down, down_base = downstream_rows(
            model_dir, baseline, list(tasks), report_dir / "downstream", seed, task_overrides or []
        )
        scores, base = {**scores, **down}, {**base, **down_base}
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
