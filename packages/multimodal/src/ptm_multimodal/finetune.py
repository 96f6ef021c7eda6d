"""Fine-tuning VisualBERT, ViLBERT, VL-BERT and LXMERT: image-text classification and VQA.

The second stage of both papers, on ptm-core's fine-tuning layer:

- ``classification``: one label per (image, text) pair (a true/false statement, NLVR2-style;
  a caption category). Cross-entropy, accuracy/F1/MCC from
  :func:`~ptm_core.finetune.metrics.compute_metrics`.
- ``vqa``: question + image regions -> one of ``K`` answers, as VQA v2 is trained (Goyal
  et al., 2017; Anderson et al., 2018; ViLBERT section 4): each answer's soft score is
  ``min(#annotators who gave it / 3, 1)`` (``count / n`` with fewer than three annotators),
  the loss is the binary cross-entropy of the ``K`` logits against those scores, summed
  over answers and averaged over questions. The metric is the official VQA accuracy: the
  predicted answer scores ``min(#humans who said it / 3, 1)`` averaged over the ten subsets
  of nine of the ten annotators (plain accuracy when a question has one answer).

Heads and loss: :mod:`ptm_multimodal.task_model`; saving and loading ``final/``:
:mod:`ptm_multimodal.task_io`; this module trains, scores and predicts.

The run is :func:`~ptm_core.finetune.scoring.train_and_score` (resume, bf16, DDP, the
metrics log, ``eval.json``); ``final/`` holds ``model.safetensors`` + ``config.json`` (the
backbone, as ``load_multimodal`` builds it), ``task_head.safetensors``, ``task.json``
(``"family": "multimodal"``) and the tokenizer. Task data:
:mod:`ptm_multimodal.task_data`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from ptm_core.families.runner import FinetuneRun
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.finetune.label_scores import LabelledPredictions
from ptm_core.finetune.metrics import compute_metrics
from ptm_core.finetune.peft_folder import save_adapter_folder
from ptm_core.finetune.scoring import FinetuneResult, train_and_score
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_multimodal.region_features import read_region_features
from ptm_multimodal.settings import ImageTextSettings
from ptm_multimodal.task_data import (
    ImageTextExample,
    ImageTextFeaturizer,
    ImageTextTaskError,
    read_image_text_task,
    vqa_accuracy,
)
from ptm_multimodal.task_io import (
    load_image_text_task_model,
    save_image_text_task_model,
    task_record,
)
from ptm_multimodal.task_model import (
    ClozeAnswerHead,
    ImageTextTaskModel,
    answer_token_ids,
    build_task_head,
    init_head_from_pretraining,
    load_backbone,
    single_piece_ids,
)
from ptm_multimodal.task_spec import ImageTextTask


def finetune_visualbert(run: FinetuneRun) -> FinetuneResult:
    """The VisualBERT family's ``finetune`` hook (``recipe: multimodal_finetune``)."""
    return _finetune(run, "visualbert")


def finetune_vilbert(run: FinetuneRun) -> FinetuneResult:
    """The ViLBERT family's ``finetune`` hook (``recipe: multimodal_finetune``)."""
    return _finetune(run, "vilbert")


def finetune_lxmert(run: FinetuneRun) -> FinetuneResult:
    """The LXMERT family's ``finetune`` hook (``recipe: multimodal_finetune``)."""
    return _finetune(run, "lxmert")


def finetune_vlbert(run: FinetuneRun) -> FinetuneResult:
    """The VL-BERT family's ``finetune`` hook (``recipe: multimodal_finetune``)."""
    return _finetune(run, "vlbert")


def finetune_imagebert(run: FinetuneRun) -> FinetuneResult:
    """The ImageBERT family's ``finetune`` hook (``recipe: multimodal_finetune``)."""
    return _finetune(run, "imagebert")


