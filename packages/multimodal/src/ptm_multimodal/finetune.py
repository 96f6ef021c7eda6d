"""Fine-tuning VisualBERT and ViLBERT: image-text classification and VQA answer classification.

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

Heads: VisualBERT reads the ``[CLS]`` state with the core
:class:`~ptm_core.heads.tasks.SequenceClassificationHead` (its pooler starts from the
pooler the sentence-image objective trained, as BERT reuses its NSP pooler). ViLBERT uses
its paper's VQA head: the pooled text ``h_CLS`` and pooled image ``h_IMG`` (each
``ReLU(W x + b)``, initialised from the pre-trained alignment head), multiplied
element-wise, then a two-layer classifier (the core head over the fused vector).

The run is :func:`~ptm_core.finetune.recipe.train_and_score` (resume, bf16, DDP, the
metrics log, ``eval.json``); ``final/`` holds ``model.safetensors`` + ``config.json`` (the
backbone, as ``load_multimodal`` builds it), ``task_head.safetensors``, ``task.json``
(``"family": "multimodal"``) and the tokenizer. Task data:
:mod:`ptm_multimodal.task_data`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import safetensors.torch
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.metrics import compute_metrics
from ptm_core.finetune.model import (
    TASK_FORMAT_VERSION,
    TASK_HEAD_FILE,
    TASK_JSON,
    TaskOutput,
    read_trained_state,
    task_loss,
)
from ptm_core.finetune.recipe import FinetuneResult, train_and_score
from ptm_core.heads.tasks import SequenceClassificationHead
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_multimodal.checkpoint_kinds import with_model_kind
from ptm_multimodal.region_features import read_region_features
from ptm_multimodal.task_data import (
    IMAGE_TEXT_KINDS,
    ImageTextExample,
    ImageTextFeaturizer,
    ImageTextTask,
    ImageTextTaskError,
    read_image_text_task,
    vqa_accuracy,
)

TASK_FAMILY = "multimodal"


def vqa_loss(logits: Tensor, scores: Tensor) -> Tensor:
    """Binary cross-entropy against soft scores, summed over answers, mean over questions.

    Shapes: ``(B, K)``, ``(B, K)`` -> 0-d (BUTD/ViLBERT's ``mean * K``).
    """
    per_answer = F.binary_cross_entropy_with_logits(
        logits.float(), scores.float(), reduction="none"
    )
    return per_answer.sum(-1).mean()


# ----------------------------------------------------------------------------- the model


class VilbertFusionHead(nn.Module):
    """ViLBERT's task head (Lu et al., 2019, section 4, VQA): ``h_CLS * h_IMG`` -> classifier.

    ``h_CLS = ReLU(W_t t_0 + b_t)`` and ``h_IMG = ReLU(W_v v_0 + b_v)`` (the first text
    token and the global image token, as ViLBERT's poolers and
    :class:`~ptm_multimodal.alignment.AlignmentHead`), multiplied element-wise, then the
    core :class:`~ptm_core.heads.tasks.SequenceClassificationHead` over the fused vector
    (``W_c Dropout(tanh(W_p f + b_p)) + b_c``: two layers).

    Shapes:
        text ``(B, L, D_t)``, image ``(B, 1 + R, D_v)`` -> ``(B, N)``.
    """

    def __init__(
        self, text_size: int, image_size: int, inner_size: int, num_labels: int, dropout: float
    ) -> None:
        super().__init__()
        self.text_pooler = nn.Linear(text_size, inner_size)
        self.image_pooler = nn.Linear(image_size, inner_size)
        for linear in (self.text_pooler, self.image_pooler):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)
        self.classifier = SequenceClassificationHead(inner_size, num_labels, dropout)
        self.dropout = self.classifier.dropout

    def forward(self, text: Tensor, image: Tensor) -> Tensor:
        fused = F.relu(self.text_pooler(text[:, 0])) * F.relu(self.image_pooler(image[:, 0]))
        return self.classifier(fused[:, None])  # (B, 1, D_co) -> (B, N)


ANSWER_HEADS = ("cls", "cloze")


class ClozeAnswerHead(nn.Module):
    """A cloze answer head: the masked-LM head restricted to the answer words.

    Prompt-based fine-tuning (Schick & Schütze, 2021, PET; Gao et al., 2021, LM-BFF): the
    question gets a ``[MASK]`` answer slot; the hidden state there goes through the MLM
    transform ``LN(act(W h + b))`` and a decoder whose rows (and biases) start as the MLM
    decoder rows of the answer words. Before any training, the logits equal the
    pre-trained MLM logits of the answer words at the slot.

    Args:
        hidden_size: encoder width ``D``.
        num_labels: answers ``K``.
        dropout: dropout on the slot's hidden state.
        width: the MLM transform width (the decoder input).
        activation: the transform activation.
        layer_norm_eps: LayerNorm epsilon.

    Shapes:
        ``hidden (B, T, D)``, ``positions (B,)`` -> logits ``(B, K)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_labels: int,
        dropout: float = 0.1,
        *,
        width: int | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        from ptm_core.heads.mlm import MaskedLMHead

        # the (random) MLM head shape: dense, activation, norm, decoder over the answers
        mlm = MaskedLMHead(
            hidden_size,
            num_labels,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            embedding_size=width,
        )
        self.dropout = nn.Dropout(dropout)
        self.dense, self.activation, self.norm = mlm.dense, mlm.activation, mlm.norm
        self.decoder = mlm.decoder

    def init_from_mlm(self, mlm_head: nn.Module, answer_ids: Sequence[int]) -> None:
        """Copy ``mlm_head``'s transform and the decoder rows/biases of ``answer_ids``."""
        source: Any = mlm_head
        with torch.no_grad():
            self.dense.load_state_dict(source.dense.state_dict())
            self.norm.load_state_dict(source.norm.state_dict())
            ids = torch.tensor(list(answer_ids))
            self.decoder.weight.copy_(source.decoder.weight[ids])
            self.decoder.bias.copy_(source.decoder.bias[ids])
        self.activation = source.activation

    def forward(self, hidden: Tensor, positions: Tensor) -> Tensor:
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        slot = self.dropout(hidden[rows, positions])
        return cast(Tensor, self.decoder(self.norm(self.activation(self.dense(slot)))))


def answer_token_ids(tokenizer: WordPieceTokenizer, names: Sequence[str]) -> list[int]:
    """The vocabulary id of each answer word (its only word piece).

    Raises:
        ValueError: an answer that is not one word piece (the cloze head needs one slot).
    """
    ids: list[int] = []
    for name in names:
        pieces = tokenizer.encode(name).input_ids[1:-1]
        if len(pieces) != 1:
            raise ValueError(
                f"answer {name!r} is {len(pieces)} word pieces; multimodal_finetune.head=cloze "
                "needs one-word-piece answers (use multimodal_finetune.head=cls)"
            )
        ids.append(int(pieces[0]))
    return ids


class ImageTextTaskModel(nn.Module):
    """A VisualBERT or ViLBERT backbone with one task head.

    Everything under ``encoder.`` is the pre-trained backbone, everything under ``head.``
    the task head.

    Args:
        encoder: a :class:`~ptm_multimodal.visualbert.VisualBertModel` or
            :class:`~ptm_multimodal.vilbert.VilbertModel`.
        head: :class:`SequenceClassificationHead` (VisualBERT) or :class:`VilbertFusionHead`.
        kind: ``classification`` or ``vqa``.
        label_names: the labels / answer vocabulary, index order.

    Inputs: a batch of :class:`ImageTextFeaturizer`. Output:
        :class:`~ptm_core.finetune.model.TaskOutput`, logits ``(B, N)``; metrics
        ``accuracy`` (classification) or ``vqa_score`` (the soft score of the top answer).
    """

    def __init__(
        self, encoder: nn.Module, head: nn.Module, kind: str, label_names: Sequence[str]
    ) -> None:
        super().__init__()
        if kind not in IMAGE_TEXT_KINDS:
            raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(IMAGE_TEXT_KINDS)}")
        self.encoder = encoder
        self.head = head
        self.kind = kind
        self.label_names = list(label_names)
        self.num_labels = len(self.label_names)

    @property
    def answer_head(self) -> str:
        """``cloze`` (a :class:`ClozeAnswerHead`) or ``cls``."""
        return "cloze" if isinstance(self.head, ClozeAnswerHead) else "cls"

    @property
    def architecture(self) -> str:
        return str(self.encoder.checkpoint_config()["architecture"])  # type: ignore[operator]

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        inputs = ("attention_mask", "token_type_ids", "visual_boxes", "visual_mask")
        output = self.encoder(
            batch["input_ids"],
            batch["visual_features"],
            **{k: batch[k] for k in inputs if k in batch},
        )
        if isinstance(self.head, VilbertFusionHead):
            logits = self.head(output.last_hidden_state, output.image_hidden_state)
        elif isinstance(self.head, ClozeAnswerHead):
            logits = self.head(output.last_hidden_state, batch["answer_positions"])
        else:
            logits = self.head(output.last_hidden_state)  # [CLS] of the L + R slots
        if self.kind == "classification":
            loss, metrics = task_loss("classification", logits, batch)
            return TaskOutput(loss=loss, logits=logits, metrics=metrics)
        scores = batch.get("answer_scores")
        if scores is None:
            return TaskOutput(loss=None, logits=logits)
        top = scores.gather(1, logits.argmax(-1, keepdim=True)).mean().detach()
        return TaskOutput(loss=vqa_loss(logits, scores), logits=logits, metrics={"vqa_score": top})

    def checkpoint_config(self) -> dict[str, Any]:
        """What the trainer's checkpoints record beside the weights."""
        return {
            "family": TASK_FAMILY,
            "kind": self.kind,
            "label_names": self.label_names,
            "backbone": self.encoder.checkpoint_config(),  # type: ignore[operator]
        }


