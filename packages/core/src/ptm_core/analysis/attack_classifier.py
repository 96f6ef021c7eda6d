"""A fine-tuned sequence classifier as the black box an attack queries.

:func:`load_sequence_classifier` reads ``ptm finetune``'s ``final/`` (``task.json`` of a
classification task) or a Hugging Face ``...ForSequenceClassification`` folder (BERT,
RoBERTa, ALBERT, ELECTRA, XLNet, DistilBERT, XLM-R); :meth:`SequenceClassifier.read`
reads a labelled file in the formats ``ptm finetune`` and ``ptm evaluate`` read (GLUE-style
TSV, CSV, JSONL, JSON, Parquet, ``datasets`` folders), with the model's label names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ptm_core.finetune.data.examples import SentenceExample

# transformers' names for labels nobody named (``id2label`` defaults).
_DEFAULT_LABEL = re.compile(r"LABEL_\d+")


class ClassifierError(ValueError):
    """A folder that is not a sequence classifier an attack can query (one line)."""


@dataclass
class SequenceClassifier:
    """A classification model, its featurizer and label names; counts its queries.

    Attributes:
        model: the task model (eval mode): ``model(batch).logits`` is ``(B, C)``.
        featurizer: a :class:`~ptm_core.finetune.data.features.SentenceFeaturizer`.
        label_names: the class names, index order.
        text_fields: the columns holding the text (``None``: GLUE's usual names).
        label_field: the label column.
        source: the folder.
        batch_size: texts per forward pass.
        device: where the model runs.
        queries: texts scored so far.
    """

    model: torch.nn.Module
    featurizer: Any
    label_names: list[str]
    text_fields: list[str] | None
    label_field: str
    source: str
    batch_size: int = 64
    device: str = "cpu"
    queries: int = field(default=0)

    @torch.inference_mode()
    def probabilities(self, examples: Sequence[SentenceExample]) -> torch.Tensor:
        """``(N, C)`` class probabilities of ``examples`` (labels ignored)."""
        out = torch.empty(len(examples), len(self.label_names))
        for first in range(0, len(examples), self.batch_size):
            rows = [
                SentenceExample(e.text, e.pair, None, e.id, e.line)
                for e in examples[first : first + self.batch_size]
            ]
            batch = self.featurizer.featurize(rows)
            logits = self.model({k: v.to(self.device) for k, v in batch.items()}).logits
            out[first : first + len(rows)] = logits.float().softmax(-1).cpu()
        self.queries += len(examples)
        return out

    def read(self, path: str | Path) -> list[SentenceExample]:
        """The labelled examples of ``path``, labels as indices into :attr:`label_names`.

        Raises:
            DataError: naming the file, its line and the column: a missing file or column,
                an empty label, or a label the model does not know.
        """
        from ptm_core.finetune.data.glue import read_glue

        records = read_glue(
            path,
            kind="classification",
            text_fields=self.text_fields,
            label_field=self.label_field,
            label_names=self.label_names,
        )
        return [records[i] for i in range(len(records))]


def load_sequence_classifier(
    folder: str | Path, *, batch_size: int | None = None, device: str = "cpu"
) -> SequenceClassifier:
    """The classifier of ``folder``: ``ptm finetune``'s ``final/`` or a Hugging Face
    ``...ForSequenceClassification`` folder.

    Args:
        folder: the model folder.
        batch_size: texts per forward pass (default the task's ``eval_batch_size``, or 64).
        device: where to run.

    Raises:
        ClassifierError: not a classification model (names the folder and what it holds).
    """
    from ptm_core.checkpoints.hf.bert_tasks import is_hf_task_directory, load_hf_task_model
    from ptm_core.finetune.data.features import SentenceFeaturizer
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    directory = Path(folder)
    if (directory / "task.json").is_file():
        from ptm_core.finetune.predict import check_predictable
        from ptm_core.finetune.recipe import load_finetuned
        from ptm_core.finetune.task_loaders import family_predictor

        record = check_predictable(directory)
        if family_predictor(record) is not None or record.get("seq2seq") == "text_to_text":
            raise ClassifierError(
                f"{directory}: this classifier reads more than one text (or generates its "
                "label); the attack queries text classifiers with a classification head"
            )
        model, tokenizer, task, record = load_finetuned(directory)
        kind, names = task.kind, list(record.get("label_names") or [])
        text_fields, label_field = task.text_fields, task.label_field
        max_length, default_batch = task.max_length, task.eval_batch_size
    elif is_hf_task_directory(directory):
        model = load_hf_task_model(directory).eval()
        tokenizer = load_task_tokenizer(directory)
        kind = model.kind
        names = list(model.label_names or [str(i) for i in range(model.num_labels)])
        text_fields, label_field = None, "label"
        # ptm's max_positions is what the encoder can read (RoBERTa's offset taken off)
        max_length = min(512, int(getattr(model.encoder.config, "max_positions", 512)))
        default_batch = 64
    else:
        what = "does not exist" if not directory.exists() else "has no task.json nor config.json"
        raise ClassifierError(
            f"{directory}: {what} of a classifier; give ptm finetune's final/ folder or a "
            "Hugging Face ...ForSequenceClassification folder"
        )
    if kind != "classification":
        raise ClassifierError(
            f"{directory}: a {kind} model; the attack needs a classification model "
            "(ptm finetune with task.kind=classification)"
        )
    if names and all(_DEFAULT_LABEL.fullmatch(n) for n in names):
        # Unnamed HF labels: the data file writes the class index (0, 1, ...).
        names = [str(i) for i in range(len(names))]
    featurizer = SentenceFeaturizer(tokenizer, max_length, kind="classification")
    return SequenceClassifier(
        model=model.to(device).eval(),
        featurizer=featurizer,
        label_names=names,
        text_fields=list(text_fields) if text_fields else None,
        label_field=label_field,
        source=str(directory),
        batch_size=int(batch_size or default_batch),
        device=device,
    )


__all__ = ["ClassifierError", "SequenceClassifier", "load_sequence_classifier"]
