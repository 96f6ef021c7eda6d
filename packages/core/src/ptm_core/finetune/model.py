"""The fine-tuning model: a pre-trained encoder plus one task head, and its losses.

BERT's fine-tuning recipe (Devlin et al., 2019, Section 4 and Fig. 4): every task puts a
small head on the same encoder and trains all parameters end to end. The losses here match
Hugging Face's ``BertFor...`` classes, so a run compares one to one with ``run_glue`` /
``run_ner`` / ``run_qa``:

- ``classification`` / ``multiple_choice``: cross-entropy (labels ``-100`` ignored);
- ``regression``: mean squared error on one output;
- ``tagging``: cross-entropy over the tokens whose label is not ``-100``;
- ``qa``: the mean of the start and end cross-entropies; positions are clamped to
  ``[0, L]`` and ``L`` is ignored (an answer outside the window does not count).

A saved fine-tuned model is a ptm encoder directory (``config.json``,
``model.safetensors``) plus ``task_head.safetensors`` and ``task.json``, written in one
atomic step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_core.checkpoints.io import CheckpointError, check_finite
from ptm_core.encoders.first_position import can_encode_first, encode_first
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.heads.sentence_pair import POOLER_ACTIVATIONS, Pooler
from ptm_core.heads.tasks import (
    MultipleChoiceHead,
    PoolerActivation,
    PoolPosition,
    QuestionAnsweringHead,
    SequenceClassificationHead,
    TokenClassificationHead,
    check_pool,
)
from ptm_core.modules.attention_structure import AttentionStructure

TASK_KINDS: tuple[str, ...] = ("classification", "regression", "tagging", "qa", "multiple_choice")
TASK_FORMAT_VERSION = 1
TASK_JSON = "task.json"
TASK_HEAD_FILE = "task_head.safetensors"
IGNORE_INDEX = -100


@dataclass
class TaskOutput:
    """What :class:`TaskModel` returns.

    Attributes:
        loss: 0-d training loss, or ``None`` when the batch carries no labels.
        logits: ``classification``/``regression`` ``(B, N)`` (``N = 1`` for regression),
            ``tagging`` ``(B, L, N)``, ``qa`` ``(B, L, 2)`` (start in ``[..., 0]``, end in
            ``[..., 1]``; see :attr:`start_logits` / :attr:`end_logits`),
            ``multiple_choice`` ``(B, C)``.
        metrics: 0-d detached tensors for the trainer's log: ``accuracy``
            (classification, tagging over labelled tokens, multiple choice),
            ``start_accuracy`` / ``end_accuracy`` (qa, over answers inside the window); empty
            without labels and for regression.
    """

    loss: Tensor | None
    logits: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)

    @property
    def start_logits(self) -> Tensor:
        """``(B, L)`` span-start scores of a ``qa`` model."""
        self._check_span()
        return self.logits[..., 0]

    @property
    def end_logits(self) -> Tensor:
        """``(B, L)`` span-end scores of a ``qa`` model."""
        self._check_span()
        return self.logits[..., 1]

    def _check_span(self) -> None:
        if self.logits.dim() != 3 or self.logits.shape[-1] != 2:
            raise ValueError(
                f"start_logits/end_logits exist for qa models only (logits (B, L, 2)); "
                f"these logits have shape {tuple(self.logits.shape)}"
            )


def check_kind(kind: str) -> None:
    """Raise a :class:`ValueError` listing the valid kinds unless ``kind`` is one."""
    if kind not in TASK_KINDS:
        raise ValueError(f"unknown task kind {kind!r}; valid: {', '.join(TASK_KINDS)}")


def check_labels(kind: str, num_labels: int, label_names: Sequence[str] | None = None) -> None:
    """Refuse a ``num_labels`` that does not fit ``kind``, or ``label_names`` of another
    length than ``num_labels`` (classification and tagging; other kinds ignore the names).

    Raises:
        ValueError: naming the field and the value it needs.
    """
    _check_num_labels(kind, num_labels)
    labelled = kind in ("classification", "tagging")
    if label_names is not None and labelled and len(label_names) != num_labels:
        raise ValueError(
            f"label_names has {len(label_names)} names but num_labels={num_labels}; give one "
            "name per class, in index order"
        )


def _check_num_labels(kind: str, num_labels: int) -> None:
    if kind == "regression" and num_labels != 1:
        raise ValueError(f"a regression task has num_labels=1 (one score), got {num_labels}")
    if kind == "classification" and num_labels < 2:
        raise ValueError(
            f"a classification task needs num_labels >= 2, got {num_labels}; for one "
            "real-valued score use kind='regression'"
        )
    if kind == "tagging" and num_labels < 1:
        raise ValueError(f"a tagging task needs num_labels >= 1 tags, got {num_labels}")


class TaskModel(nn.Module):
    """A pre-trained encoder with one fine-tuning head (Devlin et al., 2019, Fig. 4).

    The head reads ``encoder(...).last_hidden_state`` only; everything not under
    ``encoder.`` belongs to the head (the ULMFiT switches rely on this split).

    Args:
        encoder: any :class:`~ptm_core.encoders.transformer.TransformerEncoder` build
            (BERT, RoBERTa, ALBERT, ELECTRA, XLNet, ...).
        head: a head from :mod:`ptm_core.heads.tasks` that fits ``kind``.
        kind: one of :data:`TASK_KINDS`.
        num_labels: classes (classification), 1 (regression), tags (tagging); for ``qa``
            and ``multiple_choice`` it is informational (2 span ends / the number of
            choices; the head's output size does not depend on it).
        label_names: optional names of the labels, index order (kept in ``task.json`` and
            in exported Hugging Face configs as ``id2label``).
        first_position_only: when the head reads ``[CLS]`` alone (sequence-level kinds,
            ``pool="first"``), run the encoder's last layer at that position only
            (:mod:`ptm_core.encoders.first_position`: same outputs, less work); ``False``
            always runs the whole last layer.

    Inputs (``forward(batch)``):
        ``input_ids``, ``attention_mask``, ``token_type_ids``: ``(B, L)``; ``(B, C, L)`` for
        ``multiple_choice``. Labels as :attr:`TaskOutput.loss` documents: ``labels`` ``(B,)``
        (classification, multiple_choice; float for regression) or ``(B, L)`` (tagging),
        ``start_positions`` / ``end_positions`` ``(B,)`` (qa). Optional: ``position_ids``
        ``(B, L)`` (``(B, C, L)`` for ``multiple_choice``) and, except for
        ``multiple_choice``, a ``(B, L, L)`` bool visibility ``attention_mask`` (K-BERT's
        soft positions and visible matrix, Liu et al., 2020), passed to the encoder as they
        are; ``extra_embeds`` ``(B, L, E)`` (``(B, C, L, E)`` for ``multiple_choice``), added
        to the encoder's embedding sum (a family's extra input tables, computed by the
        model that wraps this one). Other keys are ignored.
    """

    def __init__(
        self,
        encoder: TransformerEncoder,
        head: nn.Module,
        kind: str,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        first_position_only: bool = True,
    ) -> None:
        super().__init__()
        check_kind(kind)
        check_labels(kind, num_labels, label_names)
        self.encoder = encoder
        self.head = head
        self.kind = kind
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.first_position_only = first_position_only

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        token_type_ids = batch.get("token_type_ids")
        position_ids = batch.get("position_ids")
        extra_embeds = batch.get("extra_embeds")
        num_choices = 0
        if self.kind == "multiple_choice":
            if input_ids.dim() != 3:
                raise ValueError(
                    "a multiple_choice batch has input_ids (B, C, L), one row per choice; got "
                    f"{tuple(input_ids.shape)}"
                )
            num_choices = input_ids.shape[1]
            input_ids = input_ids.flatten(0, 1)  # (B*C, L)
            if attention_mask is not None:
                attention_mask = attention_mask.flatten(0, 1)
            if token_type_ids is not None:
                token_type_ids = token_type_ids.flatten(0, 1)
            if position_ids is not None:
                position_ids = position_ids.flatten(0, 1)
            if extra_embeds is not None:
                extra_embeds = extra_embeds.flatten(0, 1)
        # Only an encoder given extra inputs is asked to take them (other stacks, such as
        # XLNet's, keep their own forward).
        extra = {"extra_embeds": extra_embeds} if extra_embeds is not None else {}
        if self._reads_first_only(attention_mask):
            # The head reads [CLS] only: the last layer runs one query per sequence.
            hidden = encode_first(
                self.encoder, input_ids, attention_mask, position_ids, token_type_ids, **extra
            )  # (B, 1, D)
        else:
            hidden = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,  # (B, L) padding or (B, L, L) visibility
                position_ids=position_ids,
                token_type_ids=token_type_ids,
                **extra,
            ).last_hidden_state  # (B, L, D)
        if isinstance(attention_mask, AttentionStructure):  # heads read the real tokens
            attention_mask = attention_mask.real.long()  # (B, L)
        if self.kind == "multiple_choice":
            logits = self.head(hidden, attention_mask, num_choices=num_choices)  # (B, C)
        else:
            logits = self.head(hidden, attention_mask)
        loss, metrics = task_loss(self.kind, logits, batch)
        return TaskOutput(loss=loss, logits=logits, metrics=metrics)

    def _reads_first_only(self, attention_mask: object) -> bool:
        """Whether the head reads the first position only and the encoder can compute
        just that one in its last layer (:mod:`ptm_core.encoders.first_position`)."""
        return (
            self.first_position_only
            and isinstance(self.head, (SequenceClassificationHead, MultipleChoiceHead))
            and self.head.pool == "first"
            and can_encode_first(self.encoder, attention_mask)
        )

    def checkpoint_config(self) -> dict[str, Any]:
        """What the trainer's checkpoints record in ``config.json`` beside the weights."""
        return {
            "kind": self.kind,
            "num_labels": self.num_labels,
            "label_names": self.label_names,
            **head_settings(self.head),
            "encoder": self.encoder.config.to_dict(),
        }