def build_task_head(
    encoder: nn.Module, num_labels: int, dropout: float = 0.1, head: str = "cls"
) -> nn.Module:
    """The head for ``encoder``'s architecture (see :class:`ImageTextTaskModel`).

    ``head="cloze"`` (VisualBERT): a :class:`ClozeAnswerHead` instead of the ``[CLS]``
    classifier.
    """
    net: Any = encoder  # a VisualBertModel or VilbertModel
    hidden = net.config.hidden_size
    if head not in ANSWER_HEADS:
        raise ValueError(f"multimodal_finetune.head is {head!r}; valid: {', '.join(ANSWER_HEADS)}")
    if head == "cloze":
        if net.checkpoint_config()["architecture"] != "visualbert":
            raise ValueError(
                "multimodal_finetune.head=cloze is implemented for VisualBERT only; "
                "use multimodal_finetune.head=cls with ViLBERT"
            )
        return ClozeAnswerHead(
            hidden,
            num_labels,
            dropout,
            activation=str(getattr(net.config, "activation", "gelu")),
            layer_norm_eps=float(getattr(net.config, "layer_norm_eps", 1e-12)),
        )
    if net.checkpoint_config()["architecture"] == "vilbert":
        inner = int(net.hyperparameters.get("co_hidden_size", net.image_hidden_size))
        return VilbertFusionHead(hidden, int(net.image_hidden_size), inner, num_labels, dropout)
    return SequenceClassificationHead(
        hidden,
        num_labels,
        dropout,
        initializer_range=float(net.config.initializer_range),
    )


