"""Pictures and markdown of ``ptm analyze MODEL representations|attention|heads``:
anisotropy curves and cosine distributions, CKA and attention heatmaps, head importance
against ablation."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], digits: int = 4
) -> str:
    """:func:`flows.artifacts.markdown_table`, imported on use: ``flows.artifacts`` pulls in
    torch, and ``ptm --help`` imports this module through the CLI."""
    from flows.artifacts import markdown_table as table

    return table(rows, columns, digits)


def short_name(folder: str) -> str:
    """``runs/x/final`` -> ``x/final``: enough of a path to tell two models apart."""
    path = Path(folder)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure: Any, path: str | Path) -> Path:
    from ptm_core.atomic import atomic_write_bytes

    plt = _pyplot()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())


def _heatmap(
    axis: Any,
    figure: Any,
    values: Sequence[Sequence[float]],
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
) -> None:
    rows, cols = len(values), len(values[0])
    image = axis.imshow(values, origin="lower", aspect="auto", vmin=vmin, vmax=vmax, cmap=cmap)
    figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    axis.set_title(title, fontsize=9)
    axis.set_xlabel(xlabel, fontsize=8)
    axis.set_ylabel(ylabel, fontsize=8)
    axis.set_xticks(range(cols))
    axis.set_yticks(range(rows))
    axis.tick_params(labelsize=7)
    if rows * cols <= 144:
        for i in range(rows):
            for j in range(cols):
                shade = image.cmap(image.norm(values[i][j]))
                dark = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] < 0.5
                axis.text(
                    j,
                    i,
                    f"{values[i][j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if dark else "black",
                )


def plot_anisotropy(runs: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Mean cosine similarity per layer (one line per model) and each layer's distribution
    of the first model's cosine similarities (box plots: 5/25/50/75/95 %)."""
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=100)
    for run in runs:
        left.plot(run["anisotropy"], marker="o", label=short_name(run["model"]))
    left.set_xticks(range(len(runs[0]["anisotropy"])))
    left.set_xlabel("layer (0 = embeddings)")
    left.set_ylabel("mean cosine of random token pairs")
    left.set_title("anisotropy (Ethayarajh, 2019)", fontsize=9)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    stats = [
        {"med": q[2], "q1": q[1], "q3": q[3], "whislo": q[0], "whishi": q[4], "label": str(i)}
        for i, q in enumerate(runs[0]["quantiles"])
    ]
    right.bxp(stats, showfliers=False)
    right.set_xlabel("layer")
    right.set_ylabel("cosine similarity")
    right.set_title(f"cosine distribution, {short_name(runs[0]['model'])}", fontsize=9)
    right.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def plot_cka(matrix: Sequence[Sequence[float]], first: str, second: str, path: str | Path) -> Path:
    """Heatmap of linear CKA, rows = layers of ``first``, columns = layers of ``second``."""
    plt = _pyplot()
    size = max(4.0, 0.45 * len(matrix[0]) + 2.5)
    figure, axis = plt.subplots(figsize=(size, max(3.5, 0.4 * len(matrix) + 1.5)), dpi=100)
    _heatmap(
        axis,
        figure,
        matrix,
        "linear CKA (Kornblith et al., 2019)",
        f"layer of {short_name(second)}",
        f"layer of {short_name(first)}",
        vmin=0.0,
        vmax=1.0,
    )
    return _save(figure, path)


def plot_attention(tables: Mapping[str, Sequence[Sequence[float]]], path: str | Path) -> Path:
    """One layer x head heatmap per statistic (entropy, then the attention masses)."""
    plt = _pyplot()
    names = list(tables)
    heads = len(tables[names[0]][0])
    width = max(3.2, 0.35 * heads + 2.2)
    figure, axes = plt.subplots(1, len(names), figsize=(width * len(names), 3.6), dpi=100)
    titles = {
        "entropy": "entropy (nats)",
        "cls": "mass on [CLS]",
        "sep": "mass on [SEP]",
        "self": "mass on itself",
        "marked": "mass on marked tokens",
        "knowledge": "mass on knowledge tokens",
        "rest": "mass on other tokens",
        "knowledge_seen": "knowledge mass (sentence tokens seeing it)",
    }
    for axis, name in zip(list(axes) if len(names) > 1 else [axes], names, strict=True):
        bounded = name != "entropy"
        _heatmap(
            axis,
            figure,
            tables[name],
            titles.get(name, name),
            "head",
            "layer",
            vmin=0.0 if bounded else None,
            vmax=1.0 if bounded else None,
            cmap="magma" if bounded else "viridis",
        )
    return _save(figure, path)


