"""Reports and Prefect artifacts: metrics tables, loss curves, markdown reports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_bytes, atomic_write_text
from ptm_core.training.metrics import MetricsLog


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (empty when it does not exist)."""
    return MetricsLog(Path(path)).read()


def save_figure(figure: Any, path: str | Path) -> Path:
    """Write a matplotlib ``figure`` as a PNG at ``path`` atomically and close it."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())


def plot_loss_curve(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write a PNG of every ``*loss`` series against the step (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=100)
    steps = [r["step"] for r in records]
    keys = sorted({k for r in records for k in r if k == "loss" or k.endswith("/loss")})
    for key in keys:
        axis.plot(steps, [r.get(key, float("nan")) for r in records], label=key)
    axis.set_xlabel("step")
    axis.set_ylabel("loss")
    axis.grid(alpha=0.3)
    if keys:
        axis.legend()
    figure.tight_layout()
    return save_figure(figure, path)


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], digits: int = 4
) -> str:
    """A GitHub-flavoured markdown table; floats get ``digits`` significant digits."""

    def cell(value: Any) -> str:
        return f"{value:.{digits}g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


#: Most step columns of :func:`metrics_by_step` (the first step, evenly spaced ones, the last).
STEP_COLUMNS = 4


def metrics_by_step(records: Sequence[Mapping[str, Any]], columns: int = STEP_COLUMNS) -> str:
    """A markdown table of every numeric metric (one row each, losses first) at a few
    steps: the first, evenly spaced ones and the last, ``columns`` in all.

    Metrics run down the rows, so the table is as narrow with thirty metrics as with
    three; the full history is in ``metrics.jsonl``.
    """
    if not records:
        return "No metrics were logged."
    picked = sorted({round(i * (len(records) - 1) / max(1, columns - 1)) for i in range(columns)})
    shown = [records[i] for i in picked]
    names = sorted(
        {k for r in records for k, v in r.items() if k != "step" and isinstance(v, (int, float))},
        key=lambda k: (metric_direction(k) != "lower", k),
    )
    headers = [f"step {r['step']}" for r in shown]
    rows = [
        {"metric": name, **{h: r.get(name, "") for h, r in zip(headers, shown, strict=True)}}
        for name in names
    ]
    return markdown_table(rows, ["metric", *headers])


def png_data_uri(path: str | Path) -> str:
    """A PNG file as a ``data:image/png;base64,...`` URI (embeds it in markdown or HTML)."""
    import base64

    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def embedded_image(path: str | Path, alt: str) -> str:
    """Markdown that shows the PNG at ``path`` inline (a data URI: no file server needed).

    The Prefect UI renders it in a markdown artifact, and so does any markdown viewer that
    allows data URIs; the image stays readable where the file system is not shared.
    """
    return f"![{alt}]({png_data_uri(path)})"


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """Create a Prefect markdown artifact when running inside a flow; no-op otherwise
    (a plain command writes its report to a file and prints the path instead)."""
    from flows.execution import in_flow_run

    if in_flow_run():
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(markdown=markdown, key=key, description=description)


#: First line of every report ptm writes: ptm replaces a file that starts with it, and no
#: other (an invisible HTML comment in rendered markdown).
REPORT_MARKER = "<!-- written by ptm; ptm replaces this file when it writes this report again -->"
# Reports written before the marker begin with evaluate's own heading.
_LEGACY_REPORT_HEADING = "# Evaluation of `"


def check_report_path(path: str | Path) -> None:
    """Refuse a report path that ptm may not write: a folder, or a file ptm did not write.

    Raises:
        ValueError: the one line naming the path and the fix.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(
            f"{path} is a folder, and a report is a file: give a file path, e.g. "
            f"--report {path / 'evaluation.md'}"
        )
    if not path.exists():
        return
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline(4096)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror}); give another path") from None
    if not first.startswith((REPORT_MARKER, _LEGACY_REPORT_HEADING)):
        raise ValueError(
            f"{path} exists and ptm did not write it (its first line is not ptm's report "
            "marker), so ptm does not overwrite it: give another --report path, or move "
            "the file away"
        )


def write_report(path: str | Path, markdown: str) -> Path:
    """Write a markdown report atomically, headed by :data:`REPORT_MARKER`.

    Raises:
        ValueError: ``path`` is a folder or a file ptm did not write (nothing is changed).
    """
    check_report_path(path)
    text = markdown if markdown.startswith(REPORT_MARKER) else f"{REPORT_MARKER}\n{markdown}"
    return atomic_write_text(path, text)


