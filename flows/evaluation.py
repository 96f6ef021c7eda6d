"""``ptm evaluate``: score a model with the evaluation registered for its kind, compare
with a baseline, report. The work of the ``evaluate`` flow (:mod:`flows.evaluate`),
without Prefect: the report is written to disk either way, and its path printed.

Which evaluation fits a directory: a fine-tuned ``final/`` (``task.json``) by its recipe
or family; else the ``"ptm_model"`` kind of its ``config.json``
(:mod:`ptm_core.model_kinds`); else, for directories written before that key (old runs,
Hugging Face folders), the marker files of :func:`legacy_family`. Each family's spec names
the evaluations of the kinds it owns (``FamilySpec.evaluation``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.artifacts import check_report_path, publish_markdown, write_report
from flows.end_table import print_end_table
from flows.evaluation_data import (
    MIN_COMPARE_TOKENS,
    check_enough_tokens,
    default_eval_corpus,
    default_report_path,
    metrics_lines,
    scored_tokens,
)
from flows.evaluation_report import comparison_tables, model_description
from flows.execution import in_flow_run
from ptm_core.evaluation.files import ENCODER_SHAPE_KEYS
from ptm_core.evaluation.files import read_json as _read_json
from ptm_core.evaluation.files import read_json_object as _read_json_object
from ptm_core.evaluation.kinds import SEQ2SEQ_SHAPE_KEYS
from ptm_core.evaluation.registry import (
    Evaluation,
    evaluation_for_kind,
    get_evaluation,
    register_evaluation,
    registered_evaluations,
)
from ptm_core.model_kinds import KIND_KEY, known_kinds


def load_evaluations() -> dict[str, Evaluation]:
    """Every registered evaluation, by name: those each installed family's spec names
    (``FamilySpec.evaluation``: one ``Evaluation`` or a sequence)."""
    from ptm_core.families import families

    for spec in families().values():
        if spec.has("evaluation"):
            named = spec.hook("evaluation")
            for evaluation in named if isinstance(named, (tuple, list)) else (named,):
                register_evaluation(evaluation)
    return registered_evaluations()


def evaluation_of(family: str) -> Evaluation:
    """The registered evaluation of ``family`` (see :func:`model_family`)."""
    load_evaluations()
    return get_evaluation(family)


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
    """Which registered evaluation fits a directory (its family).

    A fine-tuned ``final/`` (``task.json``): :func:`task_family`; else the
    ``"ptm_model"`` kind of ``config.json`` (the files that evaluation needs are checked);
    else :func:`legacy_family`.

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
    if (directory / "task.json").exists():
        return task_family(directory)
    config_path = directory / "config.json"
    kind = _read_json_object(config_path).get(KIND_KEY) if config_path.exists() else None
    if kind is None:
        return legacy_family(directory)
    if kind not in known_kinds():
        raise ValueError(
            f"{config_path}: unknown {KIND_KEY!r} {kind!r}; known kinds: "
            f"{', '.join(sorted(known_kinds()))} (is the package that saved it installed?)"
        )
    load_evaluations()
    evaluation = evaluation_for_kind(str(kind))
    if evaluation.check is not None:
        evaluation.check(directory)
    return evaluation.name


def task_family(directory: Path) -> str:
    """The evaluation of a fine-tuned ``final/``: by ``task.json``'s family or recipe."""
    config_path = directory / "config.json"
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
    # ULMFiT's classifier holds an AWD-LSTM (its own config.json), BART/T5's an
    # encoder-decoder (its adapter run: the base's config), not a Transformer encoder.
    keys = SEQ2SEQ_SHAPE_KEYS if record.get("seq2seq") else ENCODER_SHAPE_KEYS
    _read_json_object(config_path, ("model_type",) if record.get("ulmfit") else keys)
    if not isinstance(record["task"], dict):
        raise ValueError(f"{directory / 'task.json'}: 'task' must be an object")
    return "finetuned"


def legacy_family(directory: Path) -> str:
    """The evaluation of a directory without ``"ptm_model"`` (written before the key, or a
    Hugging Face folder), from its marker files, as ``ptm evaluate`` always decided it.

    The marker files are read and checked here, so a broken file is reported before any
    model is loaded.
    """
    config_path = directory / "config.json"
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
    if config is not None and config.get("model_type") == "awd_lstm":
        return "awd_lstm"
    if config is not None and config.get("ptm_format") == "ptm-bilm/1":
        return "elmo"
    raise ValueError(
        f"{directory}: cannot tell which evaluation fits; expected a pre-training run's final/ "
        "directory (config.json + heads.safetensors), an ERNIE-THU final/ directory "
        "(knowledge_config.json) or KG embeddings (entity_embeddings.safetensors)"
    )