def plot_heads(record: Mapping[str, Any], path: str | Path) -> Path:
    """Importance and ablation heatmaps, and the importance-vs-ablation scatter."""
    plt = _pyplot()
    heads = len(record["importance"][0])
    width = max(3.2, 0.35 * heads + 2.2)
    figure, axes = plt.subplots(1, 3, figsize=(2 * width + 3.6, 3.6), dpi=100)
    _heatmap(axes[0], figure, record["importance"], "importance (per-layer l2)", "head", "layer")
    largest = max(abs(v) for row in record["loss_increase"] for v in row) or 1.0
    _heatmap(
        axes[1],
        figure,
        record["loss_increase"],
        "loss increase, head gated off",
        "head",
        "layer",
        vmin=-largest,
        vmax=largest,
        cmap="coolwarm",
    )
    raw = [v for row in record["raw_importance"] for v in row]
    change = [v for row in record["abs_change"] for v in row]
    axes[2].scatter(raw, change, s=14)
    axes[2].set_xlabel("E|dL/d xi| (Michel et al.)", fontsize=8)
    axes[2].set_ylabel("E|loss change| when gated off", fontsize=8)
    axes[2].set_title(f"Spearman {record['spearman_abs']:.2f}", fontsize=9)
    axes[2].grid(alpha=0.3)
    return _save(figure, path)


def representations_markdown(record: Mapping[str, Any]) -> str:
    """The report of :func:`flows.analyze_repr.representations`."""
    runs = record["models"]
    lines = [
        f"# Representations of `{runs[0]['model']}`",
        "",
        f"{record['sentences']} sentences from `{record['sentences_file']}`, "
        f"{record['tokens']} word-piece tokens ([CLS], [SEP] and padding left out)"
        + (
            f", of which a seeded sample of {record['cka']['tokens']} is used. "
            if record["cka"]["tokens"] < record["tokens"]
            else ". "
        )
        + f"Anisotropy = mean cosine similarity of {record['pairs']} random pairs of tokens from "
        "different sentences (Ethayarajh, 2019); near 0 for isotropic vectors, near 1 when "
        "every vector points the same way. Layer 0 is the embedding output.",
        "",
    ]
    rows = []
    for layer in range(len(runs[0]["anisotropy"])):
        row: dict[str, Any] = {"layer": layer}
        for run in runs:
            row[f"anisotropy {short_name(run['model'])}"] = run["anisotropy"][layer]
        q = runs[0]["quantiles"][layer]
        row["5% / 50% / 95% cosine"] = f"{q[0]:.3f} / {q[2]:.3f} / {q[4]:.3f}"
        rows.append(row)
    lines += [markdown_table(rows, list(rows[0]), digits=3), "", "![anisotropy](anisotropy.png)"]
    cka = record["cka"]
    first, second = short_name(cka["first"]), short_name(cka["second"])
    lines += [
        "",
        f"## Linear CKA: {first} (rows) against {second} (columns)",
        "",
        f"On the same {cka['tokens']} tokens for both. CKA is 1 for representations "
        "equal up to rotation and scale (Kornblith et al., 2019).",
        "",
    ]
    if cka["first"] != cka["second"]:
        diagonal = [row[i] for i, row in enumerate(cka["matrix"]) if i < len(row)]
        lines.append(
            "Same layer in both: " + ", ".join(f"{i}: {v:.3f}" for i, v in enumerate(diagonal))
        )
        lines.append("")
    lines += ["![CKA](cka.png)", ""]
    return "\n".join(lines)


