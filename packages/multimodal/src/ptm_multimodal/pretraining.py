"""End-to-end multimodal pre-training: data spec -> model -> Trainer -> final/ + evaluation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import safetensors.torch
import torch
from torch import nn

from ptm_core.atomic import atomic_directory, atomic_write_text
from ptm_core.objectives import Objective, ObjectiveMix
from ptm_core.objectives.inputs import TextBackbone, build_objective
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save
from ptm_multimodal.checkpoint_kinds import with_model_kind
from ptm_multimodal.data import (
    ImageTextBatches,
    ImageTextDataset,
    InMemoryPairs,
    PairRows,
    read_image_text_pairs,
)
from ptm_multimodal.evaluation import matching_accuracy, retrieval_recall
from ptm_multimodal.feature_spec import FeatureMismatchError, FeatureSpec
from ptm_multimodal.prepared import GridExtraction, open_image_text
from ptm_multimodal.pretraining_model import MultimodalPretraining

logger = logging.getLogger(__name__)

ModelFactory = Callable[..., nn.Module]
ObjectiveFactory = Callable[..., Objective]


@dataclass
class MultimodalPretrainResult:
    """Where a multimodal run put its outputs.

    Attributes:
        output_dir: the run directory.
        encoder_dir: ``final/``: ``model.safetensors`` (model + heads), ``config.json``
            (architecture, numbers, ``feature_spec``), the tokenizer files.
        metrics_path: JSON lines of training metrics.
        last_checkpoint: newest full training checkpoint (for resume).
        final_metrics: the last logged metrics record.
        evaluation: matching accuracy (also with shuffled images) and retrieval recall
            on the evaluation pairs, with chance levels (also in ``evaluation.json``).
    """

    output_dir: Path
    encoder_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)


def data_dirs(
    output_dir: Path,
    *,
    train_dir: str | Path | None,
    eval_dir: str | Path | None,
    synthetic: Mapping[str, int] | None = None,
) -> tuple[Path, Path | None]:
    """The train/eval spec folders; synthetic ones are generated once under ``output_dir/data``.

    ``synthetic`` keys: ``num_images``, ``seed``, ``eval_images``, ``eval_seed``.
    """
    synthetic = dict(synthetic or {})
    if train_dir is None:
        # imported here so that `python -m ptm_multimodal.synthetic` runs without a warning
        from ptm_multimodal.synthetic import write_synthetic_dataset

        train_dir = output_dir / "data" / "train"
        if not (Path(train_dir) / "pairs.jsonl").exists():
            write_synthetic_dataset(
                train_dir, synthetic.get("num_images", 400), seed=synthetic.get("seed", 1)
            )
        if eval_dir is None and synthetic.get("eval_images", 100):
            eval_dir = output_dir / "data" / "eval"
            if not (Path(eval_dir) / "pairs.jsonl").exists():
                write_synthetic_dataset(
                    eval_dir, synthetic.get("eval_images", 100), seed=synthetic.get("eval_seed", 2)
                )
    return Path(train_dir), None if eval_dir is None else Path(eval_dir)


def prepare_datasets(
    output_dir: Path,
    *,
    train_dir: str | Path | None,
    eval_dir: str | Path | None,
    synthetic: Mapping[str, int] | None = None,
) -> tuple[ImageTextDataset, ImageTextDataset | None]:
    """Read the train/eval specs whole (see :func:`data_dirs`); memory grows with them.

    ``synthetic`` keys: ``num_images``, ``seed``, ``eval_images``, ``eval_seed``.
    """
    train_path, eval_path = data_dirs(
        output_dir, train_dir=train_dir, eval_dir=eval_dir, synthetic=synthetic
    )
    train = read_image_text_pairs(train_path)
    evaluation = read_image_text_pairs(eval_path) if eval_path is not None else None
    if evaluation is not None:
        train.features.spec.check_compatible(
            evaluation.features.spec,
            source=str(Path(eval_path) / "features.json"),  # type: ignore[arg-type]
        )
    return train, evaluation


def open_pairs(
    output_dir: Path,
    *,
    train_dir: str | Path | None,
    eval_dir: str | Path | None,
    synthetic: Mapping[str, int] | None = None,
    tokenizer_for: Callable[[Path], WordPieceTokenizer],
    max_length: int = 32,
    prepare: bool = True,
    cache_dir: str | Path | None = None,
    extraction: GridExtraction | None = None,
) -> tuple[PairRows, PairRows | None, FeatureSpec, Path]:
    """The train and eval pairs, prepared into the cache once (``prepare``) or read whole.

    Returns:
        ``(train, eval or None, feature spec, vocab.txt)``.
    """
    train_path, eval_path = data_dirs(
        output_dir, train_dir=train_dir, eval_dir=eval_dir, synthetic=synthetic
    )
    if prepare:
        opened = [
            open_image_text(p, max_length=max_length, extraction=extraction, cache_dir=cache_dir)
            for p in (train_path, eval_path)
            if p is not None
        ]
        train_rows: PairRows = opened[0]
        spec, vocab_path = opened[0].spec, opened[0].vocab_path
        eval_rows: PairRows | None = opened[1] if len(opened) > 1 else None
        eval_spec = opened[1].spec if len(opened) > 1 else None
    else:
        if extraction is not None:
            raise ValueError(
                "features are extracted from images only when preparing; set data.prepare=true"
            )
        train, evaluation = read_image_text_pairs(train_path), None
        if eval_path is not None:
            evaluation = read_image_text_pairs(eval_path)
        spec, vocab_path = train.features.spec, train_path / "vocab.txt"
        tokenizer = tokenizer_for(vocab_path)
        train_rows = InMemoryPairs(train, tokenizer, max_length)
        eval_rows = None if evaluation is None else InMemoryPairs(evaluation, tokenizer, max_length)
        eval_spec = None if evaluation is None else evaluation.features.spec
    if eval_spec is not None:
        spec.check_compatible(eval_spec, source=str(Path(eval_path) / "features.json"))  # type: ignore[arg-type]
    return train_rows, eval_rows, spec, vocab_path


def check_checkpoint_features(directory: str | Path, spec: FeatureSpec, *, source: str) -> None:
    """Refuse features that differ from those a saved model (``final/``) was trained on.

    Raises:
        FeatureMismatchError: the checkpoint's ``feature_spec`` differs from ``spec``.
    """
    config = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    saved = config.get("feature_spec")
    if saved is None:
        raise FeatureMismatchError(
            f"{directory}/config.json has no feature_spec, so the features it was trained on "
            "are unknown; re-save the model with its FeatureSpec"
        )
    FeatureSpec.from_dict(saved, source=f"{directory}/config.json").check_compatible(
        spec, source=source
    )


def pretrain_multimodal(
    *,
    model: ModelFactory,
    objectives: Mapping[str, ObjectiveFactory],
    trainer: TrainerConfig,
    weights: Mapping[str, float] | None = None,
    train_dir: str | Path | None = None,
    eval_dir: str | Path | None = None,
    synthetic: Mapping[str, int] | None = None,
    batch_size: int = 64,
    max_length: int = 32,
    negative_prob: float = 0.5,
    seed: int = 0,
    prepare: bool = True,
    cache_dir: str | Path | None = None,
    extraction: GridExtraction | Mapping[str, Any] | None = None,
    num_workers: int = 0,
) -> MultimodalPretrainResult:
    """Pre-train a VisualBERT or ViLBERT on image-text pairs and evaluate matching.

    Args:
        model: factory called with ``vocab_size=``, ``visual_embedding_dim=`` and
            ``feature_spec=`` (the dataset's), e.g. ``partial(visualbert, hidden_size=64)``.
        objectives: name -> factory, built with
            :func:`~ptm_core.objectives.inputs.build_objective` from the model.
        trainer: trainer settings (``output_dir`` is the run directory).
        weights: objective weights (default 1.0).
        train_dir: a ``data_specs/image_text`` directory; ``None`` generates synthetic data.
        eval_dir: evaluation pairs (``None`` with synthetic data: generated).
        synthetic: generator settings when ``train_dir`` is ``None``.
        batch_size: pairs per batch.
        max_length: caption token limit.
        negative_prob: fraction of swapped-caption negatives.
        seed: data and initialisation seed.
        prepare: prepare the pairs once into a cache keyed by a fingerprint of the inputs,
            the feature extractor and the settings (:mod:`ptm_multimodal.prepared`), and
            read them per index, so memory does not grow with the pairs; ``False`` reads
            them whole (the small-data path).
        cache_dir: where pairs are prepared (default ``$PTM_CACHE_DIR/prepared``).
        extraction: extract grid features from the images with a timm backbone
            (:class:`~ptm_multimodal.prepared.GridExtraction` or its fields) instead of
            reading precomputed region features.
        num_workers: DataLoader worker processes that build batches.

    Raises:
        FeatureMismatchError: the eval features differ from the train features, or the
            run directory's earlier ``final/`` was trained on other features.
    """
    output_dir = Path(trainer.output_dir)
    if extraction is not None and not isinstance(extraction, GridExtraction):
        fields = dict(extraction)
        if fields.get("pool") is not None:
            fields["pool"] = tuple(fields["pool"])
        extraction = GridExtraction(**fields)
    train, evaluation, spec, vocab_path = open_pairs(
        output_dir,
        train_dir=train_dir,
        eval_dir=eval_dir,
        synthetic=synthetic,
        tokenizer_for=WordPieceTokenizer.from_vocab,
        max_length=max_length,
        prepare=prepare,
        cache_dir=cache_dir,
        extraction=extraction,
    )
    final_dir = output_dir / "final"
    if (final_dir / "config.json").exists():
        check_checkpoint_features(final_dir, spec, source=str(vocab_path.parent))
    tokenizer = WordPieceTokenizer.from_vocab(vocab_path)
    vocab: VocabInfo = tokenizer.vocab_info
    torch.manual_seed(derive_seed(seed, "init"))
    network = model(
        vocab_size=vocab.vocab_size, visual_embedding_dim=spec.feature_size, feature_spec=spec
    )
    network.check_features(spec, source=str(vocab_path.parent))  # type: ignore[operator]
    backbone = cast(TextBackbone, network)  # every multimodal model declares its text side
    mix = ObjectiveMix(
        {name: build_objective(factory, backbone, vocab) for name, factory in objectives.items()},
        weights,
    )
    wrapped = MultimodalPretraining(network, mix)
    batches = ImageTextBatches(
        train,
        tokenizer,
        batch_size,
        negative_prob=negative_prob,
        transform=mix.collate,
        seed=seed,
        max_length=max_length,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )

    def save_final(directory: Path) -> None:
        wrapped.to("cpu")
        with atomic_directory(directory) as tmp:
            safetensors.torch.save_model(wrapped, str(tmp / "model.safetensors"))
            (tmp / "config.json").write_text(
                json.dumps(with_model_kind(wrapped.checkpoint_config()), indent=2, sort_keys=True)
                + "\n"
            )
            tokenizer.save(tmp)

    run = train_and_save(wrapped, batches, trainer, save_final=save_final, final_dir=final_dir)
    result = run.result
    wrapped.to("cpu")
    report: dict[str, Any] = {}
    if evaluation is not None:
        eval_batches = ImageTextBatches(evaluation, tokenizer, 64, shuffle=False)
        report = {
            "matching": asdict(matching_accuracy(wrapped, eval_batches, seed=seed)),
            "matching_shuffled_images": asdict(
                matching_accuracy(wrapped, eval_batches, seed=seed, shuffle_images=True)
            ),
            "retrieval": asdict(retrieval_recall(wrapped, eval_batches)),
        }
        atomic_write_text(
            output_dir / "evaluation.json", json.dumps(report, indent=2, sort_keys=True) + "\n"
        )
        logger.info("evaluation: %s", report)
    return MultimodalPretrainResult(
        output_dir=output_dir,
        encoder_dir=final_dir,
        metrics_path=result.metrics_path,
        last_checkpoint=result.last_checkpoint,
        final_metrics=run.final_metrics,
        evaluation=report,
    )
