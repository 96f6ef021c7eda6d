"""The `finetune` flow: fine-tune a model on a downstream task, one run or a sweep.

``ptm finetune task=kg_pair model=runs/demo/pretrain/final`` runs one fine-tuning in this
process, without Prefect; ``ptm flow finetune ...`` (or ``ptm finetune --prefect``) runs the
same under Prefect (:mod:`flows.finetune_flow`: one task per run, a markdown artifact with
the results). Overrides use Hydra's syntax, and Hydra's sweep syntax with
``--multirun``: ``seed=0,1,2 trainer.learning_rate=1e-3,3e-3`` is the cartesian product,
reported as mean ± std over the seeds of each setting (fine-tuning small data moves by
several points between seeds: GLUE's MRPC by about ±6).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flows.artifacts import markdown_table
from flows.config import compose_config
from flows.hub_models import looks_like_hub_name
from flows.label_report import write_label_report
from flows.runner import run_composed

# The root config of `ptm finetune` (configs/finetune.yaml).
CONFIG_NAME = "finetune"


def model_overrides(overrides: Sequence[str]) -> list[str]:
    """``model=<directory>`` becomes ``init_from=<directory>``; presets stay a group choice.

    ``model`` is the config group of encoder presets (``model=bert_tiny``: random init). A
    value naming an existing directory, or holding a path separator, is a checkpoint to
    fine-tune instead: a ptm ``final/`` or a Hugging Face directory. A Hub name
    (``bert-base-uncased``, ``org/model``) is left to :func:`flows.hub_models.hub_model_overrides`
    (the local Hugging Face cache).
    """
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        hub_name = not Path(value).exists() and looks_like_hub_name(value)
        if sep and key == "model" and not hub_name and ("/" in value or Path(value).is_dir()):
            if not Path(value).is_dir():
                raise FileNotFoundError(
                    f"model={value}: no such directory; give a final/ directory of a ptm run, "
                    "a Hugging Face model directory, or a preset name (configs/model/)"
                )
            out.append(f"init_from={value}")
        else:
            out.append(item)
    return out


def expand_sweep(overrides: Sequence[str]) -> list[list[str]]:
    """Hydra's sweep syntax (``seed=0,1,2``, ``range(0,3)``, ``choice(...)``) expanded into
    the cartesian product of override lists, in order (the last key varies fastest)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    axes = []
    for override in parsed:
        key = override.get_key_element()
        if override.is_sweep_override():
            axes.append([f"{key}={value}" for value in override.sweep_string_iterator()])
        else:
            axes.append([f"{key}={override.get_value_element_as_str()}"])
    return [list(combination) for combination in itertools.product(*axes)]


def setting_of(overrides: Sequence[str]) -> str:
    """The overrides of a run without its seed: the runs that share it are one setting."""
    return " ".join(o for o in overrides if o.partition("=")[0] != "seed") or "(defaults)"


def _default_model_preset() -> str:
    from omegaconf import OmegaConf

    from flows.config import config_dir

    root = OmegaConf.to_container(OmegaConf.load(config_dir() / f"{CONFIG_NAME}.yaml"))
    defaults = root.get("defaults", []) if isinstance(root, dict) else []
    for entry in defaults:
        if isinstance(entry, dict) and "model" in entry:
            return str(entry["model"])
    return "model"


def default_output_dir(cfg: Any, overrides: Sequence[str]) -> str:
    """``runs/finetune-<task>/<model>-<settings hash>/seed<N>``: runs of different models,
    data or settings never share a folder, and the seeds of one setting sit side by side."""
    from flows.run_identity import config_identity, model_tag, settings_hash

    preset = (
        next(
            (o.partition("=")[2] for o in overrides if o.lstrip("+").partition("=")[0] == "model"),
            None,
        )
        or _default_model_preset()
    )
    tag = model_tag(cfg.get("init_from"), preset)
    digest = settings_hash(config_identity(cfg))
    return f"runs/{cfg.experiment_name}/{tag}-{digest}/seed{cfg.seed}"