def attention_markdown(record: Mapping[str, Any]) -> str:
    """The report of :func:`flows.analyze_repr.attention`."""
    tables = record["tables"]
    lines = [
        f"# Attention of `{record['model']}`",
        "",
        f"{record['sentences']} sentences from `{record['sentences_file']}`; "
        f"{record['queries']} real query tokens. Per layer and head: the mean entropy of a "
        "token's attention (nats; uniform attention over the sentence would give "
        f"{record['uniform_entropy']:.3f}) and the mean attention mass on [CLS], on [SEP] "
        "and on the token itself (Clark et al., 2019)"
        + (f", and on the marked tokens {record['marked_tokens']}" if "marked" in tables else "")
        + ".",
        "",
    ]
    if "knowledge" in record:
        lines += [knowledge_sentence(record), ""]
    rows = []
    for layer, entropies in enumerate(tables["entropy"]):
        row: dict[str, Any] = {"layer": layer}
        row["entropy (min / mean / max over heads)"] = (
            f"{min(entropies):.3f} / {sum(entropies) / len(entropies):.3f} / {max(entropies):.3f}"
        )
        for name in [n for n in tables if n != "entropy"]:
            values = tables[name][layer]
            row[f"{name} (mean / max)"] = f"{sum(values) / len(values):.3f} / {max(values):.3f}"
        rows.append(row)
    lines += [markdown_table(rows, list(rows[0])), "", "![attention](attention.png)", ""]
    return "\n".join(lines)


def knowledge_sentence(record: Mapping[str, Any]) -> str:
    """What the ``knowledge``, ``rest`` and ``knowledge_seen`` columns measure."""
    info = record["knowledge"]
    if info["kind"] == "kbert":
        what = (
            f"Read as K-BERT: each sentence is a sentence tree with branches from `{info['kg']}` "
            f"(at most {info['max_entities']} per subject, {info['settings']}; KG "
            f"{info['kg_mode']}, visible matrix {info['visible_matrix']}); **knowledge** is the "
            "mass on injected branch tokens. A query spreads its attention over the tokens the "
            "visible matrix lets it see only, so a sentence token far from any subject puts "
            "no mass on branches"
        )
    else:
        what = (
            f"Read as ERNIE-THU: each sentence is linked against `{info['kg']}` with the "
            f"folder's linker settings ({info['mentions']} mentions); **knowledge** is the "
            f"mass on the {info['aligned_tokens']} tokens aligned to an entity of the folder's "
            f"table ({info['entity_table']} entities; the first piece of each mention). Layers: "
            "the T-Encoder's, then the aggregators' token attention (run with the entities)"
        )
    return (
        f"{what}. **rest**: the mass on every other real token, so cls + sep + knowledge + "
        f"rest = 1 per query. **knowledge_seen**: the knowledge mass averaged over the "
        f"{info['queries_seeing_knowledge']} of {record['queries']} queries that are no "
        "knowledge token themselves and may see one (how much the sentence reads the KG); "
        f"uniform attention over what they see would give {info['uniform_knowledge_seen']:.3f}."
    )


def heads_markdown(record: Mapping[str, Any]) -> str:
    """The report of :func:`flows.analyze_repr.heads`."""
    lines = [
        f"# Head importance of `{record['model']}`",
        "",
        f"Task loss on `{record['data']}` ({record['batches']} batches): {record['base_loss']:.4f} "
        "with every head. Importance = Michel et al. (2019)'s E|dL/d xi_h| (the gradient of the "
        "loss with respect to a gate on each head's output); ablation = the loss with only "
        "that head gated to 0, for every head in turn.",
        "",
        f"- Spearman rank correlation, importance vs E|loss change| per batch: "
        f"**{record['spearman_abs']:.3f}**",
        f"- Spearman rank correlation, importance vs mean loss increase: "
        f"**{record['spearman']:.3f}** (importance is a magnitude: a head whose removal "
        "lowers the loss scores high too)",
        f"- over {sum(len(r) for r in record['importance'])} heads; with fewer than about ten "
        "heads a rank correlation says little",
        "",
        f"`heads.json`'s `importance` (normalised per layer) feeds `ptm compress "
        f"{record['model']} --method prune-heads --importance heads.json`.",
        "",
    ]
    rows = []
    for layer, (scores, increase) in enumerate(
        zip(record["importance"], record["loss_increase"], strict=True)
    ):
        rows.append(
            {
                "layer": layer,
                "importance": " ".join(f"{v:.2f}" for v in scores),
                "loss increase": " ".join(f"{v:+.4f}" for v in increase),
            }
        )
    lines += [markdown_table(rows, ["layer", "importance", "loss increase"]), ""]
    lines += ["![head importance](heads.png)", ""]
    return "\n".join(lines)
