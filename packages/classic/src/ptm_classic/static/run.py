"""Static word embeddings (word2vec, GloVe, NNLM): the ``static_embeddings`` family's
``pretrain`` hook (``ptm pretrain experiment=word2vec_tiny``, ``glove_tiny``, ``nnlm_tiny``).

The ``model`` node names the method: its ``_target_`` is a partial of
:func:`~ptm_classic.static.word2vec.train_word2vec`,
:func:`~ptm_classic.static.glove.train_glove` or :func:`~ptm_classic.static.nnlm.train_nnlm`
(its other keys are that function's arguments), so ``model=glove_tiny`` switches the method
of any of these experiments. ``data.corpus`` (or ``data.prepared``) is streamed as word
lists. ``<trainer.output_dir>/final/`` receives the
:class:`~ptm_core.data.vector_table.VectorTable` and ``metrics.json`` (losses, neighbours and
analogies of the ``probes`` block); ``metrics.jsonl`` holds one line per epoch (word2vec,
GloVe) or per logged step (NNLM, which runs on the core Trainer). word2vec (gensim) and
GloVe train in their own loops, so this family has a ``pretrain`` hook, not a plan.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptm_classic.settings import CorpusData, StaticEmbeddingsSettings
from ptm_classic.static.corpus import SentenceCorpus
from ptm_core.atomic import atomic_write_text
from ptm_core.data.vector_table import VectorTable
from ptm_core.families.runner import PretrainRun

logger = logging.getLogger(__name__)

#: The trainer functions a ``model`` node may name, by method.
METHODS = {
    "word2vec": "ptm_classic.static.word2vec:train_word2vec",
    "glove": "ptm_classic.static.glove:train_glove",
    "nnlm": "ptm_classic.static.nnlm:train_nnlm",
}


@dataclass
class StaticEmbeddingsResult:
    """Where a static-embedding run put its outputs (the fields every recipe returns).

    Attributes:
        output_dir: the run directory.
        encoder_dir: ``final/``: the vector table (``VectorTable.load``) and ``metrics.json``.
        metrics_path: ``metrics.jsonl``.
        last_checkpoint: the trainer's last checkpoint (NNLM), else ``None``.
        final_metrics: the last metrics record.
        method: ``word2vec``, ``glove`` or ``nnlm``.
        report: neighbours and analogies of the probes.
    """

    output_dir: Path
    encoder_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    report: dict[str, Any] = field(default_factory=dict)


def method_of(train: Callable[..., Any] | None) -> str:
    """The method the ``model`` node's trainer function is.

    Raises:
        ValueError: it is none of :data:`METHODS`; the message lists them.
    """
    function = train.func if isinstance(train, functools.partial) else train
    name = f"{getattr(function, '__module__', '')}:{getattr(function, '__name__', '')}"
    for method, target in METHODS.items():
        if name == target:
            return method
    raise ValueError(
        f"model is {name!r}, not a static-embedding trainer; the static_embeddings family "
        f"takes model=word2vec_tiny, glove_tiny or nnlm_tiny (targets: "
        f"{', '.join(t.replace(':', '.') for t in METHODS.values())})"
    )


def sentences_of(data: CorpusData) -> SentenceCorpus:
    """The configured corpus as a restartable word stream."""
    return SentenceCorpus(
        None if data.prepared else data.corpus, prepared=data.prepared, lowercase=data.lowercase
    )


def pretrain_static(run: PretrainRun) -> StaticEmbeddingsResult:
    """Train the configured static embeddings and write ``final/`` and the metrics."""
    method = method_of(run.model)
    settings: StaticEmbeddingsSettings = run.settings
    trainer = run.trainer
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    final_dir = output_dir / "final"
    metrics_path = output_dir / "metrics.jsonl"
    sentences = sentences_of(settings.data)
    train: Any = run.model
    logger.info("static embeddings: %s on %r", method, sentences)
    last_checkpoint: Path | None = None
    if method == "nnlm":
        nnlm = train(sentences, trainer)
        table = nnlm.table
        last_checkpoint = nnlm.training.result.last_checkpoint
        records = [json.loads(line) for line in metrics_path.read_text("utf-8").splitlines()]
    else:
        kwargs: dict[str, Any] = {}
        if method == "glove":
            kwargs["progress"] = bool(trainer.progress)
            if train.keywords.get("cache_dir") is None:
                kwargs["cache_dir"] = default_glove_cache()
        table = train(sentences, **kwargs)
        records = [
            {"step": epoch, "epoch": epoch, "loss": float(loss)}
            for epoch, loss in enumerate(table.metadata.get("epoch_losses", []), start=1)
        ]
        atomic_write_text(metrics_path, "".join(json.dumps(r) + "\n" for r in records))
    probes = settings.probes
    report = probe_report(table, probes.neighbours, probes.analogies, k=5)
    final_metrics = dict(records[-1]) if records else {}
    table.metadata["report"] = report
    table.save(final_dir)
    atomic_write_text(
        final_dir / "metrics.json",
        json.dumps({"method": table.method, "final": final_metrics, **report}, indent=2) + "\n",
    )
    for word, neighbours in report["neighbours"].items():
        logger.info("nearest to %s: %s", word, ", ".join(w for w, _ in neighbours))
    return StaticEmbeddingsResult(
        output_dir=output_dir,
        encoder_dir=final_dir,
        metrics_path=metrics_path,
        last_checkpoint=last_checkpoint,
        final_metrics=final_metrics,
        method=method,
        report=report,
    )


def default_glove_cache() -> Path:
    """Where GloVe co-occurrence matrices are cached: ``$PTM_CACHE_DIR/glove`` or
    ``~/.cache/ptm/glove``."""
    root = os.environ.get("PTM_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "ptm") / "glove"


def probe_report(
    table: VectorTable,
    neighbours: Sequence[str],
    analogies: Sequence[Sequence[str]],
    *,
    k: int = 5,
) -> dict[str, Any]:
    """A quick sanity report: nearest neighbours and 3CosAdd analogies.

    Args:
        table: the vectors.
        neighbours: words to list neighbours of (missing ones are skipped); empty = the
            five first alphabetic words of the table (the most frequent for every method).
        analogies: ``[a, b, c, expected]`` (or ``[a, b, c]``) quadruples.
        k: neighbours (and analogy answers) listed.

    Returns:
        ``{"vocabulary": V, "dim": D, "neighbours": {word: [[w, cos], ...]},
        "analogies": [{"query", "expected", "answers", "correct"}], "analogy_accuracy"}``.
    """
    words = list(neighbours) or [w for w in table.vocab if w.isalpha()][:5]
    near = {w: [[n, round(s, 4)] for n, s in table.most_similar(w, k)] for w in words if w in table}
    solved: list[dict[str, Any]] = []
    correct = 0
    for quad in analogies:
        a, b, c, *rest = list(quad)
        if not all(w in table for w in (a, b, c)):
            continue
        answers = [[n, round(s, 4)] for n, s in table.analogy(a, b, c, k)]
        expected = rest[0] if rest else None
        correct += int(expected is not None and answers[0][0] == expected)
        solved.append(
            {
                "query": f"{a} : {b} :: {c} : ?",
                "expected": expected,
                "answers": answers,
                "correct": expected is not None and answers[0][0] == expected,
            }
        )
    scored = [s for s in solved if s["expected"] is not None]
    return {
        "vocabulary": len(table),
        "dim": table.dim,
        "neighbours": near,
        "analogies": solved,
        "analogy_accuracy": correct / len(scored) if scored else None,
    }
