"""T5's text-to-text fine-tuning of a classification task (Raffel et al., 2020, section 2.4).

Every task is "text in, text out": the encoder reads the example, the decoder is trained
(teacher forcing, token cross-entropy) to write the label's name followed by the end
token, e.g. ``entailment`` / ``not_entailment`` for RTE. At evaluation the model decodes
greedily and the generated text is scored by exact match: a generation that equals a label
name predicts that class, anything else counts as wrong ("If the model outputs text on a
text classification task that does not correspond to any of the possible labels ... we
would count the model's output as wrong"). Accuracy is therefore exact-match accuracy.

The label names are those of the task's train file, used verbatim; their targets are
``tokenizer.tokenize_ids(name) + [eos]`` and must differ after tokenization. Exact match is
tested on these ids, which for a deterministic tokenizer is exact match of the text. The
encoder input is the task featurizer's ``[CLS] sentence1 [SEP] sentence2 [SEP]`` (the
separators mark the pair, so T5's ``"rte sentence1: ... sentence2: ..."`` prefixes are not
added).

Batches (:class:`TextToTextFeaturizer`): ``input_ids``, ``attention_mask``,
``token_type_ids`` ``(B, L)``; with labels also ``decoder_input_ids`` ``(B, T)`` (the
targets shifted right behind the decoder start token), ``labels`` ``(B, T)`` (target ids,
``-100`` after the end token) and ``class_labels`` ``(B,)`` (the class index).

A ``final/`` is the encoder-decoder in ptm format, ``task.json`` (``"seq2seq":
"text_to_text"``, ``label_names`` and their ``label_ids``) and the tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.features import SentenceFeaturizer, pad_rows
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.finetune.label_scores import LabelledPredictions
from ptm_core.finetune.metrics import compute_metrics
from ptm_core.finetune.model import IGNORE_INDEX, TASK_JSON, TaskOutput
from ptm_core.finetune.seq2seq import (
    TEXT_TO_TEXT,
    check_special_ids,
    save_seq2seq_task,
    shift_right,
    task_record,
)
from ptm_core.training.finetuning import encoder_decoder_depth

if TYPE_CHECKING:
    from ptm_core.finetune.task_data import TaskData
    from ptm_core.finetune.task_spec import TaskSpec


def label_targets(
    tokenizer: TaskTokenizer, label_names: Sequence[str], eos_id: int
) -> list[list[int]]:
    """``tokenize_ids(name) + [eos]`` per label; raises if two labels tokenize alike."""
    targets = [[*tokenizer.tokenize_ids(name), eos_id] for name in label_names]
    seen: dict[tuple[int, ...], str] = {}
    for name, ids in zip(label_names, targets, strict=True):
        if len(ids) == 1 or tuple(ids) in seen:
            other = seen.get(tuple(ids))
            raise ValueError(
                f"label {name!r} tokenizes to {ids[:-1]}"
                + (f", as {other!r} does" if other is not None else " (no tokens)")
                + "; text-to-text needs distinct, non-empty label names: rename the labels "
                "in the task's files"
            )
        seen[tuple(ids)] = name
    return targets


class TextToTextModel(nn.Module):
    """An encoder-decoder trained to generate its task's label names (T5).

    Args:
        model: the pre-trained :class:`EncoderDecoderModel`.
        tokenizer: its tokenizer (``[SEP]`` = the model's end id).
        label_names: class names in index order (the targets).

    Inputs (``forward(batch)``): see the module docstring; without ``labels`` no loss.

    Returns:
        :class:`~ptm_core.finetune.model.TaskOutput`: ``loss`` = mean token cross-entropy
        over the target tokens, ``logits`` ``(B, T, V)``, ``metrics`` ``token_accuracy``
        and ``accuracy`` (rows whose every target token is the argmax under teacher forcing).
    """

    # finetune.peft=lora|ia3 adapts the whole encoder-decoder; the LM head (often tied to the
    # token table) stays frozen with it, so only the adapter trains.
    peft_backbone = "model"

    def __init__(
        self, model: EncoderDecoderModel, tokenizer: TaskTokenizer, label_names: Sequence[str]
    ) -> None:
        super().__init__()
        check_special_ids(model, tokenizer, "text-to-text model")
        if len(label_names) < 2:
            raise ValueError(
                f"text-to-text classification needs >= 2 labels, got {list(label_names)}"
            )
        self.model = model
        self.kind = "classification"
        self.num_labels = len(label_names)
        self.label_names = list(label_names)
        self.label_ids = label_targets(tokenizer, label_names, model.config.eos_token_id)

    def depth_top(self) -> int:
        """The LM head's depth for the ULMFiT/ELECTRA switches (``E + D + 1``)."""
        return self.model.config.encoder_layers + self.model.config.decoder_layers + 1

    def parameter_depth(self, name: str) -> int:
        """Depth of a parameter (:func:`~ptm_core.training.finetuning.encoder_decoder_depth`);
        the LM head is the task head here, so a token table tied to it trains at the top."""
        config = self.model.config
        return encoder_decoder_depth(
            name,
            encoder_layers=config.encoder_layers,
            decoder_layers=config.decoder_layers,
            prefix="model.",
        )

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        input_ids = batch["input_ids"]
        labels = batch.get("labels")
        if labels is None:
            start = self.model.config.decoder_start_token_id
            decoder_ids = input_ids.new_full((input_ids.shape[0], 1), start)
        else:
            decoder_ids = batch["decoder_input_ids"]
        out = self.model(input_ids, decoder_ids, attention_mask=batch.get("attention_mask"))
        if labels is None:
            return TaskOutput(loss=None, logits=out.logits)
        loss = F.cross_entropy(
            out.logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
        )
        scored = labels != IGNORE_INDEX
        hit = (out.logits.argmax(-1) == labels) | ~scored
        metrics = {
            "token_accuracy": ((hit & scored).sum() / scored.sum().clamp(min=1)).detach().float(),
            "accuracy": hit.all(dim=1).float().mean().detach(),
        }
        return TaskOutput(loss=loss, logits=out.logits, metrics=metrics)

    @torch.no_grad()
    def predict_ids(
        self, input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> list[list[int]]:
        """Greedy generations ``(B,)`` lists of ids, the end token kept when generated."""
        longest = max(len(ids) for ids in self.label_ids)
        return self.model.generate(input_ids, attention_mask, max_length=longest, num_beams=1)

    def classes(self, generated: Sequence[Sequence[int]]) -> list[int]:
        """Class index of each generation that is exactly a label's target, else ``-1``."""
        index = {tuple(ids): i for i, ids in enumerate(self.label_ids)}
        return [index.get(tuple(ids), -1) for ids in generated]


class TextToTextFeaturizer:
    """Encoder inputs plus decoder targets for :class:`TextToTextModel`.

    Args:
        tokenizer: the model's tokenizer.
        max_length: longest encoder row, specials included.
        label_ids: target ids per class (:func:`label_targets`).
        decoder_start_id: the model's decoder start token.
        pad_id: the model's pad token.

    Returns (of :meth:`featurize`): see the module docstring.
    """

    def __init__(
        self,
        tokenizer: TaskTokenizer,
        max_length: int,
        label_ids: Sequence[Sequence[int]],
        decoder_start_id: int,
        pad_id: int,
    ) -> None:
        self.inputs = SentenceFeaturizer(tokenizer, max_length, kind="classification")
        self.label_ids = [list(ids) for ids in label_ids]
        self.decoder_start_id = decoder_start_id
        self.pad_id = pad_id

    @classmethod
    def for_model(
        cls, model: TextToTextModel, tokenizer: TaskTokenizer, max_length: int
    ) -> TextToTextFeaturizer:
        """The featurizer of ``model``'s labels and special ids."""
        config = model.model.config
        return cls(
            tokenizer,
            max_length,
            model.label_ids,
            config.decoder_start_token_id,
            config.pad_token_id,
        )

    def featurize(self, rows: Sequence[SentenceExample]) -> dict[str, Tensor]:
        batch = self.inputs.featurize(rows)
        classes = batch.pop("labels", None)
        if classes is not None:
            targets = pad_rows([self.label_ids[int(c)] for c in classes], IGNORE_INDEX)
            batch["labels"] = targets
            batch["decoder_input_ids"] = shift_right(targets, self.decoder_start_id, self.pad_id)
            batch["class_labels"] = classes
        return batch


@torch.no_grad()
def evaluate_text_to_text(
    model: TextToTextModel,
    task: TaskSpec,
    data: TaskData,
    *,
    device: torch.device | None = None,
    return_text: bool = False,
) -> tuple[dict[str, float], list[Any]]:
    """Greedy generation on ``data``, scored by exact match with the label names.

    Args:
        model: the text-to-text model.
        task: the task (``eval_batch_size``, ``max_length``).
        data: from :func:`~ptm_core.finetune.task_data.read_task` (its featurizer supplies the
            tokenizer).
        device: where to run (default: the model's).
        return_text: predictions as generated texts (the label name when it matches)
            instead of class indices.

    Returns:
        ``(metrics, predictions)``: classification metrics of
        :func:`~ptm_core.finetune.metrics.compute_metrics` (a generation that is no label
        is wrong; see :func:`exact_match_metrics`), ``invalid_rate`` (the share of such
        generations) and the teacher-forced ``loss``; predictions are class indices (``-1``:
        no label) or texts.
    """
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    featurizer = data.featurizer
    tokenizer: TaskTokenizer = getattr(featurizer, "inputs", featurizer).tokenizer
    if not isinstance(featurizer, TextToTextFeaturizer):
        featurizer = TextToTextFeaturizer.for_model(model, tokenizer, task.max_length)
    batches = TaskBatches(data.rows, featurizer, task.eval_batch_size, shuffle=False)
    losses: list[float] = []
    predicted: list[int] = []
    texts: list[str] = []
    gold: list[int] = []
    for batch in batches.iter_batches(0):
        batch = {k: v.to(device) for k, v in batch.items()}
        if "labels" in batch:
            output = model(batch)
            assert output.loss is not None
            losses.append(float(output.loss))
            gold.extend(batch["class_labels"].tolist())
        generated = model.predict_ids(batch["input_ids"], batch.get("attention_mask"))
        classes = model.classes(generated)
        predicted.extend(classes)
        if return_text:
            texts.extend(
                model.label_names[c] if c >= 0 else tokenizer.decode(ids)
                for c, ids in zip(classes, generated, strict=True)
            )
    model.train(was_training)
    metrics: dict[str, float] = {}
    if data.labelled and gold:
        metrics = exact_match_metrics(predicted, gold, model.num_labels)
        metrics["loss"] = sum(losses) / len(losses)
        if not return_text:  # the fine-tuning report's confusion matrix (-1: "not a label")
            labelled = LabelledPredictions(predicted, gold, model.label_names, "classification")
            return metrics, labelled
    return metrics, (texts if return_text else predicted)


def exact_match_metrics(
    predicted: Sequence[int], gold: Sequence[int], num_labels: int
) -> dict[str, float]:
    """Classification metrics of generated labels; ``-1`` (a text that is no label) is wrong.

    The names and definitions are those of
    :func:`~ptm_core.finetune.metrics.classification_metrics`, with a text that is no label
    scored as an extra class ``N`` that no example has: it never matches (accuracy), it is a
    missed positive or a true negative for the F1 of a class, and a model that only writes
    such texts has a Matthews correlation of 0, as a constant prediction does.

    Returns:
        ``accuracy``, ``f1`` (binary F1 of class 1 for two classes, else macro),
        ``f1_macro``, ``matthews_corrcoef`` and ``invalid_rate`` (the share of ``-1``).
    """
    if any(p >= num_labels for p in predicted) or any(not 0 <= g < num_labels for g in gold):
        raise ValueError(f"class indices must lie in [-1, {num_labels}); got {predicted} / {gold}")
    if not any(p < 0 for p in predicted):
        metrics = compute_metrics(
            "classification", list(predicted), list(gold), num_labels=num_labels
        )
        return {**metrics, "invalid_rate": 0.0}
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    pred = [p if p >= 0 else num_labels for p in predicted]
    classes = list(range(num_labels))
    macro = float(f1_score(gold, pred, labels=classes, average="macro", zero_division=0))
    binary = (
        float(f1_score(gold, pred, labels=[1], average="macro", zero_division=0))
        if num_labels == 2
        else macro
    )
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "f1": binary,
        "f1_macro": macro,
        "matthews_corrcoef": float(matthews_corrcoef(gold, pred)),
        "invalid_rate": sum(p < 0 for p in predicted) / len(predicted),
    }


def text_to_text_record(model: TextToTextModel, task_config: dict[str, Any]) -> dict[str, Any]:
    """``task.json`` of a :class:`TextToTextModel`'s ``final/``."""
    return task_record(
        model.kind,
        model.num_labels,
        model.label_names,
        TEXT_TO_TEXT,
        task_config,
        label_ids=model.label_ids,
    )


def save_text_to_text(
    model: TextToTextModel,
    directory: str | Path,
    *,
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write a fine-tuned :class:`TextToTextModel` atomically (pass the tokenizer's
    ``save`` in ``extra_writers``: loading needs it)."""
    record = text_to_text_record(model, task_config)
    return save_seq2seq_task(model.model, directory, record, extra_writers=extra_writers)


def load_text_to_text(
    directory: str | Path,
    record: dict[str, Any],
    tokenizer: TaskTokenizer,
    *,
    model: EncoderDecoderModel | None = None,
) -> TextToTextModel:
    """Load what :func:`save_text_to_text` wrote (``record``: its ``task.json``).

    Args:
        model: the encoder-decoder (default: the folder's own; an adapter ``final/`` passes
            its base model).
    """
    directory = Path(directory)
    names = record.get("label_names")
    if not isinstance(names, list) or len(names) < 2:
        raise CheckpointError(
            f"{directory / TASK_JSON}: label_names must list the >= 2 label names of a "
            f"text-to-text model, got {names!r}"
        )
    seq2seq = model if model is not None else EncoderDecoderModel.from_pretrained(directory)
    loaded = TextToTextModel(seq2seq, tokenizer, names)
    if record.get("label_ids") is not None and record["label_ids"] != loaded.label_ids:
        raise CheckpointError(
            f"{directory / TASK_JSON}: label_ids {record['label_ids']} differ from what the "
            f"folder's tokenizer makes of label_names ({loaded.label_ids}); the tokenizer "
            "files and task.json come from different runs: copy the whole final/ folder"
        )
    return loaded