def head_settings(head: nn.Module) -> dict[str, Any]:
    """The ``dropout`` and ``pool`` a head was built with (what ``task.json`` records),
    and its pooler variant where it is not BERT's: ``pooler_activation`` (``"gelu"`` for
    ELECTRA, ``"relu"`` for DistilBERT) and ``pooler_input_dropout`` (``true``: ELECTRA,
    RoBERTa). A tanh pooler records neither, so ``task.json`` files stay as they were."""
    dropout = getattr(head, "dropout", None)
    settings: dict[str, Any] = {
        "dropout": float(dropout.p) if isinstance(dropout, nn.Dropout) else 0.0,
        "pool": str(getattr(head, "pool", "first")),
    }
    pooler = getattr(head, "pooler", None)
    if isinstance(pooler, Pooler) and pooler.activation != "tanh":
        settings["pooler_activation"] = pooler.activation
    if getattr(head, "input_dropout", False) is True:
        settings["pooler_input_dropout"] = True
    return settings


def pooler_variant(record: dict[str, Any]) -> dict[str, Any]:
    """``build_task_head``'s ``activation``/``input_dropout`` from a ``task.json`` record
    (BERT's tanh pooler when the record names none: every folder written before #33)."""
    return {
        "activation": record.get("pooler_activation", "tanh"),
        "input_dropout": bool(record.get("pooler_input_dropout", False)),
    }


