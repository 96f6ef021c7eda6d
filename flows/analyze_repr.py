"""``ptm analyze MODEL representations|attention|heads``: what a model's layers and heads do.

Each function does the work in this process and writes ``<name>.json``, ``<name>.md`` and
PNGs into one output folder (replaced only when it is an earlier ptm analysis and
``overwrite`` is set); :func:`run_and_publish` is what the Prefect ``analyze`` flow calls.

- :func:`representations`: anisotropy and cosine distribution per layer (Ethayarajh, 2019),
  linear CKA between every layer of the model and of ``compare`` (Kornblith et al., 2019).
- :func:`attention`: per-head attention entropy and mass on [CLS], [SEP], the token itself
  and marked tokens (Clark et al., 2019).
- :func:`heads`: Michel et al.'s (2019) head importance on a fine-tuned task with its
  labelled data, checked against an exhaustive single-head ablation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.analyze_repr_report import (
    attention_markdown,
    heads_markdown,
    plot_anisotropy,
    plot_attention,
    plot_cka,
    plot_heads,
    representations_markdown,
)

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

#: What ``ptm analyze`` writes (recorded in the output folder's marker).
KIND = "analysis"
#: ``--sentences`` when none is given: the bundled sample corpus, one sentence a line.
DEFAULT_SENTENCES = "data_specs/text_corpus/sample/corpus.txt"
#: The probes of this module, with the PNGs each report embeds.
PROBES: dict[str, tuple[str, ...]] = {
    "representations": ("anisotropy.png", "cka.png"),
    "attention": ("attention.png",),
    "heads": ("heads.png",),
}


def _write(
    output: Path,
    overwrite: bool,
    name: str,
    record: dict[str, Any],
    markdown: str,
    plots: Sequence[Callable[[Path], Path]],
) -> None:
    from ptm_core.atomic import atomic_directory

    with atomic_directory(
        output, kind=KIND, overwrite=overwrite, option="--overwrite", legacy=False
    ) as tmp:
        (tmp / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        for plot in plots:
            plot(tmp)
        (tmp / f"{name}.md").write_text(markdown, encoding="utf-8")


def _sentences(path: str | Path, limit: int | None) -> list[str]:
    from ptm_core.analysis.sentence_states import read_sentences

    sentences = read_sentences(path, limit=limit)
    logger.info("%d sentences from %s", len(sentences), path)
    return sentences


def _rounded(table: torch.Tensor, digits: int = 6) -> list[Any]:
    return [[round(float(v), digits) for v in row] for row in table.tolist()]


def representations(
    model: str | Path,
    output: str | Path,
    *,
    sentences: str | Path = DEFAULT_SENTENCES,
    compare: str | Path | None = None,
    max_sentences: int | None = 500,
    max_length: int = 128,
    pairs: int = 2000,
    max_tokens: int = 4000,
    batch_size: int = 32,
    seed: int = 0,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Anisotropy per layer of ``model`` (and ``compare``), and their layers' linear CKA.

    Args:
        model: a folder ptm reads as an encoder (pre-training or task ``final/``, HF folder).
        output: the folder to write.
        sentences: a text file, one sentence a line.
        compare: a second model with the same tokenizer (pre-trained vs fine-tuned, a KG
            model vs its kg-free baseline); without it CKA compares ``model``'s layers with
            each other.
        max_sentences: read at most this many sentences.
        max_length: tokens per sentence (longer ones are cut).
        pairs: random cross-sentence token pairs for anisotropy.
        max_tokens: tokens anisotropy and CKA run on (a seeded sample when there are more;
            the same tokens for both models).
        batch_size: sentences per forward pass.
        seed: the sampling seed.
        overwrite: replace an earlier ptm analysis at ``output``.

    Returns:
        The record written to ``representations.json``, with ``markdown`` and ``output``.
    """
    from ptm_core.analysis.representations import anisotropy, cka_matrix
    from ptm_core.analysis.sentence_states import load_analysed_encoder, token_states
    from ptm_core.atomic import check_output_directory

    out = Path(output)
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    texts = _sentences(sentences, max_sentences)
    folders = [model] if compare is None else [model, compare]
    states, runs = [], []
    rows: list[list[int]] | None = None
    for folder in folders:
        encoder = load_analysed_encoder(folder)
        encoded = encoder.encode(texts, max_length)
        if rows is not None and encoded != rows:
            raise ValueError(
                f"{folder}: its tokenizer splits the sentences into other tokens than "
                f"{model}'s; CKA compares the same tokens, so compare models that share a "
                "tokenizer (pre-trained vs fine-tuned, a KG model vs its kg-free baseline)"
            )
        rows = encoded
        state = token_states(
            encoder, encoded, batch_size=batch_size, max_tokens=max_tokens, seed=seed
        )
        result = anisotropy(state.layers, state.sentence_of, pairs=pairs, seed=seed)
        states.append(state)
        runs.append(
            {
                "model": str(folder),
                "layers": len(state.layers) - 1,
                "anisotropy": [round(float(v), 6) for v in result.mean],
                "quantiles": _rounded(result.quantiles()),
            }
        )
        del encoder
    tokens = states[0].available
    matrix = cka_matrix(states[0].layers, states[-1].layers)
    record: dict[str, Any] = {
        "sentences_file": str(sentences),
        "sentences": len(texts),
        "tokens": tokens,
        "pairs": pairs,
        "quantile_levels": [0.05, 0.25, 0.5, 0.75, 0.95],
        "models": runs,
        "cka": {
            "first": str(model),
            "second": str(compare if compare is not None else model),
            "tokens": int(states[0].sentence_of.numel()),
            "matrix": _rounded(matrix),
        },
        "seed": seed,
    }
    markdown = representations_markdown(record)
    _write(
        out,
        overwrite,
        "representations",
        record,
        markdown,
        [
            lambda tmp: plot_anisotropy(runs, tmp / "anisotropy.png"),
            lambda tmp: plot_cka(
                record["cka"]["matrix"], str(model), record["cka"]["second"], tmp / "cka.png"
            ),
        ],
    )
    return {**record, "markdown": markdown, "output": str(out)}