def run_one(overrides: Sequence[str]) -> dict[str, Any]:
    """Compose the finetune config with ``overrides`` and run it in this process.

    Without a ``trainer.output_dir`` override the run goes to :func:`default_output_dir`.
    """
    cfg = compose_config(model_overrides(overrides), config_name=CONFIG_NAME)
    if not any(o.lstrip("+").partition("=")[0] == "trainer.output_dir" for o in overrides):
        cfg.trainer.output_dir = default_output_dir(cfg, overrides)
    result = run_composed(cfg)
    # Classification and tagging: the confusion matrix and per-label scores (a PNG in the
    # run folder; inside a flow also the finetune-labels artifact).
    labels_png = write_label_report(result.output_dir)
    return {
        "overrides": list(overrides),
        "setting": setting_of(overrides),
        "seed": int(cfg.seed),
        "task": str(cfg.task.name),
        "output_dir": str(result.output_dir),
        "final_dir": str(result.encoder_dir),
        "metrics_path": str(result.metrics_path),
        "final_metrics": dict(result.final_metrics),
        "label_report": str(labels_png) if labels_png else None,
    }


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± std over the seeds of each setting, for every ``dev/`` metric.

    The std is the sample standard deviation (n - 1), 0 for a single seed.
    """
    settings: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        settings.setdefault(run["setting"], []).append(run)
    rows = []
    for setting, group in settings.items():
        names = sorted(
            {k for r in group for k in r["final_metrics"] if k.startswith("dev/")},
        )
        row: dict[str, Any] = {"setting": setting, "seeds": len(group)}
        for name in names:
            values = [float(r["final_metrics"][name]) for r in group if name in r["final_metrics"]]
            values = [v for v in values if math.isfinite(v)]
            if not values:
                continue
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            row[name] = {"mean": statistics.fmean(values), "std": std, "n": len(values)}
        rows.append(row)
    return rows


def format_summary(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table: one row per setting, ``mean ± std`` per metric."""
    names = sorted({k for row in rows for k in row if k.startswith("dev/")})
    table = [
        {
            "setting": row["setting"],
            "seeds": row["seeds"],
            **{n: f"{row[n]['mean']:.4f} ± {row[n]['std']:.4f}" for n in names if n in row},
        }
        for row in rows
    ]
    return markdown_table(table, ["setting", "seeds", *names])


def summary_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The ``finetune-report`` artifact: per setting, a two-column table of its dev
    metrics (``mean ± std``). One table per setting, metrics down the rows: a sweep's
    settings side by side would be wider than the Prefect artifact panel."""
    parts = ["# Fine-tuning"]
    for row in rows:
        names = sorted(k for k in row if k.startswith("dev/"))
        table = [
            {"metric": n, "mean ± std": f"{row[n]['mean']:.4f} ± {row[n]['std']:.4f}"}
            for n in names
        ]
        seeds = f"{row['seeds']} seed{'s' if row['seeds'] != 1 else ''}"
        parts.append(
            f"## {row['setting'] or '(defaults)'}\n\n{seeds}\n\n"
            + markdown_table(table, ["metric", "mean ± std"])
        )
    return "\n\n".join(parts) + "\n"


def run_sweep(
    overrides: Sequence[str], runner: Callable[[list[str]], dict[str, Any]] = run_one
) -> dict[str, Any]:
    """Every run of the sweep, one after another, then the summary over seeds."""
    combos = expand_sweep(overrides)
    runs = []
    for index, combo in enumerate(combos, 1):
        print(f"[{index}/{len(combos)}] finetune {' '.join(combo)}", flush=True)
        runs.append(runner(combo))
    rows = summarize(runs)
    return {"runs": runs, "summary": rows, "table": format_summary(rows)}


def downstream_scores(
    model_dir: str | Path,
    task_name: str,
    out_dir: str | Path,
    *,
    seed: int = 0,
    random_init: bool = False,
    overrides: Sequence[str] = (),
) -> dict[str, float]:
    """Fine-tune ``model_dir`` on the task preset ``task_name`` and return its dev metrics.

    This is how ``ptm evaluate --task`` and ``ptm retrain --gate-task`` judge a pre-trained
    model by a downstream result. The run goes into ``out_dir`` (emptied first: it is
    scratch space, never the model's own folder), with the preset's budget unless
    ``overrides`` change it.

    Returns:
        ``{"<task>/<metric>": value}`` for every dev metric of the task.
    """
    import shutil

    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    run = run_one(
        [
            f"task={task_name}",
            f"init_from={Path(model_dir).resolve()}",
            f"seed={seed}",
            f"finetune.random_init={str(random_init).lower()}",
            f"trainer.output_dir={out.resolve()}",
            "trainer.progress=false",
            *overrides,
        ]
    )
    return {
        f"{task_name}/{name.removeprefix('dev/')}": float(value)
        for name, value in run["final_metrics"].items()
        if name.startswith("dev/")
    }


def headline_metric(task_name: str) -> str:
    """``<task>/<metric>``: the metric the task preset names (its ``metric`` key)."""
    cfg = compose_config([f"task={task_name}"], config_name=CONFIG_NAME)
    from ptm_core.finetune.task_spec import TaskSpec

    task = TaskSpec.from_mapping(dict(cfg.task))
    return f"{task_name}/{task.metric}"
