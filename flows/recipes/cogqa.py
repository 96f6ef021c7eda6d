"""CogQA training and evaluation from a composed config: ``recipe: cogqa``.

Steps: load (HotpotQA files) or generate (from ``data.kg``) bridge questions, train
System 1 then System 2 (:func:`ptm_knowledge.cogqa.train_cogqa`; System 2 on the frozen
reader's vectors, or jointly with System 1 when ``cogqa.joint`` is true) with ``cfg.model``
as the System 1 encoder, evaluate the cognitive graph and the System-1-only baseline on dev, and
write ``<output_dir>/final`` (:func:`ptm_knowledge.cogqa.save_cogqa`, by rank 0; ``final/encoder``
loads alone with ``TransformerEncoder.from_pretrained``) and ``metrics.jsonl``. Each phase
is a core Trainer run in ``<output_dir>/system1`` and ``system2`` (checkpoints, schedule,
its own ``metrics.jsonl``); with ``trainer.resume`` true (the default) running the same
command again after a crash resumes where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.atomic import atomic_write_text
from ptm_core.training.distributed import is_main_process
from ptm_core.training.metrics import MetricsLog
from ptm_knowledge.cogqa import (
    CogQATrainConfig,
    MultiHopExample,
    ReaderConfig,
    build_vocab,
    evaluate_predictions,
    generate_bridge_questions,
    open_hotpot_json,
    predict_system1_only,
    train_cogqa,
)
from ptm_knowledge.kg import load_knowledge_graph


@dataclass
class CogQARunResult:
    """Where a CogQA run put its outputs (the fields every recipe result has).

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
    data: DictConfig,
) -> tuple[Sequence[MultiHopExample], Sequence[MultiHopExample]]:
    """Train and dev questions: HotpotQA files where given (validated in one streaming
    pass, records parsed when used: :func:`~ptm_knowledge.cogqa.open_hotpot_json`), else
    generated from ``data.kg``."""
    open_hotpot_json(data.corpus)  # validate the spec sample early (fails with file:line)
    generated: list[MultiHopExample] = []
    if not (data.get("train_file") and data.get("dev_file")):
        generated = generate_bridge_questions(
            load_knowledge_graph(data.kg),
            num_distractors=data.num_distractors,
            seed=data.generate_seed,
            style=data.style,
        )
    train: Sequence[MultiHopExample] = (
        open_hotpot_json(data.train_file) if data.get("train_file") else generated[: data.num_train]
    )
    dev: Sequence[MultiHopExample] = (
        open_hotpot_json(data.dev_file) if data.get("dev_file") else generated[data.num_train :]
    )
    return train, dev


def run(cfg: DictConfig, **trainer_overrides: Any) -> CogQARunResult:
    """Train and evaluate CogQA.

    Args:
        cfg: a config composed with ``experiment=cogqa_tiny`` (``data`` as
            ``multihop_generated.yaml``, a ``cogqa`` block whose keys are
            :class:`~ptm_knowledge.cogqa.CogQATrainConfig` fields plus ``reader`` and
            ``num_threads``, ``model`` an encoder builder).
        **trainer_overrides: ``output_dir`` (the run directory) and ``resume`` are used;
            the phases' other Trainer settings come from the ``cogqa`` block.
    """
    options = cast(dict[str, Any], OmegaConf.to_container(cfg.cogqa, resolve=True))
    num_threads = int(options.pop("num_threads", 1))
    reader_options = cast(dict[str, Any], options.pop("reader", {}))
    config = CogQATrainConfig(reader=ReaderConfig(**reader_options), seed=cfg.seed, **options)
    output_dir = Path(trainer_overrides.get("output_dir", cfg.trainer.output_dir))
    resume = bool(trainer_overrides.get("resume", cfg.trainer.get("resume", True)))
    train, dev = load_questions(cfg.data)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        vocab = build_vocab(train)
        torch.manual_seed(cfg.seed)
        encoder = instantiate(cfg.model)(vocab_size=len(vocab))
        system = train_cogqa(
            train, config, vocab=vocab, encoder=encoder, output_dir=output_dir, resume=resume
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
