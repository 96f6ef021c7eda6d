"""Zero-shot cross-lingual transfer by fine-tuning XLM (Lample & Conneau, 2019, section 5.1).

XLM's XNLI protocol: put a classification head on the pre-trained encoder, fine-tune the
whole model on labelled data of one language (English), and score it unchanged on the dev
sets of the other languages. Every token carries its language's id (the language
embeddings of :class:`~ptm_multilingual.model.XLMEncoder`), so a French sentence is
encoded as French although the classifier never saw one.

The pieces are ptm-core's fine-tuning layer: the head is
:class:`~ptm_core.heads.tasks.SequenceClassificationHead`, the loss and its metrics
:func:`~ptm_core.finetune.model.task_loss`, batches come from
:class:`~ptm_core.finetune.data.task_batches.TaskBatches`, training is
:func:`~ptm_core.training.run.train_and_save` (resume, bf16, DDP, the ULMFiT switches) and
the dev scores :func:`~ptm_core.finetune.metrics.compute_metrics`. What is XLM's own: the
encoder (with ``langs``), the featurizer (``<s> sentence </s>`` in the shared BPE
vocabulary, plus ``langs``) and the saved ``final/`` (``XLMEncoder.save_pretrained`` +
``task_head.safetensors`` + ``task.json`` + the tokenizer).

The frozen-feature probe :func:`~ptm_multilingual.evaluation.zero_shot_transfer` stays: it
measures what the pre-trained states carry without any fine-tuning; this module is the
fine-tuning protocol.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from ptm_core.atomic import atomic_write_text
from ptm_core.data.batches import pad_examples
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.label_scores import LABELS_FILE, LabelledPredictions, label_scores
from ptm_core.finetune.metrics import compute_metrics
from ptm_core.finetune.model import (
    TASK_FORMAT_VERSION,
    TASK_HEAD_FILE,
    TASK_JSON,
    TaskOutput,
    head_settings,
    load_head_state,
    read_task_json,
    task_loss,
)
from ptm_core.finetune.peft_folder import save_adapter_folder
from ptm_core.heads.tasks import PoolPosition, SequenceClassificationHead
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.training import TrainerConfig
from ptm_core.training.finetuning import layer_index
from ptm_core.training.run import train_and_save
from ptm_multilingual.language_tsv import read_language_tsv
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.peft_io import (
    check_xlm_peft,
    load_xlm_peft_classifier,
)
from ptm_multilingual.tokenizer import SharedBPETokenizer

EVAL_FILE = "eval.json"
XLM_TASK_FAMILY = "xlm"


class XLMSentenceFeaturizer:
    """Rows -> XLM classification batches: ``<s> sentence </s>`` with one language's id.

    Args:
        tokenizer: the shared BPE tokenizer of the checkpoint.
        lang: the language code of every row it featurizes.
        max_length: tokens per row, ``<s>`` and ``</s>`` included (longer ones are cut).

    Returns (``featurize``):
        ``input_ids``, ``attention_mask``, ``token_type_ids`` (zeros; XLM has no segment
        table), ``langs``: ``(B, L)``; ``labels (B,)`` when the rows carry labels.
    """

    def __init__(self, tokenizer: SharedBPETokenizer, lang: str, max_length: int = 128) -> None:
        if max_length < 3:
            raise ValueError(f"max_length must be >= 3 (<s>, a token, </s>), got {max_length}")
        self.tokenizer = tokenizer
        self.lang = lang
        self.lang_id = tokenizer.lang_id(lang)
        self.max_length = max_length

    def featurize(self, rows: Sequence[SentenceExample]) -> dict[str, Tensor]:
        vocab = self.tokenizer.vocab_info
        ids = self.tokenizer.encode_batch([row.text for row in rows])
        examples: list[dict[str, Any]] = []
        for row, pieces in zip(rows, ids, strict=True):
            tokens = [vocab.cls_id, *pieces[: self.max_length - 2], vocab.sep_id]
            example: dict[str, Any] = {
                "input_ids": tokens,
                "token_type_ids": [0] * len(tokens),
                "langs": [self.lang_id] * len(tokens),
            }
            if row.label is not None:
                example["labels"] = int(row.label)
            examples.append(example)
        return pad_examples(examples, vocab.pad_id)


class XLMClassifier(nn.Module):
    """An :class:`XLMEncoder` with a sentence classification head (the XNLI fine-tuning model).

    The same contract as :class:`ptm_core.finetune.model.TaskModel` (kind
    ``classification``; everything not under ``encoder.`` is the head), except that the
    encoder also reads the batch's ``langs``.

    Args:
        encoder: the (pre-trained) XLM encoder.
        head: a :class:`SequenceClassificationHead` of the encoder's width.
        num_labels: number of classes ``N``.
        label_names: names of the classes, index order.

    Inputs (``forward(batch)``):
        ``input_ids``, ``attention_mask``, ``langs`` ``(B, L)`` and optionally
        ``labels (B,)``. Output: :class:`~ptm_core.finetune.model.TaskOutput` with logits
        ``(B, N)``, the cross-entropy loss and ``accuracy`` when labels are given.
    """

    kind = "classification"

    def __init__(
        self,
        encoder: XLMEncoder,
        head: SequenceClassificationHead,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"a classifier needs num_labels >= 2, got {num_labels}")
        if label_names is not None and len(label_names) != num_labels:
            raise ValueError(f"label_names has {len(label_names)} names, num_labels={num_labels}")
        self.encoder = encoder
        self.head = head
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None

    def depth_top(self) -> int:
        """The head's depth for the ULMFiT/ELECTRA switches (``L + 1``)."""
        return self.encoder.text_config.num_layers + 1

    def parameter_depth(self, name: str) -> int:
        """Depth of a parameter: the language table is an input table, so it sits with
        the token and position embeddings at depth 0 (XLM adds it to them before the
        embedding LayerNorm); layer ``i`` at ``i + 1``; the head at ``L + 1``."""
        if name.startswith("encoder.lang_embeddings."):
            return 0
        return layer_index(name, self.encoder.text_config.num_layers, prefix="encoder.encoder.")

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        mask = batch.get("attention_mask")
        hidden = self.encoder(
            batch["input_ids"], mask, langs=batch.get("langs")
        ).last_hidden_state  # (B, L, D)
        logits = self.head(hidden, mask)  # (B, N)
        loss, metrics = task_loss(self.kind, logits, batch)
        return TaskOutput(loss=loss, logits=logits, metrics=metrics)

    def checkpoint_config(self) -> dict[str, Any]:
        """What the trainer's checkpoints record beside the weights."""
        return {
            "family": XLM_TASK_FAMILY,
            "kind": self.kind,
            "num_labels": self.num_labels,
            "label_names": self.label_names,
            "languages": self.encoder.languages,
            **head_settings(self.head),
            "encoder": self.encoder.text_config.to_dict(),
        }