def _finetune(run: FinetuneRun, family: str) -> FinetuneResult:
    """Fine-tune ``run.init_from`` (a ``family`` final/) on ``multimodal_finetune.task``.

    Raises:
        FileNotFoundError: ``init_from`` is missing.
        ValueError: no ``multimodal_finetune`` block, or ``init_from`` is not the
            architecture the experiment names.
    """
    settings: ImageTextSettings = run.settings
    experiment = settings.experiment_name
    options = settings.multimodal_finetune
    init_from = run.init_from
    if not init_from or not (Path(init_from) / "config.json").is_file():
        raise FileNotFoundError(
            f"init_from={init_from}: experiment={experiment} fine-tunes a pre-trained "
            "VisualBERT/ViLBERT/LXMERT; give init_from=<final/ of ptm pretrain "
            "experiment=visualbert_tiny (or vilbert_tiny, lxmert_tiny)>"
        )
    if options is None:
        raise ValueError(
            f"experiment={experiment} has no multimodal_finetune block (task, ...); use "
            "experiment=visualbert_vqa_tiny or multimodal_match_finetune"
        )
    if options.architecture and options.architecture != family:
        raise ValueError(
            f"init_from={init_from} is a {family!r} model but experiment={experiment} sets "
            f"multimodal_finetune.architecture={options.architecture}; use the {family} "
            "experiment or set multimodal_finetune.architecture=null"
        )
    peft = PeftConfig.from_options(
        options, block="multimodal_finetune", max_length_key="multimodal_finetune.task.max_length"
    )
    return finetune_image_text(
        options.task,
        init_from=init_from,
        trainer=run.trainer,
        seed=run.seed,
        dropout=options.dropout,
        random_init=options.random_init,
        head=options.head,
        freeze_backbone=options.freeze_backbone,
        peft=peft,
        provenance={
            "init_from": str(init_from),
            "experiment": experiment,
            "random_init": options.random_init,
            "freeze_backbone": options.freeze_backbone,
        },
    )


