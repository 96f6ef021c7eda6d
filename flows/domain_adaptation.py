"""Domain adaptation end to end: domain corpus -> extend-vocab -> DAPT -> TAPT -> fine-tune ->
compare with the base model fine-tuned the same way.

``ptm flow domain-adapt base=FINAL corpus=DOMAIN task=TASK [key=value ...]`` runs it as a
Prefect flow (:mod:`flows.domain_adapt_flow`, one task per step); :func:`domain_adapt` is
the same work in this process, each step passed through ``step`` (the flow makes it a
task). Settings, as ``key=value``:

- ``base`` (required): the model to adapt, a ptm ``final/`` or a Hugging Face folder;
- ``corpus`` (required): the domain text (files, folders, patterns; ``ptm prepare``'s formats);
- ``task`` (required): the task preset (``ptm finetune task=...``);
- ``output``: the folder of every step (default ``runs/domain_adapt``);
- ``experiment``: the pre-training preset whose objective and trainer DAPT/TAPT use
  (default ``bert_tiny``); ``dapt_steps`` (default 1000), ``tapt_steps`` (default 0: no
  TAPT) and ``tapt_corpus`` (the task's text as a corpus, needed when ``tapt_steps`` > 0);
- ``max_new`` (default 1000), ``min_count`` (default 5): as ``ptm extend-vocab``;
- ``extend``: ``false`` skips the vocabulary extension (plain DAPT);
- ``seeds``: fine-tuning seeds, comma-separated (default ``0,1,2``);
- any dotted key (``task.train=...``, ``trainer.max_steps=100``, ``finetune.peft=lora``)
  goes to every fine-tuning run, base and adapted alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Step = Callable[..., Any]
_DEFAULTS: dict[str, str] = {
    "output": "runs/domain_adapt",
    "experiment": "bert_tiny",
    "dapt_steps": "1000",
    "tapt_steps": "0",
    "tapt_corpus": "",
    "max_new": "1000",
    "min_count": "5",
    "extend": "true",
    "seeds": "0,1,2",
}
_REQUIRED = ("base", "corpus", "task")


def parse_settings(items: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """``key=value`` items -> (the flow's settings, the fine-tuning overrides).

    Raises:
        ValueError: an item without ``=``, an unknown plain key, or a required key missing.
    """
    settings = dict(_DEFAULTS)
    finetune: list[str] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r}: expected key=value (e.g. corpus=data/pubmed.txt)")
        if "." in key.lstrip("+~"):
            finetune.append(item)
        elif key in settings or key in _REQUIRED:
            settings[key] = value
        else:
            valid = ", ".join([*_REQUIRED, *_DEFAULTS])
            raise ValueError(f"{key}: not a domain-adapt setting; valid: {valid} (or a dotted key)")
    missing = [key for key in _REQUIRED if key not in settings]
    if missing:
        raise ValueError(
            f"missing {', '.join(missing)}: ptm flow domain-adapt base=<final/> "
            "corpus=<domain text> task=<task preset> [key=value ...]"
        )
    if int(settings["tapt_steps"]) > 0 and not settings["tapt_corpus"]:
        raise ValueError(
            "tapt_steps > 0 needs tapt_corpus=<the task's text as a .txt/.jsonl corpus>"
        )
    return settings, finetune


def _direct(name: str, function: Step, *args: Any) -> Any:
    return function(*args)


def domain_adapt(items: Sequence[str], step: Callable[..., Any] = _direct) -> dict[str, Any]:
    """Run every step; returns the comparison (``rows``, ``table``) and each step's output.

    Args:
        items: ``key=value`` settings (see the module docstring).
        step: ``step(name, function, *args)`` runs one step (the flow makes it a task).
    """
    settings, finetune = parse_settings(items)
    out = Path(settings["output"])
    corpus = settings["corpus"]
    files = step("domain-corpus", check_corpus, corpus)
    start = Path(settings["base"])
    if settings["extend"].lower() != "false":
        start = step(
            "extend-vocab",
            extend,
            settings["base"],
            corpus,
            out / "extended",
            int(settings["max_new"]),
            int(settings["min_count"]),
        )
    adapted = step(
        "dapt",
        pretrain,
        settings["experiment"],
        start,
        corpus,
        settings["dapt_steps"],
        out / "dapt",
    )
    if int(settings["tapt_steps"]) > 0:
        adapted = step(
            "tapt",
            pretrain,
            settings["experiment"],
            adapted,
            settings["tapt_corpus"],
            settings["tapt_steps"],
            out / "tapt",
        )
    seeds = [int(s) for s in settings["seeds"].split(",") if s.strip()]
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "adapted": []}
    for arm, model in (("base", Path(settings["base"])), ("adapted", adapted)):
        for seed in seeds:
            overrides = [
                f"task={settings['task']}",
                f"model={model}",
                f"seed={seed}",
                f"trainer.output_dir={out / 'finetune' / arm / f'seed{seed}'}",
                *finetune,
            ]
            runs[arm].append(step(f"finetune-{arm}", finetune_one, overrides))
    rows = compare(runs)
    return {
        "corpus_files": files,
        "extended": str(start),
        "adapted": str(adapted),
        "runs": runs,
        "rows": rows,
        "table": table(rows),
    }


def check_corpus(corpus: str) -> list[str]:
    """The domain corpus's files (a missing path or unknown suffix fails here, first)."""
    from ptm_core.data.sources import find_inputs

    return [str(f.path) for f in find_inputs(corpus)]


def extend(base: str, corpus: str, output: Path, max_new: int, min_count: int) -> Path:
    """``ptm extend-vocab``; an earlier output of this flow is replaced."""
    from ptm_core.checkpoints.extend_vocab import extend_vocabulary

    result = extend_vocabulary(
        base, corpus, output, max_new=max_new, min_count=min_count, overwrite=True
    )
    print(f"extend-vocab: {len(result.words)} words, {result.old_size} -> {result.new_size} ids")
    return result.output


def pretrain(experiment: str, init_from: Path, corpus: str, steps: str, output: Path) -> Path:
    """``ptm pretrain experiment=... init_from=... data.corpus=...``; returns its ``final/``."""
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        [
            f"experiment={experiment}",
            f"init_from={init_from}",
            f"data.corpus={corpus}",
            f"trainer.max_steps={steps}",
            f"trainer.output_dir={output}",
        ]
    )
    return Path(run_composed(cfg).encoder_dir)