def attention(
    model: str | Path,
    output: str | Path,
    *,
    sentences: str | Path = DEFAULT_SENTENCES,
    mark_tokens: Sequence[str] = (),
    kg: str | Path | None = None,
    max_sentences: int | None = 500,
    max_length: int = 128,
    batch_size: int = 16,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Per-head attention entropy and attention mass of ``model`` on ``sentences``.

    Args:
        model: a folder ptm reads as an encoder (pre-training or task ``final/``, HF folder).
        output: the folder to write.
        sentences: a text file, one sentence a line.
        mark_tokens: tokens (as the tokenizer writes them, e.g. ``paris`` or ``##s``) whose
            received attention is reported as ``marked``.
        kg: read the model with its knowledge
            (:func:`~ptm_knowledge.probing.knowledge_attention.read_with_knowledge`): K-BERT
            sentence trees with branches from this KG (any encoder folder, or a K-BERT
            ``final/``), or ERNIE-THU's entity alignment (linked against this KG); ``""``
            takes the KG the folder records. Adds ``knowledge``, ``rest`` and
            ``knowledge_seen`` tables.
        max_sentences, max_length, batch_size, overwrite: as :func:`representations`.

    Returns:
        The record written to ``attention.json``, with ``markdown`` and ``output``.
    """
    import torch

    from ptm_core.analysis.attention import AttentionAccumulator, attention_probabilities
    from ptm_core.analysis.sentence_states import load_analysed_encoder
    from ptm_core.atomic import check_output_directory

    out = Path(output)
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    texts = _sentences(sentences, max_sentences)
    reading = None
    if kg is not None:
        if mark_tokens:
            raise ValueError("give --kg (knowledge tokens) or --mark-tokens, not both")
        from ptm_knowledge.probing.knowledge_attention import read_with_knowledge

        reading = read_with_knowledge(
            model, texts, kg or None, max_length=max_length, batch_size=batch_size
        )
        special = reading.special_ids
        totals = AttentionAccumulator(special["cls"], special["sep"])
        for batch in reading.batches:
            totals.add(
                batch.probs,
                batch.input_ids,
                batch.real,
                knowledge=batch.knowledge,
                visibility=batch.visibility,
            )
    else:
        encoder = load_analysed_encoder(model)
        marked_ids = _token_ids(encoder.tokenizer, mark_tokens, model)
        ids_rows = encoder.encode(texts, max_length)
        special = encoder.special_ids
        totals = AttentionAccumulator(special["cls"], special["sep"])
        for _, ids, mask in encoder.batches(ids_rows, batch_size, "attention"):
            probs = attention_probabilities(encoder.encoder, ids, mask)
            marked = torch.isin(ids, torch.tensor(marked_ids)) if marked_ids else None
            totals.add(probs, ids, mask, marked=marked)
    stats = totals.result()
    record: dict[str, Any] = {
        "model": str(model),
        "sentences_file": str(sentences),
        "sentences": len(texts),
        "queries": stats.queries,
        "uniform_entropy": round(stats.uniform_entropy, 6),
        "marked_tokens": list(mark_tokens),
        "tables": {name: _rounded(table) for name, table in stats.tables.items()},
    }
    if reading is not None:
        record["knowledge"] = {
            "kind": reading.kind,
            "kg": reading.kg,
            "queries_seeing_knowledge": stats.seeing_knowledge,
            "uniform_knowledge_seen": round(stats.uniform_knowledge_seen, 6),
            **reading.details,
        }
    markdown = attention_markdown(record)
    _write(
        out,
        overwrite,
        "attention",
        record,
        markdown,
        [lambda tmp: plot_attention(record["tables"], tmp / "attention.png")],
    )
    return {**record, "markdown": markdown, "output": str(out)}


def _token_ids(tokenizer: Any, tokens: Sequence[str], model: str | Path) -> list[int]:
    backend = tokenizer.backend
    ids, unknown = [], []
    for token in tokens:
        found = backend.token_to_id(token)
        (unknown.append(token) if found is None else ids.append(int(found)))
    if unknown:
        raise ValueError(
            f"--mark-tokens: {', '.join(unknown)} not in {model}'s vocabulary; give tokens as "
            "the tokenizer writes them (lower-cased for an uncased BERT, '##' for word pieces)"
        )
    return ids


def heads(
    model: str | Path,
    output: str | Path,
    *,
    data: str | Path | None = None,
    batch_size: int = 8,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Head importance of a fine-tuned ``model`` against exhaustive single-head ablation.

    Args:
        model: a fine-tuned task ``final/`` (``task.json``; the loss needs the task head).
        output: the folder to write; its ``heads.json`` feeds ``ptm compress --method
            prune-heads --importance``.
        data: a labelled file of the task's format (default the task's dev file).
        batch_size: examples per batch (Michel et al.'s expectation is over batches; 1 is
            theirs exactly).
        overwrite: replace an earlier ptm analysis at ``output``.

    Returns:
        The record written to ``heads.json``, with ``markdown`` and ``output``.
    """
    from ptm_core.analysis.heads import IMPORTANCE_KEY, ablate_heads
    from ptm_core.atomic import check_output_directory
    from ptm_core.checkpoints import CheckpointError
    from ptm_core.compress.final_dir import load_final
    from ptm_core.compress.methods import dev_batches

    out = Path(output)
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    final = load_final(model)
    if final.task_config is None:
        raise CheckpointError(
            f"{model}: head importance is measured on a task's loss, and this is a pre-trained "
            "encoder (no task.json); pass a fine-tuned final/ of `ptm finetune`"
        )
    result = ablate_heads(final.model, dev_batches(final, batch_size=batch_size, data=data))
    task = final.task_config.get("task") or {}
    record: dict[str, Any] = {
        "model": str(model),
        "data": str(data or task.get("dev", "the task's dev file")),
        "batches": result.batches,
        "batch_size": batch_size,
        "base_loss": round(result.base_loss, 6),
        IMPORTANCE_KEY: _rounded(result.normalized),
        "raw_importance": _rounded(result.importance, 8),
        "loss_increase": _rounded(result.loss_increase, 8),
        "abs_change": _rounded(result.abs_change, 8),
        "spearman": round(result.spearman, 6),
        "spearman_abs": round(result.spearman_abs, 6),
    }
    markdown = heads_markdown(record)
    _write(
        out,
        overwrite,
        "heads",
        record,
        markdown,
        [lambda tmp: plot_heads(record, tmp / "heads.png")],
    )
    return {**record, "markdown": markdown, "output": str(out)}


def run_and_publish(model: str, probe: str, **settings: Any) -> dict[str, Any]:
    """Run ``probe`` (a key of :data:`PROBES`) and publish its report as a Prefect markdown
    artifact (key ``<probe>-report``) with the PNGs embedded; a no-op outside a flow run."""
    from flows.artifacts import png_data_uri, publish_markdown

    works: dict[str, Callable[..., dict[str, Any]]] = {
        "representations": representations,
        "attention": attention,
        "heads": heads,
    }
    if probe not in works:
        raise ValueError(f"probe {probe!r} is not known; use one of {', '.join(works)}")
    work = works[probe]
    result = work(model, **settings)
    markdown = result["markdown"]
    for png in PROBES[probe]:
        path = Path(result["output"]) / png
        markdown = markdown.replace(f"]({png})", f"]({png_data_uri(path)})")
    publish_markdown(f"{probe}-report", markdown, f"{probe} analysis of {model}")
    return result
