"""Sequence classification with an encoder-decoder (BART/T5), as BART fine-tunes it.

BART (Lewis et al., 2020, section 3.1): "the same input is fed into the encoder and
decoder, and the final hidden state of the final decoder token is fed into a new
multi-class linear classifier". This is Hugging Face's ``BartForSequenceClassification``
(and ``T5ForSequenceClassification``), reproduced exactly:

1. the encoder reads ``input_ids``;
2. the decoder reads ``input_ids`` shifted one to the right behind the decoder start
   token (no decoder padding mask: the causal mask already hides the right padding from
   every real position);
3. the decoder state at the row's last end-of-sequence token (``config.eos_token_id``;
   ptm's tokenizer: the final ``[SEP]``) goes through the head
   ``dropout -> dense (D, D) -> tanh -> dropout -> out_proj (D, N)``.

HF requires every row to hold the same number of ``<eos>`` tokens and takes the last one;
ptm takes each row's last one, which is the same position whenever HF accepts the batch
(and also serves a batch mixing rows with different counts). The losses are those of
:func:`~ptm_core.finetune.model.task_loss` (cross-entropy, or MSE for regression).

A fine-tuned ``final/`` is the whole encoder-decoder in ptm format (``config.json``,
``model.safetensors``: ``EncoderDecoderModel.from_pretrained`` reads it), the head
(``task_head.safetensors``), ``task.json`` (``"seq2seq": "classification_head"``) and the
tokenizer, written in one atomic step. The text-to-text mode (T5) is
:mod:`ptm_core.finetune.text_to_text`;
:func:`~ptm_core.finetune.recipe.finetune_seq2seq` runs either.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.io import CheckpointError, unique_state
from ptm_core.checkpoints.seq2seq_ptm import write_config_json
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.model import (
    TASK_FORMAT_VERSION,
    TASK_HEAD_FILE,
    TASK_JSON,
    TaskOutput,
    load_head_state,
    task_loss,
)
from ptm_core.modules.dropout import Dropout
from ptm_core.training.finetuning import encoder_decoder_depth

SEQ2SEQ_KINDS = ("classification", "regression")
CLASSIFICATION_HEAD = "classification_head"
TEXT_TO_TEXT = "text_to_text"


def load_seq2seq_tokenizer(directory: str | Path) -> TaskTokenizer:
    """The tokenizer of a seq2seq ``final/`` or Hugging Face BART/T5 folder: in the folder
    itself, or in ``tokenizer/`` (where ``ptm`` seq2seq pre-training writes it). A BERT
    WordPiece tokenizer, or any ``tokenizer.json`` (BART's byte-level BPE, T5's Unigram)
    through :func:`~ptm_core.finetune.data.task_tokenizer.load_task_tokenizer`.

    Raises:
        ValueError: no tokenizer in either place (the details of both attempts follow).
    """
    directory = Path(directory)
    errors = []
    for place in (directory, directory / "tokenizer"):
        try:
            return load_task_tokenizer(place)
        except (FileNotFoundError, ValueError) as exc:
            errors.append(f"{place}: {exc}")
    raise ValueError(
        f"{directory}: no tokenizer in the folder or in its tokenizer/ subfolder (ptm seq2seq "
        "runs write one there); save the model's tokenizer.json (Hugging Face: "
        "tokenizer.save_pretrained(folder)) or vocab.txt there. Details:\n  " + "\n  ".join(errors)
    )


def check_special_ids(model: EncoderDecoderModel, tokenizer: TaskTokenizer, source: str) -> None:
    """The model's pad and end ids must be the tokenizer's pad and sep (``[PAD]``/``[SEP]``,
    ``<pad>``/``</s>``)."""
    vocab = tokenizer.vocab_info
    config = model.config
    wrong = [
        f"{field}={value} but the tokenizer's {token} is {expected}"
        for field, value, token, expected in (
            ("pad_token_id", config.pad_token_id, "pad token", vocab.pad_id),
            ("eos_token_id", config.eos_token_id, "end (sep) token", vocab.sep_id),
        )
        if value != expected
    ]
    if wrong:
        raise ValueError(
            f"{source}: config.json {'; '.join(wrong)}. The classifier reads the decoder at "
            "the last end token and text-to-text targets end with it, so they must agree: "
            "use the tokenizer the model was pre-trained with"
        )


def shift_right(input_ids: Tensor, start_id: int, pad_id: int) -> Tensor:
    """``[start, x_0, ..., x_{L-2}]`` per row (HF's ``shift_tokens_right``; ``-100`` -> pad).

    Args:
        input_ids: ``(B, L)``.
        start_id: the decoder start token.
        pad_id: replaces ``-100`` (ignored label positions).

    Returns:
        ``(B, L)`` decoder inputs.
    """
    shifted = input_ids.new_full(input_ids.shape, start_id)
    shifted[:, 1:] = input_ids[:, :-1]
    return shifted.masked_fill(shifted == -100, pad_id)


class Seq2SeqClassificationHead(nn.Module):
    """BART's classification head: ``dropout -> dense -> tanh -> dropout -> out_proj``.

    Args:
        hidden_size: ``D``.
        num_labels: ``N`` (1 for regression).
        dropout: both dropouts (HF: ``classifier_dropout``).
        initializer_range: std of the normal initialisation of both linears.

    Shapes:
        ``(B, D) -> (B, N)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_labels: int,
        dropout: float = 0.1,
        initializer_range: float = 0.02,
    ) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.out_proj = nn.Linear(hidden_size, num_labels)
        for linear in (self.dense, self.out_proj):
            nn.init.normal_(linear.weight, std=initializer_range)
            nn.init.zeros_(linear.bias)

    def forward(self, pooled: Tensor) -> Tensor:
        hidden = torch.tanh(self.dense(self.dropout(pooled)))
        return self.out_proj(self.dropout(hidden))