@torch.no_grad()
def evaluate_image_text_task(
    model: ImageTextTaskModel,
    examples: Sequence[ImageTextExample],
    featurizer: ImageTextFeaturizer,
    *,
    batch_size: int = 64,
) -> tuple[dict[str, float], list[str]]:
    """Score ``model`` on labelled ``examples`` (metrics empty for unlabelled ones).

    Returns:
        ``(metrics, predicted label names)``. classification: ``accuracy``, ``f1``,
        ``f1_macro``, ``matthews_corrcoef``, ``loss``; vqa: ``vqa_accuracy`` (official),
        ``accuracy`` (top answer = the annotators' most common answer), ``loss``.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    predicted: list[int] = []
    losses: list[float] = []
    batches = TaskBatches(list(examples), featurizer, batch_size, shuffle=False)
    for batch in batches.iter_batches(0):
        output = model({k: v.to(device) for k, v in batch.items()})
        predicted.extend(output.logits.argmax(-1).tolist())
        if output.loss is not None:
            losses.append(float(output.loss))
    model.train(was_training)
    names = [model.label_names[i] for i in predicted]
    metrics: dict[str, float] = {}
    if model.kind == "classification" and all(e.label is not None for e in examples):
        gold = [e.label for e in examples]
        metrics = compute_metrics("classification", predicted, gold, num_labels=model.num_labels)
        # Names still, with the gold indices for the fine-tuning report's confusion matrix.
        gold_names = [model.label_names[int(g)] for g in gold if g is not None]
        names = LabelledPredictions(names, gold_names, model.label_names, "classification")
    elif model.kind == "vqa" and all(e.answers for e in examples):
        answers = [e.answers or [] for e in examples]
        metrics = {
            "vqa_accuracy": sum(vqa_accuracy(p, a) for p, a in zip(names, answers, strict=True))
            / len(names),
            "accuracy": sum(
                Counter(a).most_common(1)[0][0] == p for p, a in zip(names, answers, strict=True)
            )
            / len(names),
        }
    if metrics and losses:
        metrics["loss"] = sum(losses) / len(losses)
    return metrics, names


def finetune_image_text(
    task: ImageTextTask,
    *,
    init_from: str | Path | None = None,
    trainer: TrainerConfig,
    backbone: nn.Module | None = None,
    tokenizer: TaskTokenizer | None = None,
    seed: int = 0,
    dropout: float = 0.1,
    random_init: bool = False,
    provenance: Mapping[str, Any] | None = None,
    head: str = "cls",
    freeze_backbone: bool = False,
    peft: PeftConfig | None = None,
) -> FinetuneResult:
    """Fine-tune a pre-trained VisualBERT/ViLBERT/LXMERT on ``task`` and score its dev set.

    Args:
        task: the task (kind, files, feature directory, lengths).
        init_from: a pre-training ``final/`` (``ptm pretrain experiment=visualbert_tiny``).
        trainer: core trainer settings; ``trainer.seed`` seeds the head (and, with
            ``random_init``, the backbone).
        backbone: an in-memory backbone instead of ``init_from`` (give ``tokenizer``).
        tokenizer: its tokenizer.
        seed: batch-order seed.
        dropout: head dropout.
        random_init: rebuild ``init_from``'s architecture with fresh weights (the "no
            pre-training" baseline: every weight, head poolers included, re-initialised).
        provenance: JSON-ready facts to keep in ``task.json``.
        head: ``cls`` (a classifier on ``[CLS]``) or ``cloze`` (VisualBERT: a ``[MASK]``
            answer slot read through the MLM transform, the answer classifier initialised
            from the pre-trained MLM decoder rows of the answer words; with
            ``random_init`` the same head from its random initialisation).
        freeze_backbone: train the task head only; the backbone keeps its (pre-trained
            or random) weights, as in feature-based use.
        peft: a parameter-efficient method on the frozen backbone (LoRA, IA3, prefix):
            ``final/`` holds the adapter and the head beside a pointer to ``init_from``.

    Returns:
        :class:`~ptm_core.finetune.scoring.FinetuneResult`; ``eval.json`` holds
        ``dev/<metric>``.

    Raises:
        ImageTextTaskError: a bad task line (``file:line``, field).
        FeatureMismatchError: the task's features are not the backbone's.
        ValueError: ``trainer.layer_lr_decay`` or ``trainer.unfreeze_every`` set.
    """
    if trainer.layer_lr_decay is not None or trainer.unfreeze_every:
        raise ValueError(
            "trainer.layer_lr_decay / trainer.unfreeze_every need a single layer stack at "
            "model.encoder.layers; VisualBERT/ViLBERT/LXMERT have theirs elsewhere (two streams "
            "for ViLBERT, three encoders for LXMERT). Set them to null / 0 (trainer.schedule=slanted_triangular works)"
        )
    peft = peft if peft is not None and peft.enabled else None
    if peft is not None:
        _check_peft(peft, init_from, backbone, random_init, freeze_backbone)
    features_dir = Path(task.features or Path(task.train).parent)
    features = read_region_features(features_dir)
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    objectives: dict[str, nn.Module] = {}
    if backbone is None:
        if init_from is None:
            raise ValueError("give init_from=<a VisualBERT/ViLBERT/LXMERT final/> or backbone=")
        backbone, tokenizer, objectives = load_backbone(
            init_from, random_init=random_init, seed=trainer.seed
        )
    if tokenizer is None:
        raise ValueError("pass tokenizer= with an in-memory backbone")
    source = f"{features_dir / 'features.json'}: field 'spec'"
    backbone.check_features(features.spec, source=source)  # type: ignore[operator]
    where = str(features_dir / "features.json")
    train, names = read_image_text_task(task.train, task.kind, features, features_path=where)
    dev, _ = read_image_text_task(
        task.dev, task.kind, features, label_names=names, features_path=where
    )
    if task.kind == "classification" and len(names) < 2:
        raise ImageTextTaskError(
            Path(task.train), None, "label", f"only {names}", "give two labels or more"
        )
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    answer_head = head
    task_head = build_task_head(backbone, len(names), dropout, head=answer_head)
    if isinstance(task_head, ClozeAnswerHead):
        ids = answer_token_ids(tokenizer, names)
        mlm = getattr(objectives.get("mlm"), "head", None)
        copied = []
        if mlm is not None:
            task_head.init_from_mlm(mlm, ids)
            copied = ["mlm.transform", "mlm.decoder[answers]"]
    else:  # LXMERT's QA head rows follow the answers' token ids
        copied = init_head_from_pretraining(
            task_head, objectives, single_piece_ids(tokenizer, names)
        )
    model = ImageTextTaskModel(backbone, task_head, task.kind, names)
    if freeze_backbone:  # AdamW skips parameters that get no gradient
        backbone.requires_grad_(False)
    if peft is not None:
        attach_peft(model, peft)
    featurizer = ImageTextFeaturizer(
        tokenizer, features, task.kind, names, task.max_length, answer_slot=answer_head == "cloze"
    )
    record = {
        "task": task.to_dict(),
        "random_init": random_init,
        "freeze_backbone": freeze_backbone,
        "head_from_pretraining": copied,
        **({"provenance": dict(provenance)} if provenance else {}),
    }
    kept_tokenizer = tokenizer

    def save_final(directory: Path) -> None:
        if peft is None:
            save_image_text_task_model(
                model.to("cpu"), directory, tokenizer=kept_tokenizer, task_config=record
            )
        else:  # the adapter and the head, beside a pointer to init_from
            save_adapter_folder(
                model.to("cpu"), directory, config=peft, base=cast(Path, init_from),
                record=task_record(model, record), extra_writers=[kept_tokenizer.save],
            )  # fmt: skip

    return train_and_score(
        model,
        TaskBatches(train, featurizer, task.batch_size, seed=seed),
        trainer,
        save_final=save_final,
        score=lambda: evaluate_image_text_task(
            model, dev, featurizer, batch_size=task.eval_batch_size
        ),
        name=task.name,
        metric=task.metric,
    )


def _check_peft(
    peft: PeftConfig, init_from: object, backbone: object, random_init: bool, frozen: bool
) -> None:
    """Refuse, in one line naming the setting, what an adapter run cannot do."""
    where = f"multimodal_finetune.peft={peft.method}"
    if init_from is None or backbone is not None:
        raise ValueError(f"{where} needs init_from=<a VisualBERT/ViLBERT/LXMERT final/> (its base)")
    if random_init or frozen:
        key = "random_init" if random_init else "freeze_backbone"
        raise ValueError(f"{where} trains an adapter on the pre-trained backbone; set {key}=false")


def predict_image_text(
    directory: str | Path, path: str | Path | None = None, *, device: str = "cpu"
) -> tuple[dict[str, float], list[str]]:
    """Predict with a fine-tuned ``final/`` on a task file (default: its dev file).

    Returns:
        ``(metrics, predicted labels / answers)``; metrics are empty for an unlabelled file.
    """
    model, tokenizer, task, _ = load_image_text_task_model(directory)
    features_dir = Path(task.features or Path(task.train).parent)
    features = read_region_features(features_dir)
    model.encoder.check_features(features.spec, source=str(features_dir / "features.json"))  # type: ignore[operator]
    examples, names = read_image_text_task(
        path if path is not None else task.dev,
        task.kind,
        features,
        label_names=model.label_names,
        require_labels=False,
        features_path=features_dir / "features.json",
    )
    featurizer = ImageTextFeaturizer(
        tokenizer,
        features,
        task.kind,
        names,
        task.max_length,
        answer_slot=model.answer_head == "cloze",
    )
    return evaluate_image_text_task(
        model.to(device), examples, featurizer, batch_size=task.eval_batch_size
    )


def evaluate_finetuned_image_text(
    model_dir: str, data: str | None = None, random_init: bool = False, seed: int = 0
) -> dict[str, Any]:
    """``ptm evaluate``'s hook: the task metrics of a ``final/`` plus ``"_metric"``.

    ``random_init``: the same architecture and head with fresh weights (chance level).
    """
    if not random_init:
        metrics, _ = predict_image_text(model_dir, data)
        _, _, task, _ = load_image_text_task_model(model_dir)
        return {**metrics, "_metric": task.metric}
    model, tokenizer, task, _ = load_image_text_task_model(model_dir)
    torch.manual_seed(derive_seed(seed, "baseline"))
    fresh = load_backbone(model_dir, random_init=True, seed=seed)[0]
    answer_head = model.answer_head
    model = ImageTextTaskModel(
        fresh,
        build_task_head(fresh, model.num_labels, head=answer_head),
        model.kind,
        model.label_names,
    ).eval()
    features_dir = Path(task.features or Path(task.train).parent)
    features = read_region_features(features_dir)
    examples, names = read_image_text_task(
        data or task.dev, task.kind, features, label_names=model.label_names
    )
    featurizer = ImageTextFeaturizer(
        tokenizer, features, task.kind, names, task.max_length, answer_slot=answer_head == "cloze"
    )
    metrics, _ = evaluate_image_text_task(model, examples, featurizer)
    return {**metrics, "_metric": task.metric}
