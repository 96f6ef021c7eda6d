"""Feature-based tagging (TagLM / ELMo): a frozen encoder's mixed layers feed a BiLSTM-CRF."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.features.frozen import FrozenEncoderFeatures
from ptm_core.finetune.model import check_labels
from ptm_core.heads.crf import LinearChainCRF

IGNORE_INDEX = -100


def _is_bio(names: Sequence[str]) -> bool:
    return all(n == "O" or (n[:2] in ("B-", "I-") and len(n) > 2) for n in names)


@dataclass
class TaggerOutput:
    """What :class:`FeatureBasedTagger` returns (the Trainer reads ``loss`` and ``metrics``).

    Attributes:
        loss: 0-d mean negative CRF log-likelihood per sentence, or ``None`` without labels.
        logits: ``(B, L, T)`` the CRF's emission scores at each word's first piece, 0 at
            every other position (the token layout of ``TaskModel``'s tagging logits). With a
            CRF the best tags are **not** ``logits.argmax(-1)``: use :attr:`predictions`.
        metrics: 0-d detached tensors: ``accuracy`` (Viterbi tag accuracy over labelled
            words); empty without labels.
        predictions: ``(B, L)`` long, the Viterbi tag of each word at its first piece,
            ``-100`` elsewhere (what ``aligned_tags`` / seqeval read).
    """

    loss: Tensor | None
    logits: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)
    predictions: Tensor | None = None


def first_piece_positions(first_pieces: Tensor) -> tuple[Tensor, Tensor]:
    """Compact each row's first-piece positions into a word sequence.

    Args:
        first_pieces: ``(B, L)`` bool, True at each word's first piece.

    Returns:
        ``(positions, word_mask)``: ``positions (B, W)`` long, the token index of word
        ``w`` of each row in order (``W = max(1, most words in a row)``; entries past a
        row's word count are valid indices but meaningless), and ``word_mask (B, W)`` bool,
        True at real words.
    """
    first_pieces = first_pieces.bool()
    counts = first_pieces.sum(1)  # (B,)
    width = max(1, int(counts.max())) if first_pieces.numel() else 1
    # A stable sort puts the first pieces before everything else, in their order.
    order = torch.sort((~first_pieces).to(torch.uint8), dim=1, stable=True).indices
    positions = (
        order[:, :width] if order.shape[1] >= width else order.new_zeros(order.shape[0], width)
    )
    word_mask = torch.arange(width, device=first_pieces.device).unsqueeze(0) < counts.unsqueeze(1)
    return positions, word_mask


class FeatureBasedTagger(nn.Module):
    """A BiLSTM-CRF tagger over a frozen encoder's scalar-mixed layers.

    The feature-based use of a pre-trained model (TagLM, Peters et al., 2017; ELMo,
    Peters et al., 2018, Sec. 3.3): the encoder is frozen
    (:class:`~ptm_core.features.frozen.FrozenEncoderFeatures`: ``requires_grad=False``,
    always in eval mode, run without a graph), a learned :class:`ScalarMix` weights its
    layers, and a task model (here the BiLSTM-CRF of Lample et al., 2016) is trained on
    top::

        mix(h_0..h_L) -> gather each word's first piece -> dropout -> BiLSTM
                      -> linear -> linear-chain CRF

    Only the mix, the LSTM, the linear layer and the CRF learn. The CRF runs over words,
    not word pieces: the first pieces (where the tagging batch's labels are not ``-100``,
    or ``first_piece_mask`` when given) are gathered into a compact ``(B, W)`` sequence.

    Args:
        encoder: A pre-trained encoder; it is frozen in place.
        num_labels: ``T``, the number of tags.
        label_names: Tag names by index (kept in ``task.json``; needed for the constraint).
        constraint: ``"bio"`` (no ``I-X`` after anything but ``B-X``/``I-X``, nor at the
            start; needs BIO/IOB2 tags, which the CoNLL reader produces, IOB1 included),
            ``None``, or ``"auto"`` (default): ``"bio"`` when every label name is ``O``,
            ``B-*`` or ``I-*``, else ``None``.
        lstm_hidden: Hidden units per direction (Lample et al., 2016: 100).
        lstm_layers: Stacked BiLSTM layers.
        dropout: Dropout on the mixed features (Lample et al.: 0.5); also between LSTM
            layers when there are several.
        layers: Which hidden states to mix (default all; see ``FrozenEncoderFeatures``).

    Shapes:
        ``forward(batch)``: ``input_ids``, ``attention_mask``, ``token_type_ids`` ``(B, L)``;
        optional ``labels (B, L)`` (-100 except at first pieces) and ``first_piece_mask
        (B, L)`` bool (needed when a prediction batch has no labels). Returns
        :class:`TaggerOutput`.
    """

    kind = "tagging"

    def __init__(
        self,
        encoder: TransformerEncoder,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        constraint: str | None = "auto",
        lstm_hidden: int = 100,
        lstm_layers: int = 1,
        dropout: float = 0.5,
        layers: list[int] | None = None,
    ) -> None:
        super().__init__()
        check_labels("tagging", num_labels, label_names)
        if constraint == "auto":
            constraint = "bio" if label_names is not None and _is_bio(label_names) else None
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.settings: dict[str, Any] = {
            "constraint": constraint,
            "lstm_hidden": lstm_hidden,
            "lstm_layers": lstm_layers,
            "dropout": dropout,
            "layers": list(layers) if layers is not None else None,
        }
        self.features = FrozenEncoderFeatures(encoder, layers=layers)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            self.features.hidden_size,
            lstm_hidden,
            num_layers=lstm_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if lstm_layers > 1 else 0.0,
        )
        self.emissions = nn.Linear(2 * lstm_hidden, num_labels)
        self.crf = LinearChainCRF(num_labels, tag_names=label_names, constraint=constraint)

    @property
    def encoder(self) -> TransformerEncoder:
        """The frozen encoder."""
        return self.features.encoder

    def checkpoint_config(self) -> dict[str, Any]:
        """What the trainer's checkpoints record in ``config.json`` beside the weights."""
        return {
            "kind": self.kind,
            "num_labels": self.num_labels,
            "label_names": self.label_names,
            "feature_based": self.settings,
            "encoder": self.encoder.config.to_dict(),
        }

    def word_features(
        self, batch: dict[str, Tensor], first_pieces: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Mixed encoder features at each word's first piece.

        Returns:
            ``(features (B, W, D), positions (B, W), word_mask (B, W))``.
        """
        extra = {"token_type_ids": batch["token_type_ids"]} if "token_type_ids" in batch else {}
        mixed = self.features(batch["input_ids"], batch.get("attention_mask"), **extra)  # (B, L, D)
        positions, word_mask = first_piece_positions(first_pieces)
        gathered = mixed.gather(1, positions.unsqueeze(-1).expand(-1, -1, mixed.shape[-1]))
        return gathered, positions, word_mask

    def forward(self, batch: dict[str, Tensor]) -> TaggerOutput:
        labels = batch.get("labels")
        first_pieces = batch.get("first_piece_mask")
        if first_pieces is None:
            if labels is None:
                raise ValueError(
                    "FeatureBasedTagger needs each word's first piece: give the batch "
                    "'labels' (-100 except at first pieces) or a 'first_piece_mask' (B, L)"
                )
            first_pieces = labels != IGNORE_INDEX
        words, positions, word_mask = self.word_features(batch, first_pieces)
        lengths = word_mask.sum(1)
        packed = pack_padded_sequence(
            self.dropout(words), lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        hidden, _ = pad_packed_sequence(
            self.lstm(packed)[0], batch_first=True, total_length=words.shape[1]
        )
        emissions = self.emissions(hidden)  # (B, W, T)

        rows, slots = word_mask.nonzero(as_tuple=True)
        token_positions = positions[rows, slots]
        batch_size, length = batch["input_ids"].shape
        logits = emissions.new_zeros(batch_size, length, self.num_labels)
        logits = logits.index_put((rows, token_positions), emissions[rows, slots])
        word_tags = self.crf.decode(emissions.detach(), word_mask)  # (B, W)
        predictions = torch.full(
            (batch_size, length), IGNORE_INDEX, dtype=torch.long, device=emissions.device
        )
        predictions[rows, token_positions] = word_tags[rows, slots]

        loss: Tensor | None = None
        metrics: dict[str, Tensor] = {}
        if labels is not None:
            if "first_piece_mask" in batch and not torch.equal(
                first_pieces.bool(), labels != IGNORE_INDEX
            ):
                raise ValueError(
                    "the batch's first_piece_mask and labels disagree: labels must be set "
                    "(not -100) at every first piece and only there"
                )
            gold = labels.gather(1, positions).masked_fill(~word_mask, 0)  # (B, W)
            log_likelihood = self.crf.log_likelihood(emissions, gold, word_mask)  # (B,)
            has_words = (lengths > 0).float()
            loss = -(log_likelihood * has_words).sum() / has_words.sum().clamp(min=1.0)
            correct = (word_tags == gold) & word_mask
            metrics["accuracy"] = (correct.sum() / word_mask.sum().clamp(min=1)).detach().float()
        return TaggerOutput(loss=loss, logits=logits, metrics=metrics, predictions=predictions)


def save_feature_based_tagger(
    model: FeatureBasedTagger,
    directory: str | Path,
    *,
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write a trained feature-based tagger atomically, in the layout of ``save_task_model``.

    The encoder as ``TransformerEncoder.save_pretrained`` writes it (``config.json``,
    ``model.safetensors``), ``task_head.safetensors`` (everything trained: ``features.mix``,
    ``lstm``, ``emissions``, ``crf``) and ``task.json``: ``{"ptm_task": 1, "kind":
    "tagging", "num_labels", "label_names", "feature_based": {constraint, lstm_hidden,
    lstm_layers, dropout, layers}, **task_config}``. :func:`load_feature_based_tagger`
    reads it back; a loader tells the two kinds of model apart by ``task.json``'s
    ``feature_based`` (an object here, absent or false for a ``TaskModel``).

    Args:
        model: The trained tagger.
        directory: Target directory (replaced as a whole if it exists).
        task_config: JSON-ready settings to keep; a key the model writes itself must agree
            with it (``feature_based: true`` is accepted).
        extra_writers: Callables given the directory being written (tokenizer, card).

    Returns:
        The directory written.
    """
    from ptm_core.finetune.model import write_task_directory

    record: dict[str, Any] = {
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        "feature_based": model.settings,
    }
    head_state = {
        name: value
        for name, value in model.state_dict().items()
        if not name.startswith("features.encoder.")
    }
    return write_task_directory(
        model.encoder,
        head_state,
        record,
        task_config,
        directory,
        extra_writers=extra_writers,
        writer="save_feature_based_tagger",
    )


def load_feature_based_tagger(directory: str | Path) -> tuple[FeatureBasedTagger, dict[str, Any]]:
    """Load what :func:`save_feature_based_tagger` wrote.

    Args:
        directory: The model directory.

    Returns:
        ``(model, task_config)``: the tagger (train mode; call ``.eval()`` to predict) and
        ``task.json`` without ``ptm_task``.

    Raises:
        CheckpointError: A missing, damaged or mismatched file, named with the fix.
    """
    from ptm_core.checkpoints import CheckpointError
    from ptm_core.finetune.model import TASK_HEAD_FILE, TASK_JSON, read_task_json

    directory = Path(directory)
    task_path = directory / TASK_JSON
    record = read_task_json(task_path)
    settings = record.get("feature_based")
    if record["kind"] != "tagging" or not isinstance(settings, dict):
        raise CheckpointError(
            f"{task_path}: not a feature-based tagger (kind={record['kind']!r}, "
            f"feature_based={settings!r}); load it with ptm_core.finetune.model.load_task_model"
        )
    encoder = TransformerEncoder.from_pretrained(directory)
    try:
        model = FeatureBasedTagger(
            encoder,
            record["num_labels"],
            label_names=record.get("label_names"),
            constraint=settings.get("constraint"),
            lstm_hidden=int(settings.get("lstm_hidden", 100)),
            lstm_layers=int(settings.get("lstm_layers", 1)),
            dropout=float(settings.get("dropout", 0.5)),
            layers=settings.get("layers"),
        )
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{task_path}: feature_based: {exc}") from None
    _load_trained_state(model, directory / TASK_HEAD_FILE)
    return model, {k: v for k, v in record.items() if k != "ptm_task"}


def _load_trained_state(model: FeatureBasedTagger, path: Path) -> None:
    """Fill everything but the frozen encoder from ``path``, or raise naming the fix."""
    from ptm_core.finetune.model import read_trained_state

    expected = {
        k: v for k, v in model.state_dict().items() if not k.startswith("features.encoder.")
    }
    state = read_trained_state(
        path,
        expected,
        what="feature-based tagger",
        described=f"num_labels={model.num_labels}",
        fix="copy both from one save",
    )
    model.load_state_dict(state, strict=False)