def check_evaluation(
    model_dir: str | Path,
    corpus: str | None = None,
    baseline: str = "random",
    report_path: str | None = None,
) -> str:
    """Check what :func:`evaluate_in_process` needs before it starts; return the family.

    Raises:
        FileNotFoundError: the model or baseline directory does not exist.
        ValueError: a broken file, no family that fits, a family without its ``corpus``, a
            text LM with no held-out data (:func:`default_eval_corpus`), or a report path
            that holds a file ``ptm evaluate`` did not write.
    """
    return checked_evaluation(model_dir, corpus, baseline, report_path)[0]


def checked_evaluation(
    model_dir: str | Path,
    corpus: str | None = None,
    baseline: str = "random",
    report_path: str | None = None,
) -> tuple[str, tuple[str, str] | None]:
    """:func:`check_evaluation`, also returning the default corpus it found: ``(corpus,
    where it came from)`` for a text LM evaluated without ``corpus``, else ``None``."""
    family = model_family(model_dir)
    evaluation = evaluation_of(family)
    needs = evaluation.needs_corpus
    if needs is not None and corpus is None:
        raise ValueError(f"evaluating a {family} model needs corpus=<{needs}> (--corpus)")
    defaulted = (
        default_eval_corpus(model_dir) if evaluation.text_corpus and corpus is None else None
    )
    check_report_path(Path(report_path) if report_path else default_report_path(model_dir))
    if baseline != "random" and not Path(baseline).exists():
        raise FileNotFoundError(
            f"{baseline}: the baseline directory does not exist; pass another model "
            "directory or 'random'"
        )
    return family, defaulted


def score(
    evaluation: Evaluation,
    model_dir: str,
    corpus: str | None,
    seed: int,
    random_init: bool = False,
) -> dict[str, Any]:
    """``evaluation.score``; inside a flow run, as a Prefect task named after the family."""
    run = evaluation.score
    if in_flow_run():
        from prefect import task

        run = task(name=f"evaluate-{evaluation.name.replace('_', '-')}")(evaluation.score)
    scores: dict[str, Any] = run(model_dir, corpus, seed, random_init)
    return scores


