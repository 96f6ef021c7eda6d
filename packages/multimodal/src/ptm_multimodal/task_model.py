"""Fine-tuning VisualBERT, ViLBERT and LXMERT, model side: the backbone, the answer heads, the VQA loss.

VisualBERT reads the ``[CLS]`` state with the core
:class:`~ptm_core.heads.tasks.SequenceClassificationHead` (its pooler starts from the
pooler the sentence-image objective trained, as BERT reuses its NSP pooler). ViLBERT uses
its paper's VQA head (:class:`VilbertFusionHead`): the pooled text ``h_CLS`` and pooled
image ``h_IMG`` (each ``ReLU(W x + b)``, initialised from the pre-trained alignment head),
multiplied element-wise, then a two-layer classifier (the core head over the fused vector).
LXMERT uses its paper's answer head (:class:`~ptm_multimodal.lxmert_heads.LxmertAnswerHead`,
``W_2 LN(GeLU(W_1 p))``, transformers' ``LxmertForQuestionAnswering``) on the pooled
cross-modality ``[CLS]`` state, its transform (and the rows of the answers the pre-training
QA head knows) copied from the pre-trained QA head, as LXMERT's ``--loadLXMERTQA`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.model import (
    TaskOutput,
    task_loss,
)
from ptm_core.heads.tasks import SequenceClassificationHead
from ptm_core.modules.dropout import Dropout
from ptm_core.seeding import derive_seed
from ptm_multimodal.lxmert_heads import LxmertAnswerHead
from ptm_multimodal.task_spec import IMAGE_TEXT_KINDS

TASK_FAMILY = "multimodal"


def vqa_loss(logits: Tensor, scores: Tensor) -> Tensor:
    """Binary cross-entropy against soft scores, summed over answers, mean over questions.

    Shapes: ``(B, K)``, ``(B, K)`` -> 0-d (BUTD/ViLBERT's ``mean * K``).
    """
    per_answer = F.binary_cross_entropy_with_logits(
        logits.float(), scores.float(), reduction="none"
    )
    return per_answer.sum(-1).mean()


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
        self.dropout = Dropout(dropout)
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


def single_piece_ids(tokenizer: TaskTokenizer, names: Sequence[str]) -> list[int | None]:
    """The vocabulary id of each answer word that is one word piece (``None`` for others)."""
    ids: list[int | None] = []
    for name in names:
        pieces = tokenizer.encode_batch([name])[0].input_ids[1:-1]
        ids.append(int(pieces[0]) if len(pieces) == 1 else None)
    return ids


def answer_token_ids(tokenizer: TaskTokenizer, names: Sequence[str]) -> list[int]:
    """The vocabulary id of each answer word (its only word piece).

    Raises:
        ValueError: an answer that is not one word piece (the cloze head needs one slot).
    """
    ids = single_piece_ids(tokenizer, names)
    for name, token in zip(names, ids, strict=True):
        if token is None:
            pieces = len(tokenizer.encode_batch([name])[0].input_ids[1:-1])
            raise ValueError(
                f"answer {name!r} is {pieces} word pieces; multimodal_finetune.head=cloze "
                "needs one-word-piece answers (use multimodal_finetune.head=cls)"
            )
    return [int(token) for token in ids if token is not None]


class ImageTextTaskModel(nn.Module):
    """A VisualBERT, ViLBERT or LXMERT backbone with one task head.

    Everything under ``encoder.`` is the pre-trained backbone, everything under ``head.``
    the task head.

    Args:
        encoder: a :class:`~ptm_multimodal.visualbert.VisualBertModel`,
            :class:`~ptm_multimodal.vilbert.VilbertModel` or
            :class:`~ptm_multimodal.lxmert.LxmertModel`.
        head: :class:`SequenceClassificationHead` (VisualBERT), :class:`VilbertFusionHead`
            or :class:`~ptm_multimodal.lxmert_heads.LxmertAnswerHead` (on the pooled state).
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
            visual_features=batch["visual_features"],  # by name: a soft prompt wraps the encoder
            **{k: batch[k] for k in inputs if k in batch},
        )
        if isinstance(self.head, VilbertFusionHead):
            logits = self.head(output.last_hidden_state, output.image_hidden_state)
        elif isinstance(self.head, LxmertAnswerHead):
            logits = self.head(output.pooled_output)  # the cross-modality [CLS], pooled
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
    net: Any = encoder  # a VisualBertModel, VilbertModel or LxmertModel
    text = net.text_config  # the core text encoder inside VisualBERT / ViLBERT
    hidden = net.hidden_size
    if head not in ANSWER_HEADS:
        raise ValueError(f"multimodal_finetune.head is {head!r}; valid: {', '.join(ANSWER_HEADS)}")
    if head == "cloze":
        # single-stream models whose output starts with the text slots
        if net.checkpoint_config()["architecture"] not in ("visualbert", "vlbert", "imagebert"):
            raise ValueError(
                "multimodal_finetune.head=cloze is implemented for VisualBERT and VL-BERT; "
                "use multimodal_finetune.head=cls with ViLBERT"
            )
        return ClozeAnswerHead(
            hidden,
            num_labels,
            dropout,
            activation=text.activation,
            layer_norm_eps=text.layer_norm_eps,
        )
    if net.checkpoint_config()["architecture"] == "lxmert":
        return LxmertAnswerHead(hidden, num_labels, float(text.layer_norm_eps), dropout)
    if net.checkpoint_config()["architecture"] == "vilbert":
        inner = int(net.hyperparameters.get("co_hidden_size", net.image_hidden_size))
        return VilbertFusionHead(hidden, int(net.image_hidden_size), inner, num_labels, dropout)
    return SequenceClassificationHead(
        hidden,
        num_labels,
        dropout,
        initializer_range=float(text.initializer_range),
    )