def init_head_from_pretraining(head: nn.Module, objectives: Mapping[str, nn.Module]) -> list[str]:
    """Copy the pre-trained poolers into a fresh task head; return what was copied.

    VisualBERT: the sentence-image (``itm``) head's ``pooler``; ViLBERT: the alignment
    (``align``) head's ``text_pooler`` and ``image_pooler``.
    """
    copied = []
    for objective in objectives.values():
        source = getattr(objective, "head", None)
        for name in ("pooler", "text_pooler", "image_pooler"):
            target = getattr(head, name, None)
            weights = getattr(source, name, None)
            if isinstance(head, SequenceClassificationHead) and name != "pooler":
                continue
            if target is not None and weights is not None:
                target.load_state_dict(weights.state_dict())
                copied.append(f"{type(objective).__name__}.{name}")
    return copied


def load_backbone(
    directory: str | Path, *, random_init: bool = False, seed: int = 0
) -> tuple[nn.Module, WordPieceTokenizer, dict[str, nn.Module]]:
    """A pre-training ``final/`` as ``(backbone, tokenizer, objectives by name)``.

    With ``random_init`` the same architecture is rebuilt from its builder's
    initialisation (seeded from ``seed``) and no pre-trained head is returned.
    """
    from ptm_multimodal.loading import _build, load_multimodal

    if random_init:
        directory = Path(directory)
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        torch.manual_seed(derive_seed(seed, "init"))
        backbone = _build(config, str(directory / "config.json"))
        return backbone, WordPieceTokenizer.from_directory(directory), {}
    wrapped, tokenizer = load_multimodal(directory)
    return wrapped.model, tokenizer, dict(wrapped.objectives.objectives)