def evaluate_language_model(
    model_dir: str, corpus: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """The text-LM evaluation that fits ``model_dir`` (masked LM, XLNet's permutation LM,
    an encoder-decoder's denoising): ``loss``, ``perplexity``, ``accuracy`` either way."""
    evaluation = evaluation_of(model_family(model_dir))
    if not evaluation.text_corpus:
        raise ValueError(f"{model_dir}: a {evaluation.name} model is not a text language model")
    return score(evaluation, model_dir, corpus, seed, random_init)


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


def evaluate_in_process(
    model_dir: str,
    corpus: str | None = None,
    baseline: str = "random",
    seed: int = 0,
    report_path: str | None = None,
    tasks: list[str] | None = None,
    task_overrides: list[str] | None = None,
    min_tokens: int = MIN_COMPARE_TOKENS,
) -> dict[str, Any]:
    """Evaluate a model with the evaluation registered for its kind, against a baseline;
    report.

    Families: text encoders with an MLM head (masked-LM accuracy, perplexity), XLNet
    (permutation LM), encoder-decoders (BART/T5/MASS: denoising token accuracy and loss),
    AWD-LSTM and ELMo (held-out perplexity), ERNIE-THU (MLM, NSP and dEA accuracy on a
    linked corpus), KG embeddings (MRR, Hits@k), XLM (parallel-sentence retrieval),
    VisualBERT/ViLBERT/LXMERT (image-text matching, recall@k), CogQA (HotpotQA metrics,
    against System 1 alone) and fine-tuned task models (their task's metrics).

    Args:
        model_dir: a ``final/`` directory, or a KG-embedding directory.
        corpus: evaluation data: a text corpus (default: the held-out split the model's
            run recorded, ``<run>/data_split/held_out.json`` as ``ptm retrain`` writes it;
            else, for a model with the sample's vocabulary, the bundled JSONL sample;
            else it must be given); for
            ERNIE-THU a linked corpus, for XLM a parallel corpus (file or directory), for
            multimodal models an image-text pairs directory, for CogQA a HotpotQA-format
            JSON (required for those).
        baseline: ``"random"`` (same architecture from random init; for KG embeddings the
            untrained model PyKEEN scored) or another model directory (e.g. the champion).
        seed: seed of the evaluation's masks, corruption and random baseline.
        report_path: where to write the markdown report (default
            ``evaluation-<model folder name>.md`` beside ``model_dir``); a file that
            ``ptm evaluate`` did not write is never replaced.
        tasks: task presets (``configs/task/``) to fine-tune the model and the baseline on;
            their dev metrics (``<task>/<metric>``) are reported beside the intrinsic ones.
            For a fine-tuned ``final/`` (``task.json``) the task's own dev file is scored
            instead (``corpus`` = another file of the task's format).
        task_overrides: overrides of those fine-tuning runs (``trainer.max_steps=50``).
        min_tokens: fewest scored tokens on which the model is compared with another
            model (``baseline`` a directory); fewer is refused (:data:`MIN_COMPARE_TOKENS`).

    Returns:
        ``{"family", "metric", "model", "baseline", "report"}``.
    """
    family, defaulted = checked_evaluation(model_dir, corpus, baseline, report_path)
    evaluation = evaluation_of(family)
    metric, higher = evaluation.metric, evaluation.higher_is_better
    corpus, source = defaulted or (corpus, "given (--corpus)")
    scores = score(evaluation, model_dir, corpus, seed)
    if baseline == "random":
        base = score(evaluation, model_dir, corpus, seed, random_init=True)
        base_name = evaluation.baseline_name
    else:
        # Text LMs: the baseline's own LM evaluation (masked LM vs an XLNet champion).
        base_evaluation = evaluation
        if evaluation.text_corpus:
            other = evaluation_of(model_family(baseline))
            base_evaluation = other if other.text_corpus else evaluation
        base, base_name = score(base_evaluation, baseline, corpus, seed), f"`{baseline}`"
    if not metric:  # the task's own metric
        metric = str(scores.pop("_metric"))
        higher = metric not in ("loss", "mse")
    base.pop("_metric", None)
    # Masked/predicted tokens of a text LM; other families count rows, pairs or triples.
    tokens = scored_tokens(scores) if evaluation.text_corpus else None
    if baseline != "random":
        check_enough_tokens(tokens, min_tokens, str(corpus), f"{model_dir} with {baseline}")
    # What the report names as data: the corpus given (or defaulted), else the evaluation's own.
    corpus_note = (corpus if evaluation.uses_corpus else None) or evaluation.corpus_note
    what = evaluation.description
    if tasks and evaluation.downstream:
        report_dir = (
            Path(report_path).resolve().parent if report_path else Path(model_dir).resolve().parent
        )
        down, down_base = downstream_rows(
            model_dir, baseline, list(tasks), report_dir / "downstream", seed, task_overrides or []
        )
        scores, base = {**scores, **down}, {**base, **down_base}
    delta = scores[metric] - base.get(metric, float("nan"))
    better = delta > 0 if higher else delta < 0
    scored = f" ({tokens:,} tokens scored)" if tokens is not None else ""
    if evaluation.uses_corpus and corpus is not None:
        print(f"evaluation data: {corpus}, {source}{scored}")
    print(metrics_lines("model", scores))
    print(metrics_lines(base_name.strip("`"), base))
    base_title = base_name.strip("`")
    markdown = (
        f"# Evaluation of `{model_dir}`\n\n- model: {model_description(model_dir, family)}\n"
        f"- baseline: {base_title}\n- {what}; data: `{corpus_note}`{scored}.\n\n"
        + comparison_tables(scores, base, base_title, metric)
        + f"\n\n**{metric}: {scores[metric]:.4f} vs {base.get(metric, float('nan')):.4f} "
        f"for {base_name} ({delta:+.4f}, {'better' if better else 'not better'}).**\n"
    )
    path = Path(report_path) if report_path else default_report_path(model_dir)
    markdown = write_report(path, markdown).read_text(encoding="utf-8")  # headed by the marker
    publish_markdown("evaluation-report", markdown, f"evaluation of {model_dir}")
    print(f"evaluation report: {path}")
    print_end_table(
        f"evaluate {family}",
        {
            f"{metric} (model)": scores[metric],
            f"{metric} ({base_name.strip('`')})": base.get(metric, float("nan")),
            f"{metric} difference": delta,
        },
        {"report": path},
    )
    return {
        "family": family,
        "metric": metric,
        "model": scores,
        "baseline": base,
        "report": str(path),
    }
