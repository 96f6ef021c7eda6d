"""CogQA's stage for the one runner: questions -> System 1 -> System 2 -> dev metrics.

CogQA trains a task system on labelled multi-hop questions (System 1, a span reader on a
core encoder built by the ``model`` config, then System 2, a GNN over the graphs System 1
grows), so its spec declares it as the family's ``finetune`` stage
(:func:`finetune_cogqa`): a random-init ``model`` factory (or ``init_from``, a CogQA
``final/`` to train further), the typed ``data``/``cogqa`` settings and the run folder in,
the trained system and its dev metrics out. Each phase is
one core Trainer run in ``<output_dir>/system1`` and ``system2`` (its own settings derived
from the epochs, checkpoints, exact resume); the system is written to ``final/`` by rank 0.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.families.runner import FinetuneRun
from ptm_core.training.distributed import is_main_process
from ptm_core.training.metrics import MetricsLog
from ptm_knowledge.cogqa.checkpoint import load_cogqa
from ptm_knowledge.cogqa.data import generate_bridge_questions
from ptm_knowledge.cogqa.evaluation import evaluate_predictions
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.hotpot_file import open_hotpot_json
from ptm_knowledge.cogqa.training import build_vocab, fit_system, predict_system1_only
from ptm_knowledge.kg import load_knowledge_graph

if TYPE_CHECKING:
    from ptm_knowledge.cogqa_settings import CogQASettings, MultiHopData


@dataclass
class CogQARunResult:
    """Where a CogQA run put its outputs (the fields every run result has).

    Attributes:
        output_dir: the run directory.
        encoder_dir: System 1's encoder (``final/encoder``).
        metrics_path: JSON lines: training losses per step, then the dev metrics record.
        last_checkpoint: the saved system (``final``).
        final_metrics: dev metrics, ``dev/<metric>`` for the cognitive graph and
            ``dev/baseline_<metric>`` for System 1 only.
    """

    output_dir: Path
    encoder_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)


def load_questions(
    data: MultiHopData,
) -> tuple[Sequence[MultiHopExample], Sequence[MultiHopExample]]:
    """Train and dev questions: HotpotQA files where given (validated in one streaming
    pass, records parsed when used: :func:`~ptm_knowledge.cogqa.open_hotpot_json`), else
    generated from ``data.kg``."""
    if data.corpus:
        open_hotpot_json(data.corpus)  # validate the spec sample early (fails with file:line)
    generated: list[MultiHopExample] = []
    if not (data.train_file and data.dev_file):
        if not data.kg:
            raise ValueError(
                "data.kg is not set: give data.train_file and data.dev_file (HotpotQA "
                "format), or a knowledge-graph folder to generate questions from (data.kg=)"
            )
        generated = generate_bridge_questions(
            load_knowledge_graph(data.kg),
            num_distractors=data.num_distractors,
            seed=data.generate_seed,
            style=data.style,
        )
    train: Sequence[MultiHopExample] = (
        open_hotpot_json(data.train_file) if data.train_file else generated[: data.num_train]
    )
    dev: Sequence[MultiHopExample] = (
        open_hotpot_json(data.dev_file) if data.dev_file else generated[data.num_train :]
    )
    return train, dev


def finetune_cogqa(run: FinetuneRun) -> CogQARunResult:
    """Train CogQA (System 1 then System 2, :func:`~ptm_knowledge.cogqa.fit_system`) and
    evaluate the cognitive graph and the System-1-only baseline on dev.

    Args:
        run: the runner's run: ``settings`` a
            :class:`~ptm_knowledge.cogqa_settings.CogQASettings`, ``model`` the System 1
            encoder's factory (``vocab_size=`` the words of the training data),
            ``trainer.output_dir`` the run folder and ``trainer.resume``; the phases' other
            Trainer settings come from the ``cogqa`` block.

    Returns:
        :class:`CogQARunResult`; ``<output_dir>/metrics.jsonl`` holds one record per
        optimiser step (System 1's, then System 2's) and the dev metrics.
    """
    settings: CogQASettings = run.settings
    options = settings.cogqa
    if run.model is None and not run.init_from:
        raise ValueError(
            "CogQA needs System 1's encoder: a model config (model=cogqa_tiny) or "
            "init_from=<a CogQA final/ to train further>"
        )
    if options.seed != 0:
        raise ValueError("cogqa.seed: CogQA uses the run's seed; set seed=<n> at the root")
    config = dataclasses.replace(options, seed=run.seed)
    output_dir = run.output_dir
    train, dev = load_questions(settings.data)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(options.num_threads)
    try:
        start = load_cogqa(run.init_from) if run.init_from else None
        vocab = start.reader.vocab if start is not None else build_vocab(train)
        torch.manual_seed(run.seed)
        encoder = run.model(vocab_size=len(vocab)) if start is None and run.model else None
        system = fit_system(
            train,
            config,
            vocab=vocab,
            encoder=encoder,
            output_dir=output_dir,
            resume=bool(run.trainer.resume),
            start=start,
        )
        graph = evaluate_predictions(dev, {ex.id: system.predict(ex)[0] for ex in dev})
        base = evaluate_predictions(
            dev, {ex.id: predict_system1_only(system.reader, ex) for ex in dev}
        )
    finally:
        torch.set_num_threads(old_threads)
    assert system.final_dir is not None
    final = system.final_dir
    # One record per optimiser step (System 1 steps, then System 2 steps, each with its
    # loss, learning rate and gradient norm from the phase's log), then dev metrics.
    records: list[dict[str, Any]] = []
    for phase, name in (("system1", "reader"), ("system2", "reasoner")):
        for record in MetricsLog(output_dir / phase / "metrics.jsonl").read():
            records.append(
                {
                    "step": len(records) + 1,
                    **{f"{name}/{k}": record[k] for k in ("loss", "lr", "grad_norm")},
                }
            )
    final_metrics: dict[str, Any] = {
        "step": len(records),
        **{f"dev/{k}": v for k, v in graph.items()},
        **{f"dev/baseline_{k}": v for k, v in base.items()},
        "num_train": len(train),
        "num_dev": len(dev),
    }
    records.append(final_metrics)
    metrics_path = output_dir / "metrics.jsonl"
    if is_main_process():
        atomic_write_text(metrics_path, "".join(json.dumps(r) + "\n" for r in records))
    return CogQARunResult(output_dir, final / "encoder", metrics_path, final, final_metrics)