# ----------------------------------------------------------------------------- save and load


def save_image_text_task_model(
    model: ImageTextTaskModel,
    directory: str | Path,
    *,
    tokenizer: WordPieceTokenizer,
    task_config: Mapping[str, Any],
) -> Path:
    """Write ``final/`` atomically (see the module docstring for the layout)."""
    record = {
        "ptm_task": TASK_FORMAT_VERSION,
        "family": TASK_FAMILY,
        "architecture": model.architecture,
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        "dropout": float(cast(nn.Dropout, model.head.dropout).p),
        "head": model.answer_head,
        **dict(task_config),
    }
    text = json.dumps(record, indent=2) + "\n"
    backbone_config = with_model_kind(model.encoder.checkpoint_config())  # type: ignore[operator]
    config = json.dumps(backbone_config, indent=2, sort_keys=True) + "\n"
    with atomic_directory(directory) as tmp:
        safetensors.torch.save_model(model.encoder, str(tmp / "model.safetensors"))
        head = {k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()}
        safetensors.torch.save_file(head, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        (tmp / "config.json").write_text(config, encoding="utf-8")
        (tmp / TASK_JSON).write_text(text, encoding="utf-8")
        tokenizer.save(tmp)
    return Path(directory)


def load_image_text_task_model(
    directory: str | Path,
) -> tuple[ImageTextTaskModel, WordPieceTokenizer, ImageTextTask, dict[str, Any]]:
    """Load what :func:`save_image_text_task_model` wrote.

    Returns:
        ``(model in eval mode, tokenizer, task, task.json)``.

    Raises:
        CheckpointError: a missing or mismatched file, named with the fix.
    """
    from ptm_multimodal.loading import _build

    directory = Path(directory)
    task_path = directory / TASK_JSON
    try:
        record = json.loads(task_path.read_text(encoding="utf-8"))
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{directory}: cannot read task.json/config.json ({type(exc).__name__}: {exc}); "
            "pass the final/ folder of a multimodal fine-tuning run"
        ) from None
    if record.get("family") != TASK_FAMILY or record.get("kind") not in IMAGE_TEXT_KINDS:
        raise CheckpointError(
            f"{task_path}: field 'family' is {record.get('family')!r} and 'kind' "
            f"{record.get('kind')!r}; expected 'multimodal' and one of {IMAGE_TEXT_KINDS} "
            "(a final/ of ptm_multimodal.finetune)"
        )
    backbone = _build(config, str(directory / "config.json"))
    try:
        missing, unexpected = safetensors.torch.load_model(
            backbone, str(directory / "model.safetensors"), strict=False
        )
    except Exception as exc:
        raise CheckpointError(
            f"{directory / 'model.safetensors'}: cannot read the backbone ({type(exc).__name__}: "
            f"{exc}); copy the whole final/ folder again or fine-tune again"
        ) from None
    if missing or unexpected:
        raise CheckpointError(
            f"{directory / 'model.safetensors'}: missing {sorted(missing)}, unknown "
            f"{sorted(unexpected)}; the weights and config.json come from different models"
        )
    head = build_task_head(
        backbone,
        int(record["num_labels"]),
        float(record.get("dropout", 0.1)),
        head=str(record.get("head", "cls")),
    )
    state = read_trained_state(
        directory / TASK_HEAD_FILE,
        dict(head.state_dict()),
        what=f"{record['architecture']} {record['kind']} head",
        described=f"num_labels={record['num_labels']}",
        fix="copy both from the same save",
    )
    head.load_state_dict(state)
    model = ImageTextTaskModel(backbone, head, record["kind"], record["label_names"])
    tokenizer = WordPieceTokenizer.from_directory(directory)
    return model.eval(), tokenizer, ImageTextTask.from_mapping(record["task"]), record