def _accuracy(predictions: Tensor, labels: Tensor) -> Tensor:
    keep = labels != IGNORE_INDEX
    correct = ((predictions == labels) & keep).sum()
    return (correct.float() / keep.sum().clamp(min=1)).detach()


def _cross_entropy(logits: Tensor, labels: Tensor, ignore_index: int) -> Tensor:
    """Mean cross-entropy over non-ignored targets; 0 (not NaN) when every target is ignored."""
    total = F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction="sum")
    count = (labels != ignore_index).sum().clamp(min=1)
    return total / count


def task_loss(
    kind: str, logits: Tensor, batch: dict[str, Tensor]
) -> tuple[Tensor | None, dict[str, Tensor]]:
    """The loss and metrics of ``kind`` for ``logits``, or ``(None, {})`` without labels.

    Args:
        kind: one of :data:`TASK_KINDS`.
        logits: as :attr:`TaskOutput.logits`.
        batch: the batch, holding ``labels`` or ``start_positions``/``end_positions``.

    Returns:
        ``(loss, metrics)``; see :class:`TaskOutput`.
    """
    if kind == "qa":
        if "start_positions" not in batch or "end_positions" not in batch:
            return None, {}
        length = logits.shape[1]
        losses, metrics = [], {}
        for index, name in enumerate(("start", "end")):
            # HF/BERT: positions outside the window are clamped to L and ignored.
            target = batch[f"{name}_positions"].view(-1).clamp(0, length)
            scores = logits[..., index].float()  # (B, L)
            losses.append(_cross_entropy(scores, target, ignore_index=length))
            keep = target != length
            correct = ((scores.argmax(-1) == target) & keep).sum()
            metrics[f"{name}_accuracy"] = (correct.float() / keep.sum().clamp(min=1)).detach()
        return (losses[0] + losses[1]) / 2, metrics
    labels = batch.get("labels")
    if labels is None:
        return None, {}
    if kind == "regression":
        scores = logits.view(-1).float()
        return F.mse_loss(scores, labels.view(-1).to(scores.dtype)), {}
    flat = logits.reshape(-1, logits.shape[-1]).float()  # (B or B*L, N)
    target = labels.reshape(-1).long()
    loss = _cross_entropy(flat, target, ignore_index=IGNORE_INDEX)
    return loss, {"accuracy": _accuracy(flat.argmax(-1), target)}


