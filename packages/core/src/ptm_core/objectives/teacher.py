"""What DistilBERT and TinyBERT share: the frozen MLM teacher, the student's weight copy
(layer maps), the soft-target cross-entropy and the masked data side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.objectives.base import Batch, Objective
from ptm_core.objectives.mlm import mask_tokens
from ptm_core.tokenization import VocabInfo

ENCODER_INPUTS = ("input_ids", "attention_mask", "position_ids", "token_type_ids")


def uniform_layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """TinyBERT's uniform mapping ``g(m) = m * N / M`` (Jiao et al., 2020).

    Student layer ``m`` (1-based, ``m = 1..M``) learns from teacher layer ``g(m)``; index
    0 is the embedding layer on both sides (``g(0) = 0``). With ``N = 12, M = 4`` the
    student's layers 1..4 read the teacher's 3, 6, 9, 12: every ``N / M``-th layer, the
    last one included.

    Returns:
        ``[g(0), g(1), ..., g(M)]``, indices into ``EncoderOutput.hidden_states``.

    Raises:
        ValueError: ``N`` is not a multiple of ``M``.
    """
    if student_layers <= 0 or teacher_layers % student_layers:
        raise ValueError(
            f"a uniform layer map needs teacher_layers ({teacher_layers}) to be a multiple of "
            f"student_layers ({student_layers})"
        )
    step = teacher_layers // student_layers
    return [m * step for m in range(student_layers + 1)]


def every_other_layer(student_layers: int, teacher_layers: int) -> list[int]:
    """DistilBERT's initialisation map: student layer ``i`` <- teacher layer ``i * N / M``.

    0-based layer indices (``N = 12, M = 6``: teacher layers 0, 2, 4, 6, 8, 10 -- one of
    every two, as Sanh et al., 2019 "taking one layer out of two").
    """
    step = uniform_layer_map(student_layers, teacher_layers)[1]
    return [i * step for i in range(student_layers)]


def init_student_from_teacher(
    student: TransformerEncoder,
    teacher: TransformerEncoder,
    layers: Sequence[int] | None = None,
) -> list[int]:
    """Copy the teacher's embeddings and a subset of its layers into the student.

    DistilBERT's initialisation (Sanh et al., 2019): same width, half the depth, the
    student's layer ``i`` starts as the teacher's layer ``layers[i]``
    (:func:`every_other_layer` by default).

    Returns:
        The teacher layer index copied into each student layer.

    Raises:
        ValueError: the two encoders differ in anything but depth.
    """
    s, t = student.config, teacher.config
    fields = (
        "vocab_size",
        "hidden_size",
        "num_heads",
        "intermediate_size",
        "embedding_size",
        "max_positions",
        "type_vocab_size",
    )
    for field in fields:
        if getattr(s, field) != getattr(t, field):
            raise ValueError(
                f"student {field}={getattr(s, field)} differs from the teacher's "
                f"{getattr(t, field)}; initialising from teacher layers needs equal widths "
                "(set the student's model config to the teacher's numbers, fewer layers)"
            )
    chosen = list(layers) if layers is not None else every_other_layer(s.num_layers, t.num_layers)
    if len(chosen) != s.num_layers or max(chosen) >= t.num_layers:
        raise ValueError(f"layer map {chosen} does not fit {s.num_layers} <- {t.num_layers}")
    with torch.no_grad():
        student.embeddings.load_state_dict(teacher.embeddings.state_dict())
        if student.embedding_projection is not None and teacher.embedding_projection is not None:
            student.embedding_projection.load_state_dict(teacher.embedding_projection.state_dict())
        for i, g in enumerate(chosen):
            student.layers[i].load_state_dict(teacher.layers[g].state_dict())
        if student.final_norm is not None and teacher.final_norm is not None:
            student.final_norm.load_state_dict(teacher.final_norm.state_dict())
    return chosen


class MaskedLMTeacher(nn.Module):
    """A frozen MLM teacher: encoder + :class:`MaskedLMHead`, always in eval mode.

    Args:
        encoder: the teacher encoder.
        head: its MLM head (decoder tied to the encoder's table, or not).

    Shapes:
        ``forward(batch)`` -> ``(EncoderOutput, logits (B, L, V))``.
    """

    def __init__(self, encoder: TransformerEncoder, head: MaskedLMHead) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> MaskedLMTeacher:
        # The trainer calls model.train() every step; the teacher must stay deterministic.
        return super().train(False)

    @torch.no_grad()
    def forward(
        self, batch: Batch, *, hidden_states: bool = False, attention_scores: bool = False
    ) -> tuple[EncoderOutput, Tensor]:
        out = self.encoder(
            **{k: batch[k] for k in ENCODER_INPUTS if k in batch},
            output_hidden_states=hidden_states,
            output_attention_scores=attention_scores,
        )
        return out, self.head(out.last_hidden_state)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> MaskedLMTeacher:
        """Load a ``final/`` directory of a ptm MLM run: encoder + ``heads.safetensors``.

        The MLM head's tensors are read from ``heads.safetensors`` (names
        ``objectives.<name>.head.*`` of any objective that has a MaskedLMHead called
        ``head``); the decoder weight is the encoder's token table.
        """
        directory = Path(path)
        encoder = TransformerEncoder.from_pretrained(directory)
        config = encoder.config
        head = MaskedLMHead(
            config.hidden_size,
            config.vocab_size,
            activation=config.activation,
            layer_norm_eps=config.layer_norm_eps,
            tie_to=encoder.word_embeddings,
        )
        heads_file = directory / "heads.safetensors"
        if not heads_file.exists():
            raise FileNotFoundError(
                f"{heads_file}: missing; a distillation teacher needs its MLM head. Pre-train "
                "the teacher with a masked-LM objective (ptm pretrain writes heads.safetensors)"
            )
        state = load_file(heads_file)
        prefixes = sorted({k.rsplit(".head.", 1)[0] for k in state if ".head.dense." in k})
        if not prefixes:
            raise ValueError(f"{heads_file}: no MLM head tensors (*.head.dense.*) found")
        prefix = prefixes[0] + ".head."
        own = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        own.setdefault("decoder.weight", encoder.word_embeddings.weight.detach())
        head.load_state_dict(own)
        return cls(encoder, head)


def soft_cross_entropy(
    student_logits: Tensor, teacher_logits: Tensor, temperature: float
) -> Tensor:
    """``-sum_v softmax(t/T)_v log softmax(s/T)_v``, averaged over rows.

    Shapes:
        ``(N, V)`` each -> 0-d.
    """
    if len(student_logits) == 0:
        return student_logits.sum() * 0.0
    targets = torch.softmax(teacher_logits.float() / temperature, dim=-1)
    log_probs = torch.log_softmax(student_logits.float() / temperature, dim=-1)
    return -(targets * log_probs).sum(dim=-1).mean()


class _DistillationBase(Objective):
    """Shared data side (dynamic MLM masking) and teacher handling."""

    def __init__(
        self,
        encoder: TransformerEncoder,
        vocab: VocabInfo,
        teacher: MaskedLMTeacher | str | Path | None,
        mask_prob: float,
    ) -> None:
        super().__init__()
        if vocab.vocab_size != encoder.config.vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the student's vocab_size is "
                f"{encoder.config.vocab_size}; build it with the tokenizer's size"
            )
        if isinstance(teacher, (str, Path)):
            teacher = MaskedLMTeacher.from_pretrained(teacher)
        if teacher is not None and teacher.encoder.config.vocab_size != vocab.vocab_size:
            raise ValueError("teacher and student must share the tokenizer (vocab_size differs)")
        # Kept outside the module tree: the frozen teacher is neither trained, nor part of
        # training checkpoints or saved heads (it is reloaded from its own directory); it
        # follows the student's device on first use.
        self._teacher_ref: list[MaskedLMTeacher] = [teacher] if teacher is not None else []
        self.vocab = vocab
        self.mask_prob = mask_prob
        self.head = MaskedLMHead(
            encoder.config.hidden_size,
            encoder.config.vocab_size,
            activation=encoder.config.activation,
            layer_norm_eps=encoder.config.layer_norm_eps,
            tie_to=encoder.word_embeddings,
        )

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        ids, labels = mask_tokens(
            batch["input_ids"],
            batch["special_tokens_mask"],
            self.vocab,
            generator,
            mask_prob=self.mask_prob,
        )
        return {**batch, "input_ids": ids, "mlm_labels": labels}

    @property
    def teacher(self) -> MaskedLMTeacher | None:
        """The frozen teacher (not a sub-module: absent from ``state_dict``)."""
        return self._teacher_ref[0] if self._teacher_ref else None

    def _teacher(self, device: torch.device) -> MaskedLMTeacher:
        teacher = self.teacher
        if teacher is None:
            raise RuntimeError(
                f"{type(self).__name__} has no teacher; pass teacher= (a MaskedLMTeacher or a "
                "ptm MLM run's final/ directory), as the `distill` recipe does"
            )
        if teacher.encoder.word_embeddings.weight.device != device:
            teacher.to(device)
        return teacher
