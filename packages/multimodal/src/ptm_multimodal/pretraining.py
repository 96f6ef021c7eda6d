"""Image-text pre-training (VisualBERT, ViLBERT, LXMERT, VL-BERT): the families' plan for the runner.

:func:`plan_pretraining` turns the typed settings into data (image-text pairs with
swapped-caption negatives), the configured network and its objectives; the one runner
(:func:`ptm_core.families.runner.run_pretraining`) trains them in the generic
:class:`~ptm_core.models.pretraining.PretrainingModel`, writes ``final/``
(:func:`~ptm_multimodal.loading.save_multimodal`) and calls the plan's ``finish``, which
scores matching and retrieval on the evaluation pairs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from ptm_core.atomic import atomic_write_text
from ptm_core.data.stages import Stage, StagedBatches
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import IGNORE_INDEX, ObjectiveMix
from ptm_core.objectives.base import Batch
from ptm_core.objectives.inputs import TextBackbone, build_objective
from ptm_core.seeding import derive_seed
from ptm_core.training.protocols import BatchSource
from ptm_multimodal.caption_tokenizer import caption_tokenizer_file, load_caption_tokenizer
from ptm_multimodal.data import (
    ImageTextBatches,
    ImageTextDataset,
    InMemoryPairs,
    PairRows,
    read_image_text_pairs,
)
from ptm_multimodal.evaluation import MATCH_OBJECTIVES, matching_accuracy, retrieval_recall
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.feature_spec import FeatureMismatchError, FeatureSpec
from ptm_multimodal.loading import save_multimodal
from ptm_multimodal.prepared import GridExtraction, open_image_text
from ptm_multimodal.run_migration import rename_network_tensors
from ptm_multimodal.settings import ImageTextData, PretrainStage, SyntheticPairs
from ptm_multimodal.text_rows import TextOnlyRows
from ptm_multimodal.visualbert import VisualBertModel
from ptm_multimodal.vlbert import VlbertModel

if TYPE_CHECKING:
    from ptm_core.training.run import TrainingRun

logger = logging.getLogger(__name__)


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
    synthetic: SyntheticPairs | None = None,
    name: str = "train",
) -> tuple[Path, Path | None]:
    """The train/eval spec folders; synthetic ones are generated once under
    ``output_dir/data`` (the training scenes in ``data/<name>``)."""
    synthetic = synthetic or SyntheticPairs()
    if train_dir is None:
        # imported here so that `python -m ptm_multimodal.synthetic` runs without a warning
        from ptm_multimodal.synthetic import write_synthetic_dataset

        train_dir = output_dir / "data" / name
        if not (Path(train_dir) / "pairs.jsonl").exists():
            write_synthetic_dataset(
                train_dir,
                synthetic.num_images,
                seed=synthetic.seed,
                caption_noise=synthetic.caption_noise,
            )
        if eval_dir is None and synthetic.eval_images:
            eval_dir = output_dir / "data" / "eval"
            if not (Path(eval_dir) / "pairs.jsonl").exists():
                write_synthetic_dataset(eval_dir, synthetic.eval_images, seed=synthetic.eval_seed)
    return Path(train_dir), None if eval_dir is None else Path(eval_dir)


def prepare_datasets(
    output_dir: Path,
    *,
    train_dir: str | Path | None,
    eval_dir: str | Path | None,
    synthetic: SyntheticPairs | None = None,
) -> tuple[ImageTextDataset, ImageTextDataset | None]:
    """Read the train/eval specs whole (see :func:`data_dirs`); memory grows with them."""
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
    synthetic: SyntheticPairs | None = None,
    tokenizer_for: Callable[[Path], TaskTokenizer],
    max_length: int = 32,
    prepare: bool = True,
    cache_dir: str | Path | None = None,
    extraction: GridExtraction | None = None,
    name: str = "train",
) -> tuple[PairRows, PairRows | None, FeatureSpec, Path]:
    """The train and eval pairs, prepared into the cache once (``prepare``) or read whole.

    Returns:
        ``(train, eval or None, feature spec, the captions' vocab.txt or tokenizer.json)``.
    """
    train_path, eval_path = data_dirs(
        output_dir, train_dir=train_dir, eval_dir=eval_dir, synthetic=synthetic, name=name
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
        spec, vocab_path = train.features.spec, caption_tokenizer_file(train_path)
        tokenizer = tokenizer_for(vocab_path)
        train_rows = InMemoryPairs(train, tokenizer, max_length)
        eval_rows = None if evaluation is None else InMemoryPairs(evaluation, tokenizer, max_length)
        eval_spec = None if evaluation is None else evaluation.features.spec
    if eval_spec is not None:
        spec.check_compatible(eval_spec, source=str(Path(eval_path) / "features.json"))  # type: ignore[arg-type]
    return train_rows, eval_rows, spec, vocab_path


@dataclass
class OpenedStage:
    """One stage of ``data.stages`` with its pairs (:func:`open_stages`)."""

    stage: PretrainStage
    rows: PairRows


def open_stages(
    output_dir: Path,
    data: ImageTextData,
    *,
    tokenizer_for: Callable[[Path], TaskTokenizer],
) -> tuple[list[OpenedStage], PairRows | None, FeatureSpec, Path]:
    """The pairs of every stage of ``data.stages`` (or of ``data.train_dir`` as the one
    stage), and the evaluation pairs.

    Synthetic stages are generated under ``output_dir/data/<stage name>``; with synthetic
    data and no ``data.eval_dir`` the evaluation scenes come from the last stage's
    ``synthetic`` settings (the clean data the schedule ends on).

    Returns:
        ``(stages, eval or None, feature spec, the first stage's vocab.txt/tokenizer.json)``.

    Raises:
        ValueError: both ``data.stages`` and ``data.train_dir`` are set, two stages share a
            name, or a stage's vocabulary is not the first stage's.
        FeatureMismatchError: a stage's features differ from the first stage's.
    """
    stages = list(data.stages) or [
        PretrainStage(name="train", steps=0, train_dir=data.train_dir, synthetic=data.synthetic)
    ]
    if data.stages and data.train_dir is not None:
        raise ValueError(
            f"data.train_dir={data.train_dir} and data.stages are both set; give each "
            "stage its own train_dir (data.stages[i].train_dir) and set data.train_dir=null"
        )
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"data.stages: stage names must differ, got {names}")
    opened: list[OpenedStage] = []
    evaluation: PairRows | None = None
    spec: FeatureSpec | None = None
    vocab_path: Path | None = None
    for number, stage in enumerate(stages):
        last = number == len(stages) - 1
        synthetic = stage.synthetic
        if not last:  # the evaluation scenes come from the last stage only
            synthetic = replace(synthetic, eval_images=0)
        rows, held_out, stage_spec, stage_vocab = open_pairs(
            output_dir,
            train_dir=stage.train_dir,
            eval_dir=data.eval_dir if last else None,
            synthetic=synthetic,
            tokenizer_for=tokenizer_for,
            max_length=data.max_length,
            prepare=data.prepare,
            cache_dir=data.cache_dir,
            extraction=_extraction(data),
            name=stage.name,
        )
        where = f"data.stages[{number}] ({stage.name})"
        if spec is None or vocab_path is None:
            spec, vocab_path = stage_spec, stage_vocab
        else:
            spec.check_compatible(stage_spec, source=where)
            if stage_vocab.read_bytes() != vocab_path.read_bytes():
                raise ValueError(
                    f"{where}: its captions' vocabulary {stage_vocab} differs from the first "
                    f"stage's {vocab_path}; every stage must share one vocabulary (write the "
                    "same vocab.txt into each stage's folder)"
                )
        if last:
            evaluation = held_out
        opened.append(OpenedStage(stage, rows))
    assert spec is not None and vocab_path is not None
    return opened, evaluation, spec, vocab_path


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


@dataclass(frozen=True)
class GroundedLabels:
    """The objectives' data side, then the masked-LM labels image-text pre-training keeps.

    Labels of swapped-caption rows (``match_label`` 0) are ignored: their text is not
    grounded in the image (as ViLBERT does). For a single-stream network whose output also
    covers the regions (VisualBERT: ``(B, L + R, D)``) the labels are padded with
    ``IGNORE_INDEX`` over the ``R`` region slots, so the core masked-LM objective runs
    unchanged. Picklable, for DataLoader workers.

    Args:
        transform: the objective mix's ``collate``.
        regions_in_output: the network's output holds the region slots after the text.
        extra_slots: further output slots after the regions' (VL-BERT: its whole-image
            element and ``[END]``, 2).
    """

    transform: Callable[[Batch, torch.Generator], Batch]
    regions_in_output: bool = False
    extra_slots: int = 0

    def __call__(self, batch: Batch, generator: torch.Generator) -> Batch:
        batch = self.transform(batch, generator)
        if "mlm_labels" not in batch:
            return batch
        labels = batch["mlm_labels"]
        if "match_label" in batch:
            labels = labels.masked_fill(batch["match_label"][:, None] == 0, IGNORE_INDEX)
        if self.regions_in_output:
            regions = batch["visual_features"].shape[1]
            labels = nn.functional.pad(labels, (0, regions + self.extra_slots), value=IGNORE_INDEX)
        return {**batch, "mlm_labels": labels}


def _extraction(data: ImageTextData) -> GridExtraction | None:
    if data.extraction is None:
        return None
    fields = dict(data.extraction)
    if fields.get("pool") is not None:
        fields["pool"] = tuple(fields["pool"])
    try:
        return GridExtraction(**fields)
    except TypeError:
        valid = ", ".join(GridExtraction.__dataclass_fields__)
        raise ValueError(
            f"data.extraction={data.extraction}: give backbone and any of {valid}"
        ) from None


def text_only_rows(
    output_dir: Path, data: ImageTextData, network: nn.Module, tokenizer: TaskTokenizer
) -> TextOnlyRows | None:
    """The text-only rows of ``data.text_only`` (None when unset); a generated corpus is
    written once to ``output_dir/data/text_corpus.txt``.

    Raises:
        ValueError: the network does not take text-only rows (only VL-BERT does).
    """
    settings = data.text_only
    if settings is None:
        return None
    if not (isinstance(network, VlbertModel) and network.text_only_embedding is not None):
        raise ValueError(
            "data.text_only: text-only rows are VL-BERT's pre-training on text corpora "
            f"(model=vlbert_*); {type(network).__name__} has no text-only input. Set "
            "data.text_only=null"
        )
    if settings.max_length > network.text_positions:
        raise ValueError(
            f"data.text_only.max_length={settings.max_length} exceeds the model's "
            f"max_positions={network.text_positions}"
        )
    corpus = settings.corpus
    if corpus is None:
        from ptm_multimodal.synthetic import write_text_corpus

        corpus = str(output_dir / "data" / "text_corpus.txt")
        if not Path(corpus).is_file():
            write_text_corpus(corpus, settings.synthetic_lines, seed=settings.seed)
    return TextOnlyRows.from_file(
        corpus, tokenizer, rows_per_batch=settings.rows_per_batch, max_length=settings.max_length
    )


def plan_pretraining(run: PretrainRun) -> PretrainingPlan:
    """Pre-train a VisualBERT, ViLBERT or LXMERT on image-text pairs (the families'
    ``plan_pretraining`` hook); ``init_from=<a BERT folder>`` starts the text stream from it.

    The model factory (``run.model``) is called with the data's ``vocab_size``,
    ``visual_embedding_dim`` and ``feature_spec``; each objective factory is built by
    :func:`~ptm_core.objectives.inputs.build_objective` from the network.

    Raises:
        FeatureMismatchError: the eval features differ from the train features, or the
            run directory's earlier ``final/`` was trained on other features.
        ValueError: the config has no model, or ``init_from`` (a BERT folder whose
            encoder fills the text stream, :func:`~ptm_multimodal.text_init.init_text_stream`)
            does not fit.
    """
    data: ImageTextData = run.settings.data
    if run.model is None:
        raise ValueError("image-text pre-training needs a model (model=visualbert_tiny, ...)")
    output_dir = run.output_dir
    stages, evaluation, spec, vocab_path = open_stages(
        output_dir, data, tokenizer_for=load_caption_tokenizer
    )
    final_dir = output_dir / "final"
    if (final_dir / "config.json").exists():
        check_checkpoint_features(final_dir, spec, source=str(vocab_path.parent))
    tokenizer = load_caption_tokenizer(vocab_path)
    vocab = tokenizer.vocab_info
    torch.manual_seed(derive_seed(run.seed, "init"))
    network = run.model(
        vocab_size=vocab.vocab_size, visual_embedding_dim=spec.feature_size, feature_spec=spec
    )
    network.check_features(spec, source=str(vocab_path.parent))
    if run.init_from:
        from ptm_multimodal.text_init import init_text_stream

        # The data's own file in messages (vocab_path may be the prepared cache's copy).
        first_dir = stages[0].stage.train_dir
        given = caption_tokenizer_file(first_dir) if first_dir else vocab_path
        init_text_stream(network, run.init_from, given)
    backbone = cast(TextBackbone, network)  # every multimodal model declares its text side
    mix = ObjectiveMix(
        {name: build_objective(f, backbone, vocab) for name, f in run.objectives.items()},
        dict(run.weights),
    )
    rename_network_tensors(output_dir, network, mix)
    transform = GroundedLabels(
        mix.collate,
        regions_in_output=isinstance(network, (VisualBertModel, VlbertModel)),
        extra_slots=2 if isinstance(network, VlbertModel) else 0,
    )

    text_rows = text_only_rows(output_dir, data, network, tokenizer)

    def pair_batches(rows: PairRows, seed: int) -> ImageTextBatches:
        return ImageTextBatches(
            rows,
            tokenizer,
            data.batch_size,
            negative_prob=data.negative_prob,
            transform=transform,
            seed=seed,
            max_length=data.max_length,
            num_workers=data.num_workers,
            pin_memory=torch.cuda.is_available(),
            extra_rows=text_rows,
        )

    batches: BatchSource
    if data.stages:
        accumulation = run.trainer.gradient_accumulation_steps
        batches = StagedBatches(
            [
                Stage(
                    o.stage.name, pair_batches(o.rows, run.seed + k), o.stage.steps * accumulation
                )
                for k, o in enumerate(stages)
            ]
        )
        total = sum(o.stage.steps for o in stages)
        logger.info(
            "pre-training in %d stages: %s",
            len(stages),
            ", ".join(f"{o.stage.name} ({o.stage.steps} steps)" for o in stages),
        )
        if run.trainer.max_steps != total:
            logger.warning(
                "trainer.max_steps=%d but data.stages last %d steps in all; %s",
                run.trainer.max_steps,
                total,
                "the last stage goes on past its steps"
                if run.trainer.max_steps > total
                else "the later stages are cut short",
            )
    else:
        batches = pair_batches(stages[0].rows, run.seed)
    # The same modules the runner trains, in the same wrapper: what final/ holds.
    trained = PretrainingModel(network, mix, input_keys=INPUT_KEYS)

    def save_final(directory: Path) -> None:
        save_multimodal(trained.to("cpu"), directory, tokenizer=tokenizer)

    def finish(done: TrainingRun) -> MultimodalPretrainResult:
        trained.to("cpu")
        report: dict[str, Any] = {}
        # VL-BERT pre-trains without image-text matching: nothing to score pairs with.
        if evaluation is not None and any(k in mix.objectives for k in MATCH_OBJECTIVES):
            report = evaluate_matching(trained, evaluation, tokenizer, seed=run.seed)
            atomic_write_text(
                output_dir / "evaluation.json",
                json.dumps(report, indent=2, sort_keys=True) + "\n",
            )
            logger.info("evaluation: %s", report)
        return MultimodalPretrainResult(
            output_dir=output_dir,
            encoder_dir=done.final_dir,
            metrics_path=done.result.metrics_path,
            last_checkpoint=done.result.last_checkpoint,
            final_metrics=done.final_metrics,
            evaluation=report,
        )

    return PretrainingPlan(
        network=network,
        objectives=mix,
        data=batches,
        save_final=save_final,
        finish=finish,
        final_dir=final_dir,
    )


def evaluate_matching(
    model: PretrainingModel, pairs: PairRows, tokenizer: TaskTokenizer, *, seed: int
) -> dict[str, Any]:
    """Matching accuracy (and with shuffled images) and caption->image recall on ``pairs``."""
    batches = ImageTextBatches(pairs, tokenizer, 64, shuffle=False)
    return {
        "matching": asdict(matching_accuracy(model, batches, seed=seed)),
        "matching_shuffled_images": asdict(
            matching_accuracy(model, batches, seed=seed, shuffle_images=True)
        ),
        "retrieval": asdict(retrieval_recall(model, batches)),
    }