def build_task_head(
    hidden_size: int,
    kind: str,
    num_labels: int,
    dropout: float = 0.1,
    *,
    pool: PoolPosition = "first",
    initializer_range: float = 0.02,
    activation: PoolerActivation = "tanh",
    input_dropout: bool = False,
) -> nn.Module:
    """The head :class:`TaskModel` uses for ``kind`` (see :mod:`ptm_core.heads.tasks`);
    ``activation``/``input_dropout`` choose the pooler variant of the sequence-level heads
    (ELECTRA's: ``"gelu"``, ``True``; DistilBERT's ``"relu"``) and are ignored by tagging
    and qa."""
    check_kind(kind)
    check_pool(pool)
    _check_num_labels(kind, num_labels)
    if kind in ("classification", "regression"):
        return SequenceClassificationHead(
            hidden_size,
            num_labels,
            dropout,
            pool=pool,
            initializer_range=initializer_range,
            activation=activation,
            input_dropout=input_dropout,
        )
    if kind == "tagging":
        return TokenClassificationHead(
            hidden_size, num_labels, dropout, initializer_range=initializer_range
        )
    if kind == "qa":
        return QuestionAnsweringHead(hidden_size, initializer_range=initializer_range)
    return MultipleChoiceHead(
        hidden_size,
        dropout,
        pool=pool,
        initializer_range=initializer_range,
        activation=activation,
        input_dropout=input_dropout,
    )


def build_task_model(
    encoder: TransformerEncoder,
    kind: str,
    num_labels: int,
    dropout: float = 0.1,
    *,
    pool: PoolPosition = "first",
    label_names: Sequence[str] | None = None,
    activation: PoolerActivation | None = None,
    input_dropout: bool = False,
) -> TaskModel:
    """Put a fresh head for ``kind`` on ``encoder``.

    Args:
        encoder: the pre-trained (or random) encoder.
        kind: one of :data:`TASK_KINDS`.
        num_labels: see :class:`TaskModel`.
        dropout: head dropout (BERT: 0.1; ignored by the qa head, which has none).
        pool: the token sequence-level heads summarise: ``"first"`` (``[CLS]``, BERT and
            ptm's own featurizers, also right for XLNet fed BERT-style inputs) or
            ``"last"`` (the last real token, XLNet's ``<cls>``-at-the-end layout).
        label_names: optional label names in index order.
        activation: the sequence-level heads' pooler activation, ``"tanh"`` (BERT),
            ``"gelu"`` (ELECTRA) or ``"relu"`` (DistilBERT); default the encoder config's
            ``pooler_activation`` (ReLU for an encoder imported from DistilBERT), else tanh.
        input_dropout: dropout on the summary token before the pooler too (ELECTRA,
            RoBERTa's classification head).

    An encoder whose family has heads of its own (``encoder.build_task_head(kind,
    num_labels, dropout, pool=...)``, ModernBERT's) builds the head itself; ``activation``
    and ``input_dropout`` are then its family's.

    Returns:
        The :class:`TaskModel`; the head is initialised with the encoder's
        ``initializer_range``.
    """
    own_heads = getattr(encoder, "build_task_head", None)
    if callable(own_heads):  # a family with its own heads (ModernBERT's prediction head)
        head: nn.Module = own_heads(kind, num_labels, dropout, pool=pool)
        return TaskModel(encoder, head, kind, num_labels, label_names=label_names)
    if activation is None:
        activation = cast(PoolerActivation, getattr(encoder.config, "pooler_activation", "tanh"))
    head = build_task_head(
        encoder.config.hidden_size,
        kind,
        num_labels,
        dropout,
        pool=pool,
        initializer_range=encoder.config.initializer_range,
        activation=activation,
        input_dropout=input_dropout,
    )
    return TaskModel(encoder, head, kind, num_labels, label_names=label_names)