def init_head_from_pretraining(
    head: nn.Module,
    objectives: Mapping[str, nn.Module],
    answer_ids: Sequence[int | None] = (),
) -> list[str]:
    """Copy the pre-trained poolers into a fresh task head; return what was copied.

    VisualBERT: the sentence-image (``itm``) head's ``pooler``; ViLBERT: the alignment
    (``align``) head's ``text_pooler`` and ``image_pooler``; LXMERT: the QA head
    (:func:`init_answer_head_from_qa`, ``answer_ids`` the task labels' token ids).
    """
    if isinstance(head, LxmertAnswerHead):
        return init_answer_head_from_qa(head, objectives, answer_ids)
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


def init_answer_head_from_qa(
    head: LxmertAnswerHead,
    objectives: Mapping[str, nn.Module],
    answer_ids: Sequence[int | None],
) -> list[str]:
    """Start LXMERT's answer head from the pre-trained QA head (LXMERT's ``load_lxmert_qa``).

    The transform (``dense``, ``norm``) is copied; of the output layer, the row and bias of
    each task label whose token id (``answer_ids[k]``) is one of the QA head's answers
    (its ``answer_token_ids``); other labels keep their fresh rows.

    Returns:
        What was copied: ``["<Objective>.transform", "<Objective>.answers[n/K]"]``, or
        nothing without a QA objective.
    """
    for objective in objectives.values():
        source = getattr(objective, "head", None)
        if not isinstance(source, LxmertAnswerHead):
            continue
        name = type(objective).__name__
        with torch.no_grad():
            head.dense.load_state_dict(source.dense.state_dict())
            head.norm.load_state_dict(source.norm.state_dict())
            known = list(getattr(objective, "answer_token_ids", None) or [])
            rows = [
                (k, known.index(t))
                for k, t in enumerate(answer_ids)
                if t is not None and t in known
            ]
            for k, j in rows:
                head.out.weight[k] = source.out.weight[j]
                head.out.bias[k] = source.out.bias[j]
        return [f"{name}.transform", f"{name}.answers[{len(rows)}/{head.out.out_features}]"]
    return []


def load_backbone(
    directory: str | Path, *, random_init: bool = False, seed: int = 0
) -> tuple[nn.Module, TaskTokenizer, dict[str, nn.Module]]:
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
        return backbone, load_task_tokenizer(directory), {}
    wrapped, tokenizer = load_multimodal(directory)
    return wrapped.encoder, tokenizer, dict(wrapped.objectives.objectives)