# ----------------------------------------------------------------------------- run and score


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
    tokenizer: WordPieceTokenizer | None = None,
    seed: int = 0,
    dropout: float = 0.1,
    random_init: bool = False,
    provenance: Mapping[str, Any] | None = None,
    head: str = "cls",
) -> FinetuneResult:
    """Fine-tune a pre-trained VisualBERT/ViLBERT on ``task`` and score its dev set.

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

    Returns:
        :class:`~ptm_core.finetune.recipe.FinetuneResult`; ``eval.json`` holds
        ``dev/<metric>``.

    Raises:
        ImageTextTaskError: a bad task line (``file:line``, field).
        FeatureMismatchError: the task's features are not the backbone's.
        ValueError: ``trainer.layer_lr_decay`` or ``trainer.unfreeze_every`` set.
    """
    if trainer.layer_lr_decay is not None or trainer.unfreeze_every:
        raise ValueError(
            "trainer.layer_lr_decay / trainer.unfreeze_every need a single layer stack at "
            "model.encoder.layers; VisualBERT/ViLBERT have theirs elsewhere (two streams for "
            "ViLBERT). Set them to null / 0 (trainer.schedule=slanted_triangular works)"
        )
    features_dir = Path(task.features or Path(task.train).parent)
    features = read_region_features(features_dir)
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    objectives: dict[str, nn.Module] = {}
    if backbone is None:
        if init_from is None:
            raise ValueError("give init_from=<a VisualBERT/ViLBERT final/> or backbone=")
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
    else:
        copied = init_head_from_pretraining(task_head, objectives)
    model = ImageTextTaskModel(backbone, task_head, task.kind, names)
    featurizer = ImageTextFeaturizer(
        tokenizer, features, task.kind, names, task.max_length, answer_slot=answer_head == "cloze"
    )
    record = {
        "task": task.to_dict(),
        "random_init": random_init,
        "head_from_pretraining": copied,
        **({"provenance": dict(provenance)} if provenance else {}),
    }
    kept_tokenizer = tokenizer
    return train_and_score(
        model,
        TaskBatches(train, featurizer, task.batch_size, seed=seed),
        trainer,
        save_final=lambda d: save_image_text_task_model(
            model.to("cpu"), d, tokenizer=kept_tokenizer, task_config=record
        ),
        score=lambda: evaluate_image_text_task(
            model, dev, featurizer, batch_size=task.eval_batch_size
        )[0],
        name=task.name,
        metric=task.metric,
    )


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