_RESERVED = ("ptm_task", "kind", "num_labels", "label_names", "dropout", "pool")


def save_task_model(
    model: TaskModel,
    directory: str | Path,
    *,
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write a fine-tuned model directory atomically.

    Layout: the encoder as ``TransformerEncoder.save_pretrained`` writes it (``config.json``,
    ``model.safetensors``, ptm format), ``task_head.safetensors`` (the head's own parameter
    names) and ``task.json``: ``{"ptm_task": 1, "kind", "num_labels", "label_names",
    "dropout", "pool", **task_config}``. A reader sees the old directory or the new one,
    never a mix.

    Args:
        model: the fine-tuned model.
        directory: target directory (replaced as a whole if it exists).
        task_config: JSON-ready settings to keep (task name, max_length, metric, ...); a
            key that repeats one of the model's own (``kind``, ``num_labels``, ...) must
            agree with the model.
        extra_writers: callables given the directory being written (tokenizer, card).

    Returns:
        The directory written.
    """
    record: dict[str, Any] = {
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        **head_settings(model.head),
    }
    head_state = dict(model.head.state_dict())
    return write_task_directory(
        model.encoder,
        head_state,
        record,
        task_config,
        directory,
        extra_writers=extra_writers,
        writer="save_task_model",
    )


def write_task_directory(
    encoder: TransformerEncoder,
    head_state: dict[str, Tensor],
    record: dict[str, Any],
    task_config: dict[str, Any],
    directory: str | Path,
    *,
    extra_writers: Sequence[Callable[[Path], object]] = (),
    writer: str = "save_task_model",
) -> Path:
    """The one layout of a fine-tuned model directory, written atomically.

    The encoder as ``save_pretrained`` writes it, ``task_head.safetensors`` (``head_state``:
    everything trained above the encoder) and ``task.json`` (``{"ptm_task": 1, **record,
    **task_config}``). A ``task_config`` key that ``record`` holds must agree with it
    (``feature_based: true`` is accepted beside the settings a feature-based tagger writes).

    Raises:
        ValueError: a disagreeing or non-JSON ``task_config``, before anything is written.
    """
    record = {"ptm_task": TASK_FORMAT_VERSION, **record}
    for key, value in task_config.items():
        if key == "feature_based" and value is True and isinstance(record.get(key), dict):
            continue
        if key in record and record[key] is not None and record[key] != value:
            raise ValueError(
                f"task_config[{key!r}] = {value!r} disagrees with the model's {record[key]!r}; "
                f"drop it from task_config ({writer} writes {key!r} from the model)"
            )
        record[key] = value
    try:
        text = json.dumps(record, indent=2) + "\n"
    except TypeError as exc:
        raise ValueError(f"task_config must be JSON-ready ({exc})") from None
    tensors = {k: v.detach().contiguous() for k, v in head_state.items()}

    def write_task(tmp: Path) -> None:
        save_file(tensors, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        (tmp / TASK_JSON).write_text(text, encoding="utf-8")

    return encoder.save_pretrained(directory, extra_writers=[write_task, *extra_writers])


def read_task_json(path: Path) -> dict[str, Any]:
    """Read and check a ``task.json`` (errors name the file, the field and the fix)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{path}: missing; a fine-tuned model directory holds task.json, "
            f"{TASK_HEAD_FILE}, config.json and model.safetensors as save_task_model writes "
            "them (a run's final/ folder). For a Hugging Face ...For<Task> folder use "
            "ptm_core.checkpoints.hf.bert_tasks.load_hf_task_model"
        ) from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    if record.get("ptm_task") != TASK_FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: ptm_task is {record.get('ptm_task')!r}, expected {TASK_FORMAT_VERSION}; "
            "this file was not written by save_task_model (or by a newer ptm: upgrade ptm)"
        )
    kind = record.get("kind")
    if kind not in TASK_KINDS:
        raise CheckpointError(f"{path}: kind {kind!r} is not one of {', '.join(TASK_KINDS)}")
    if not isinstance(record.get("num_labels"), int):
        raise CheckpointError(
            f"{path}: num_labels must be an integer, got {record.get('num_labels')!r}"
        )
    pool = record.get("pool", "first")
    if pool not in ("first", "last", "mean"):  # mean: ModernBERT's classifier_pooling
        raise CheckpointError(f"{path}: pool {pool!r} is not one of first, last, mean")
    activation = record.get("pooler_activation", "tanh")
    if activation not in POOLER_ACTIVATIONS:
        raise CheckpointError(
            f"{path}: pooler_activation {activation!r} is not one of "
            f"{', '.join(POOLER_ACTIVATIONS)}"
        )
    if not isinstance(record.get("pooler_input_dropout", False), bool):
        raise CheckpointError(f"{path}: pooler_input_dropout must be true or false")
    return record