# Gaps that count as overfitting: an accuracy-like score this much higher on training data
# (absolute), or a loss this many times the training loss (and 0.1 above it).
ACCURACY_GAP = 0.1
LOSS_RATIO = 1.5
# Held-out data kept less than this share of what training gained over the baseline (random
# init): the gain was memorised, not learned.
KEPT_SHARE = 0.25
_HIGHER_IS_BETTER = ("accuracy", "f1", "mrr", "em", "exact_match")
_LOWER_IS_BETTER = ("loss", "perplexity")


def metric_direction(name: str) -> str | None:
    """``"higher"`` / ``"lower"`` for scores and losses, ``None`` for counts and rates
    that are not a quality (``mlm/predictions``, ``dea/chance``)."""
    leaf = name.rsplit("/", 1)[-1]
    if leaf.startswith("hits") or any(
        leaf == k or leaf.endswith(f"_{k}") for k in _HIGHER_IS_BETTER
    ):
        return "higher"
    if any(leaf == k or leaf.endswith(f"_{k}") for k in _LOWER_IS_BETTER):
        return "lower"
    return None


# Sentence-pair objectives with two labels.
_TWO_WAY = ("nsp", "sop")
# How objectives are written in prose (the papers' spelling).
_OBJECTIVE_NAMES = {"dea": "dEA", "mlm": "MLM", "nsp": "NSP", "sop": "SOP", "tlm": "TLM"}


def _label(name: str) -> str:
    """``nsp/accuracy`` -> ``NSP``, ``dea/loss`` -> ``dEA loss``, ``loss`` -> ``total loss``."""
    if "/" not in name:
        return "total loss" if name == "loss" else name
    group, leaf = name.rsplit("/", 1)
    group = _OBJECTIVE_NAMES.get(group, group)
    return group if leaf == "accuracy" else f"{group} {leaf}"


def chance_level(
    name: str, held_out: Mapping[str, Any], baseline: Mapping[str, Any]
) -> tuple[float, str] | None:
    """What guessing scores on ``name``, and what to call it.

    The objective's own ``<group>/chance`` when it reports one (dEA: ``"chance"``); else
    for a two-way task (NSP, SOP) the better of the random-init score and its complement
    (a model that always gives one answer gets one of the two; with unbalanced labels the
    complement is the majority-class rate: ``"majority class"``); else the random-init
    score (``"random init"``).
    """
    group = name.rsplit("/", 1)[0] if "/" in name else ""
    own = held_out.get(f"{group}/chance") if group else None
    if isinstance(own, (int, float)) and name.endswith("accuracy"):
        return float(own), "chance"
    found = baseline.get(name)
    if not isinstance(found, (int, float)):
        return None
    if group in _TWO_WAY and name.endswith("accuracy") and 1.0 - float(found) > float(found):
        return 1.0 - float(found), "majority class"
    return float(found), "random init"


def generalisation_flags(
    train: Mapping[str, Any],
    held_out: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    logged: Mapping[str, Any] | None = None,
) -> list[str]:
    """One plain sentence per metric whose held-out value falls well short of training.

    Training is measured twice: ``logged`` (the training run's last metrics line, on its
    own examples) and ``train`` (the held-out evaluation run on the training documents,
    with its own masks and sentence pairs). The larger gap to held-out counts.

    Args:
        train: the evaluation pass on the training documents.
        held_out: the same metrics on held-out documents.
        baseline: the same metrics of a random-init model on the held-out documents.
        logged: the training run's last metrics line.

    Returns:
        Sentences such as ``"NSP: 0.99 in training, 0.61 held-out (majority class: 0.70):
        memorised, not learned."``: a score is memorised when held-out keeps less than a
        quarter of its gain over chance (:func:`chance_level`), a loss when held-out is
        worse than random init's; other large gaps are "overfitting". Counts and rates
        that are not a quality (:func:`metric_direction` ``None``) are never flagged.
    """
    flags = []
    for name in sorted(set(train) & set(held_out)):
        direction = metric_direction(name)
        b = held_out[name]
        if direction is None or not isinstance(b, (int, float)):
            continue
        measures = [
            (where, source[name])
            for where, source in (
                ("in training", logged or {}),
                ("on the training documents", train),
            )
            if isinstance(source.get(name), (int, float))
        ]
        if not measures:
            continue
        sign = 1.0 if direction == "higher" else -1.0
        where, a = max(measures, key=lambda m: sign * (m[1] - b))
        if direction == "higher":
            if a - b < ACCURACY_GAP:
                continue
            level = chance_level(name, held_out, baseline or {})
            chance, base_name = level if level is not None else (None, "")
            memorised = chance is not None and b - chance <= KEPT_SHARE * (a - chance)
            verdict = "memorised, not learned" if memorised else "overfitting, partly learned"
        else:
            if b < a * LOSS_RATIO or b - a < 0.1:
                continue
            found = (baseline or {}).get(name)
            chance = float(found) if isinstance(found, (int, float)) else None
            base_name = "random init"
            memorised = chance is not None and b >= chance
            verdict = "memorised, not learned" if memorised else "overfitting"
        suffix = f" ({base_name}: {chance:.2f})" if chance is not None else ""
        sentence = f"{_label(name)}: {a:.2f} {where}, {b:.2f} held-out{suffix}: {verdict}."
        evaluated = train.get(name)
        close = ACCURACY_GAP if direction == "higher" else 0.1
        if (
            where == "in training"
            and isinstance(evaluated, (int, float))
            and sign * (evaluated - b) < close
        ):
            sentence += (
                f" On the training documents with fresh masks and pairs it gets "
                f"{evaluated:.2f}: it memorised its training examples themselves."
            )
        flags.append(sentence)
    return flags