def finetune_one(overrides: list[str]) -> dict[str, Any]:
    """One ``ptm finetune`` run; its task's headline dev metric as ``headline``."""
    from flows.finetune import headline_metric, run_one

    run = run_one(overrides)
    metric = "dev/" + headline_metric(run["task"]).split("/", 1)[1]
    return {**run, "metric": metric, "headline": float(run["final_metrics"].get(metric, "nan"))}


def compare(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Mean ± std (sample) of the headline metric per arm, and the per-seed gain."""
    rows: list[dict[str, Any]] = []
    arm_values: list[list[float]] = []
    for arm, done in runs.items():
        values = [float(r["headline"]) for r in done]
        arm_values.append(values)
        rows.append(
            {
                "arm": arm,
                "metric": done[0]["metric"] if done else "",
                "mean": statistics.fmean(values) if values else float("nan"),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "values": values,
            }
        )
    base, adapted = arm_values[0], arm_values[1]
    gains = [a - b for a, b in zip(adapted, base, strict=True)]
    rows[1]["gain"] = statistics.fmean(gains) if gains else float("nan")
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The comparison as a markdown table."""
    lines = ["| model | metric | mean ± std | per seed | gain |", "|---|---|---|---|---|"]
    for row in rows:
        gain = f"{row['gain']:+.4f}" if "gain" in row else ""
        seeds = ", ".join(f"{v:.4f}" for v in row["values"])
        lines.append(
            f"| {row['arm']} | {row['metric']} | {row['mean']:.4f} ± {row['std']:.4f} | "
            f"{seeds} | {gain} |"
        )
    return "\n".join(lines) + "\n"