def load_task_model(directory: str | Path) -> tuple[TaskModel, dict[str, Any]]:
    """Load what :func:`save_task_model` wrote.

    Args:
        directory: the fine-tuned model directory.

    Returns:
        ``(model, task_config)``: the model (in training mode, as ``nn.Module`` builds it;
        call ``.eval()`` to predict) and ``task.json`` without ``ptm_task`` (so ``kind``,
        ``num_labels``, ``label_names``, ``dropout``, ``pool`` and what the caller saved).

    Raises:
        CheckpointError: a missing, damaged or mismatched file; the message names it and
            says the fix.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: not a directory; pass the folder save_task_model wrote"
        )
    task_path = directory / TASK_JSON
    record = read_task_json(task_path)
    model = task_model_of_record(TransformerEncoder.from_pretrained(directory), record, task_path)
    head_path = directory / TASK_HEAD_FILE
    load_head_state(model.head, head_path, record)
    task_config = {k: v for k, v in record.items() if k != "ptm_task"}
    return model, task_config


def task_model_of_record(
    encoder: TransformerEncoder, record: dict[str, Any], task_path: Path
) -> TaskModel:
    """A fresh head on ``encoder`` as ``task.json``'s ``record`` describes it (kind, labels,
    dropout, pool, pooler variant); a bad record raises naming ``task_path``."""
    try:
        return build_task_model(
            encoder,
            record["kind"],
            record["num_labels"],
            float(record.get("dropout", 0.1)),
            pool=cast(PoolPosition, record.get("pool", "first")),
            label_names=record.get("label_names"),
            **pooler_variant(record),
        )
    except ValueError as exc:
        raise CheckpointError(f"{task_path}: {exc}") from None


def load_head_state(head: nn.Module, path: Path, record: dict[str, Any]) -> None:
    """Fill ``head`` from ``task_head.safetensors``, or raise naming the file and the fix."""
    state = read_trained_state(
        path,
        dict(head.state_dict()),
        what=f"{record['kind']} head",
        described=f"kind={record['kind']!r}, num_labels={record['num_labels']}",
        fix="copy both from the same save, or fix kind/num_labels in task.json",
    )
    head.load_state_dict(state)


def read_trained_state(
    path: Path, expected: dict[str, Tensor], *, what: str, described: str, fix: str
) -> dict[str, Tensor]:
    """Read ``task_head.safetensors`` and check it against ``expected`` (names, shapes).

    Raises:
        CheckpointError: a missing, unreadable or mismatched file, naming it and the fix.
    """
    if not path.exists():
        raise CheckpointError(
            f"{path}: missing; the trained weights of a fine-tuned model ({what}). Copy the "
            "whole directory that was saved, or fine-tune again"
        )
    try:
        state = load_file(str(path))
    except Exception as exc:
        raise CheckpointError(
            f"{path}: cannot read the {what} weights ({type(exc).__name__}: {exc}); the file is "
            "damaged or truncated: restore it from the run's checkpoint or save the model again"
        ) from None
    check_finite(state, path)
    problems = [
        f"{k}: file {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
        for k, v in state.items()
        if k in expected and v.shape != expected[k].shape
    ]
    problems += [f"{k}: missing from the file" for k in expected if k not in state]
    problems += [f"{k}: unknown to a {what}" for k in state if k not in expected]
    if problems:
        raise CheckpointError(
            f"{path}: does not fit the {what} {TASK_JSON} describes ({described}):\n  "
            + "\n  ".join(problems)
            + f"\nThe weights and {TASK_JSON} come from different models: {fix}"
        )
    return state