def generalisation_verdict(
    train: Mapping[str, Any],
    held_out: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    logged: Mapping[str, Any] | None = None,
) -> str:
    """The report's verdict (markdown): the :func:`generalisation_flags` as a list under
    a bold "Overfitting" line, or one sentence saying there is no large gap."""
    flags = generalisation_flags(train, held_out, baseline, logged)
    if flags:
        return "**Overfitting** (held-out well short of training):\n\n" + "\n".join(
            f"- {flag}" for flag in flags
        )
    return (
        f"No gap between training and held-out data above {ACCURACY_GAP} in a score or "
        f"{LOSS_RATIO}x in a loss."
    )


def generalisation_report(
    train: Mapping[str, Any],
    held_out: Mapping[str, Any],
    *,
    logged: Mapping[str, Any] | None = None,
    baseline: Mapping[str, Any] | None = None,
    baseline_name: str = "random",
) -> str:
    """Markdown: every metric on training data against held-out data, side by side, and
    a sentence for each gap large enough to call overfitting (see
    :func:`generalisation_flags`).

    Counts and reference rates (``mlm/predictions``, ``dea/mentions``, ``dea/chance``:
    :func:`metric_direction` ``None``) go in a table of their own, with no gap: a count
    that differs between splits says how much data each had, not how well it did.

    Args:
        train: an evaluation pass on the training split.
        held_out: the same evaluation on the held-out split.
        logged: the last metrics line of training (train mode: dropout, training masks),
            shown beside the evaluation pass when given.
        baseline: the held-out metrics of the baseline model.
        baseline_name: the baseline's column title, kept short (the Prefect panel is
            640 px wide); the default ``random`` is explained under the table.

    Returns:
        A markdown section body (metrics table, counts table, then the verdict sentences).
    """
    names = sorted(k for k in set(train) & set(held_out) if isinstance(train[k], (int, float)))
    metrics = [n for n in names if metric_direction(n) is not None]
    counts = [n for n in names if metric_direction(n) is None]
    # Short column titles and 3 significant digits: six columns then fit the Prefect
    # artifact panel (640 px) with names as long as dea/corrupted_accuracy.
    head = ["metric", *(["log"] if logged is not None else []), "train", "held-out"]
    columns = [*head, baseline_name, "gap"]
    rows = []
    for name in metrics:
        row: dict[str, Any] = {"metric": name}
        if logged is not None:
            row["log"] = logged.get(name, "")
        row["train"] = float(train[name])
        row["held-out"] = float(held_out[name])
        row[baseline_name] = (baseline or {}).get(name, "")
        row["gap"] = float(held_out[name]) - float(train[name])
        rows.append(row)
    count_rows = [
        {"count": name, "train": train[name], "held-out": held_out[name]} for name in counts
    ]
    verdict = generalisation_verdict(train, held_out, baseline, logged)
    legend = (
        ("log = the training run's own last metrics line; " if logged is not None else "")
        + "train = the evaluation on the training documents; gap = held-out - train"
        + ("; random = the same model from random init." if baseline_name == "random" else ".")
    )
    parts = [markdown_table(rows, columns, digits=3), legend]
    if count_rows:
        parts.append(
            "Counts and reference rates (how much each split had; not scores):\n\n"
            + markdown_table(count_rows, ["count", "train", "held-out"], digits=3)
        )
    return "\n\n".join([*parts, verdict]) + "\n"