def build_xlm_classifier(
    encoder: XLMEncoder,
    num_labels: int,
    dropout: float = 0.1,
    *,
    pool: PoolPosition = "first",
    label_names: Sequence[str] | None = None,
) -> XLMClassifier:
    """Put a fresh classification head on ``encoder`` (XLM summarises with ``<s>``: ``first``)."""
    head = SequenceClassificationHead(
        encoder.hidden_size,
        num_labels,
        dropout,
        pool=pool,
        initializer_range=encoder.text_config.initializer_range,
    )
    return XLMClassifier(encoder, head, num_labels, label_names=label_names)


def save_xlm_classifier(
    model: XLMClassifier,
    directory: str | Path,
    *,
    tokenizer: SharedBPETokenizer,
    task_config: Mapping[str, Any] | None = None,
    peft: PeftConfig | None = None,
    base: str | Path | XLMEncoder | None = None,
) -> Path:
    """Write ``final/`` atomically: the XLM encoder, the head, ``task.json``, the tokenizer.

    ``task.json`` is core's (``ptm_task``, ``kind``, ``num_labels``, ``label_names``,
    ``dropout``, ``pool``) plus ``"family": "xlm"`` and ``task_config``. With ``peft``,
    the adapter replaces the encoder beside a pointer to the ``base`` folder
    (:mod:`ptm_multilingual.peft_io`).
    """
    record: dict[str, Any] = {
        "ptm_task": TASK_FORMAT_VERSION,
        "family": XLM_TASK_FAMILY,
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        **head_settings(model.head),
        **dict(task_config or {}),
    }
    if peft is not None and isinstance(base, (str, Path)):
        return save_adapter_folder(
            model, directory, config=peft, base=base, record=record, extra_writers=[tokenizer.save]
        )
    text = json.dumps(record, indent=2) + "\n"
    head_state = {k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()}

    def write_task(tmp: Path) -> None:
        save_file(head_state, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        (tmp / TASK_JSON).write_text(text, encoding="utf-8")

    return model.encoder.save_pretrained(directory, extra_writers=[write_task, tokenizer.save])


def load_xlm_classifier(
    directory: str | Path,
) -> tuple[XLMClassifier, SharedBPETokenizer, dict[str, Any]]:
    """Load what :func:`save_xlm_classifier` wrote.

    Returns:
        ``(model, tokenizer, record)``: the model in eval mode, the shared tokenizer and
        ``task.json``.

    Raises:
        CheckpointError: a missing or mismatched file, named with the fix.
    """
    directory = Path(directory)
    record = read_task_json(directory / TASK_JSON)

    def build(folder: Path) -> XLMClassifier:
        return build_xlm_classifier(
            XLMEncoder.from_pretrained(folder),
            int(record["num_labels"]),
            float(record.get("dropout", 0.1)),
            pool=cast(PoolPosition, record.get("pool", "first")),
            label_names=record.get("label_names"),
        )

    if "peft" in record:  # adapter + head beside a pointer to the base XLM folder
        model = cast(XLMClassifier, load_xlm_peft_classifier(directory, record, build))
    else:
        model = build(directory)
        load_head_state(model.head, directory / TASK_HEAD_FILE, record)
    return model.eval(), SharedBPETokenizer.from_directory(directory), record


FREEZE_CHOICES = ("none", "embeddings", "encoder")


def freeze_parameters(model: XLMClassifier, freeze: str) -> None:
    """Fix part of the encoder: ``"none"``, ``"embeddings"`` (token, position and language
    tables and the embedding LayerNorm) or ``"encoder"`` (everything but the head)."""
    if freeze not in FREEZE_CHOICES:
        raise ValueError(f"freeze={freeze!r}; use one of {', '.join(FREEZE_CHOICES)}")
    if freeze == "none":
        return
    frozen: list[nn.Module] = [model.encoder]
    if freeze == "embeddings":
        frozen = [model.encoder.encoder.embeddings, model.encoder.lang_embeddings]
    for module in frozen:
        for param in module.parameters():
            param.requires_grad_(False)


@torch.no_grad()
def evaluate_xlm_classifier(
    model: XLMClassifier,
    examples: Sequence[SentenceExample],
    featurizer: XLMSentenceFeaturizer,
    *,
    batch_size: int = 64,
) -> tuple[dict[str, float], list[int]]:
    """Accuracy, F1 and MCC (``compute_metrics``) of ``model`` on labelled ``examples``.

    Returns:
        ``(metrics, predicted class indices)``; metrics add ``loss`` (mean over batches).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    batches = TaskBatches(examples, featurizer, batch_size, shuffle=False)
    predicted: list[int] = []
    gold: list[int] = []
    losses: list[float] = []
    for batch in batches.iter_batches(0):
        output = model({k: v.to(device) for k, v in batch.items()})
        predicted.extend(output.logits.argmax(-1).tolist())
        gold.extend(batch["labels"].tolist())
        if output.loss is not None:
            losses.append(float(output.loss))
    model.train(was_training)
    metrics = compute_metrics("classification", predicted, gold, num_labels=model.num_labels)
    metrics["loss"] = sum(losses) / max(len(losses), 1)
    return metrics, predicted


@dataclass
class XLMFinetuneResult:
    """Where :func:`finetune_xlm_classifier` put its outputs (the recipe result contract).

    Attributes:
        output_dir: the run directory.
        metrics_path: its ``metrics.jsonl``.
        last_checkpoint: the newest checkpoint.
        encoder_dir: ``final/`` (:func:`load_xlm_classifier` reads it).
        final_metrics: last training metrics plus ``dev/<lang>/<metric>`` and ``chance``.
        model: the fine-tuned classifier (in memory).
    """

    output_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    encoder_dir: Path
    final_metrics: dict[str, Any] = field(default_factory=dict)
    model: XLMClassifier | None = None


def finetune_xlm_classifier(
    model_dir: str | Path | XLMEncoder,
    *,
    train: tuple[str | Path, str],
    dev: Mapping[str, str | Path],
    trainer: TrainerConfig,
    tokenizer: SharedBPETokenizer | None = None,
    batch_size: int = 16,
    eval_batch_size: int = 64,
    max_length: int = 64,
    dropout: float = 0.1,
    pool: PoolPosition = "first",
    seed: int = 0,
    random_init: bool = False,
    freeze: str = "none",
    provenance: Mapping[str, Any] | None = None,
    peft: PeftConfig | None = None,
) -> XLMFinetuneResult:
    """Fine-tune XLM on one language and score it on every dev language (zero-shot).

    Args:
        model_dir: an XLM ``final/`` (``XLMEncoder.save_pretrained`` + the shared tokenizer,
            as ``ptm pretrain experiment=xlm_*`` writes it), or an :class:`XLMEncoder`
            (then pass ``tokenizer``).
        train: ``(file, lang)``: the labelled training file and its language.
        dev: language -> labelled dev file; a language other than the training one is
            scored zero-shot.
        trainer: core trainer settings (``seed`` sets the head's initialisation); the
            ULMFiT switches (``layer_lr_decay``, ``unfreeze_every``) use
            :meth:`XLMClassifier.parameter_depth` (language table with the embeddings).
        tokenizer: the shared tokenizer (default: the one in ``model_dir``).
        batch_size: training rows per batch.
        eval_batch_size: rows per scoring batch.
        max_length: tokens per row, ``<s>``/``</s>`` included.
        dropout: head dropout.
        pool: the token the head summarises (``first`` = ``<s>``, as XLM).
        seed: batch order seed.
        random_init: keep the architecture and vocabulary, re-initialise every weight
            (the "no pre-training" baseline).
        freeze: ``"none"`` (XLM: fine-tune everything), ``"embeddings"`` (keep the
            token, position and language tables fixed: the cross-lingual alignment of the
            vocabulary survives English-only updates) or ``"encoder"`` (train the head
            only: a probe of the frozen states).
        provenance: JSON-ready facts to keep in ``task.json``.
        peft: a parameter-efficient method (:mod:`ptm_multilingual.peft_io`): only the
            adapter and the head train; ``final/`` holds them beside a pointer to
            ``model_dir``.

    Returns:
        :class:`XLMFinetuneResult`; ``<output_dir>/eval.json`` holds ``final_metrics``:
        ``dev/<lang>/accuracy`` (also ``f1``, ``matthews_corrcoef``, ``loss``) and
        ``dev/<lang>/chance`` (the majority-class share of that dev set).
    """
    peft = peft if peft is not None and peft.enabled else None
    if peft is not None:
        check_xlm_peft(
            peft, base=model_dir, freeze=freeze, random_init=random_init, trainer=trainer
        )
    if isinstance(model_dir, XLMEncoder):
        if tokenizer is None:
            raise ValueError("pass tokenizer= with an in-memory XLMEncoder")
        encoder = model_dir
    else:
        encoder = XLMEncoder.from_pretrained(model_dir)
        tokenizer = tokenizer or SharedBPETokenizer.from_directory(model_dir)
    for lang in [train[1], *dev]:
        if lang not in encoder.languages:
            raise ValueError(
                f"language {lang!r} is not one of the checkpoint's languages "
                f"{encoder.languages}; use one of them (XLM has no embedding for it)"
            )
    if max_length > encoder.text_config.max_positions:
        raise ValueError(
            f"max_length={max_length} exceeds the encoder's max_positions="
            f"{encoder.text_config.max_positions}; lower max_length"
        )
    torch.manual_seed(trainer.seed)
    if random_init:
        encoder = XLMEncoder(type(encoder.encoder)(encoder.encoder.config), encoder.languages)
    train_rows, names = read_language_tsv(train[0])
    dev_rows = {lang: read_language_tsv(path, names)[0] for lang, path in dev.items()}
    model = build_xlm_classifier(encoder, len(names), dropout, pool=pool, label_names=names)
    freeze_parameters(model, freeze)
    if peft is not None:
        attach_peft(model, peft)
    record = {
        "train": {"file": str(train[0]), "lang": train[1]},
        "dev": {lang: str(path) for lang, path in dev.items()},
        "max_length": max_length,
        "random_init": random_init,
        "freeze": freeze,
        **({"provenance": dict(provenance)} if provenance else {}),
    }
    data = TaskBatches(
        train_rows, XLMSentenceFeaturizer(tokenizer, train[1], max_length), batch_size, seed=seed
    )
    shared_tokenizer = tokenizer
    run = train_and_save(
        model,
        data,
        trainer,
        save_final=lambda d: save_xlm_classifier(
            model, d, tokenizer=shared_tokenizer, task_config=record, peft=peft, base=model_dir
        ),
    )
    final_metrics = dict(run.final_metrics)
    # The fine-tuning report's confusion matrix: the training language's dev set, else the
    # first dev language (each language's scores are in eval.json).
    report_lang = train[1] if train[1] in dev_rows else next(iter(dev_rows), None)
    labels: dict[str, Any] | None = None
    for lang, rows in dev_rows.items():
        featurizer = XLMSentenceFeaturizer(tokenizer, lang, max_length)
        scores, predicted = evaluate_xlm_classifier(
            model, rows, featurizer, batch_size=eval_batch_size
        )
        gold = [int(cast(int, r.label)) for r in rows]
        counts = torch.bincount(torch.tensor(gold))
        scores["chance"] = counts.max().item() / len(rows)
        final_metrics.update({f"dev/{lang}/{k}": v for k, v in scores.items()})
        if lang == report_lang:
            labelled = LabelledPredictions(predicted, gold, names, "classification")
            labels = {**label_scores(labelled), "dev_set": f"dev ({lang})"}
    output_dir = run.result.output_dir
    atomic_write_text(output_dir / EVAL_FILE, json.dumps(final_metrics, indent=2) + "\n")
    if labels is not None:
        atomic_write_text(output_dir / LABELS_FILE, json.dumps(labels) + "\n")
    return XLMFinetuneResult(
        output_dir=output_dir,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        encoder_dir=run.final_dir,
        final_metrics=final_metrics,
        model=model,
    )