class Seq2SeqClassifier(nn.Module):
    """An encoder-decoder plus a head on the decoder's last end-token state (BART, 3.1).

    Args:
        model: the pre-trained :class:`EncoderDecoderModel` (BART or T5 layout).
        kind: ``"classification"`` or ``"regression"``.
        num_labels: classes (1 for regression).
        dropout: head dropout.
        label_names: optional class names in index order.

    Inputs (``forward(batch)``): ``input_ids``, ``attention_mask`` ``(B, L)`` (right
    padded; every row holds ``config.eos_token_id``), optional ``labels`` ``(B,)``;
    ``token_type_ids`` is ignored (encoder-decoders have no segment table).

    Returns:
        :class:`~ptm_core.finetune.model.TaskOutput` with ``logits`` ``(B, N)``.
    """

    # finetune.peft=lora|ia3 adapts the whole encoder-decoder (encoder and decoder layers,
    # self- and cross-attention); the head trains beside the adapter.
    peft_backbone = "model"

    def __init__(
        self,
        model: EncoderDecoderModel,
        kind: str,
        num_labels: int,
        dropout: float = 0.1,
        *,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if kind not in SEQ2SEQ_KINDS:
            raise ValueError(
                f"an encoder-decoder fine-tunes on {' or '.join(SEQ2SEQ_KINDS)} tasks "
                f"(BART's classification head), not {kind!r}; use a BERT-family encoder"
            )
        if (kind == "regression") != (num_labels == 1) or num_labels < 1:
            raise ValueError(f"{kind} with num_labels={num_labels}: regression has 1, classes >= 2")
        self.model = model
        self.head = Seq2SeqClassificationHead(
            model.config.hidden_size, num_labels, dropout, model.config.initializer_range
        )
        self.kind = kind
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None

    def depth_top(self) -> int:
        """The head's depth for the ULMFiT/ELECTRA switches (``E + D + 1``)."""
        return self.model.config.encoder_layers + self.model.config.decoder_layers + 1

    def parameter_depth(self, name: str) -> int:
        """Depth of a parameter: head, decoder layers top down, encoder layers top down,
        embeddings (:func:`~ptm_core.training.finetuning.encoder_decoder_depth`); the
        unused LM head sits with the embeddings (BART ties it to the token table)."""
        config = self.model.config
        return encoder_decoder_depth(
            name,
            encoder_layers=config.encoder_layers,
            decoder_layers=config.decoder_layers,
            prefix="model.",
            lm_head_depth=0,
        )

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        input_ids = batch["input_ids"]
        mask = batch.get("attention_mask")
        config = self.model.config
        memory = self.model.encode(input_ids, mask).last_hidden_state
        decoder_ids = shift_right(input_ids, config.decoder_start_token_id, config.pad_token_id)
        hidden, _ = self.model.decode(decoder_ids, memory, mask)  # (B, L, D)
        is_eos = input_ids == config.eos_token_id
        if not bool(is_eos.any(dim=1).all()):
            raise ValueError(
                f"a row of input_ids has no end token (eos_token_id={config.eos_token_id}); "
                "the classifier reads the decoder there: end every row with it"
            )
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        last = torch.where(is_eos, positions, -1).amax(dim=1)  # (B,)
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # (B, D)
        logits = self.head(pooled)
        loss, metrics = task_loss(self.kind, logits, batch)
        return TaskOutput(loss=loss, logits=logits, metrics=metrics)


def task_record(
    kind: str,
    num_labels: int,
    label_names: Sequence[str] | None,
    mode: str,
    task_config: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    """``task.json`` of a seq2seq ``final/`` (readable by ``read_task_json``)."""
    return {
        "ptm_task": TASK_FORMAT_VERSION,
        "kind": kind,
        "num_labels": num_labels,
        "label_names": list(label_names) if label_names is not None else None,
        "seq2seq": mode,
        **extra,
        **task_config,
    }


def save_seq2seq_task(
    model: EncoderDecoderModel,
    directory: str | Path,
    record: dict[str, Any],
    *,
    head: nn.Module | None = None,
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write the encoder-decoder (ptm format), ``task.json``, the head and extras atomically."""
    text = json.dumps(record, indent=2) + "\n"
    with atomic_directory(Path(directory)) as tmp:
        write_config_json(tmp, model.config)
        save_file(unique_state(model), str(tmp / "model.safetensors"))
        if head is not None:
            state = {k: v.detach().contiguous() for k, v in head.state_dict().items()}
            save_file(state, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        (tmp / TASK_JSON).write_text(text, encoding="utf-8")
        for write in extra_writers:
            write(tmp)
    return Path(directory)


def classifier_record(model: Seq2SeqClassifier, task_config: dict[str, Any]) -> dict[str, Any]:
    """``task.json`` of a :class:`Seq2SeqClassifier`'s ``final/``."""
    return task_record(
        model.kind,
        model.num_labels,
        model.label_names,
        CLASSIFICATION_HEAD,
        task_config,
        dropout=float(model.head.dropout.p),
    )


def save_seq2seq_classifier(
    model: Seq2SeqClassifier,
    directory: str | Path,
    *,
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write a fine-tuned :class:`Seq2SeqClassifier` (see the module docstring)."""
    record = classifier_record(model, task_config)
    return save_seq2seq_task(
        model.model, directory, record, head=model.head, extra_writers=extra_writers
    )


def load_seq2seq_classifier(
    directory: str | Path,
    record: dict[str, Any],
    *,
    model: EncoderDecoderModel | None = None,
) -> Seq2SeqClassifier:
    """Load what :func:`save_seq2seq_classifier` wrote (``record``: its ``task.json``).

    Args:
        model: the encoder-decoder to put the saved head on (default: the folder's own;
            an adapter ``final/`` passes its base model).
    """
    directory = Path(directory)
    try:
        classifier = Seq2SeqClassifier(
            model if model is not None else EncoderDecoderModel.from_pretrained(directory),
            record["kind"],
            record["num_labels"],
            float(record.get("dropout", 0.1)),
            label_names=record.get("label_names"),
        )
    except ValueError as exc:
        raise CheckpointError(f"{directory / TASK_JSON}: {exc}") from None
    load_head_state(classifier.head, directory / TASK_HEAD_FILE, record)
    return classifier
