"""Batched inference with a fine-tuned ``final/``: what ``ptm predict`` runs.

:class:`TaskPredictor` loads a model once and turns rows (:mod:`ptm_core.finetune.predict_inputs`)
into records: the input row's values plus the prediction and its scores. Rows are taken in
chunks; inside a chunk they are sorted by length before they are batched, so a batch pads
to rows of similar length, and the records come back in the input's order. Inference runs
under ``torch.inference_mode`` (and bf16 autocast when asked).

:func:`~ptm_core.finetune.predict_output.predict_file` streams a whole file through it into a JSONL or CSV file
(:mod:`ptm_core.finetune.predict_output`): memory stays flat in the input's size.

Output fields per kind (an input column of the same name is kept as ``input_<name>``):

- classification: ``prediction`` (label name), ``score`` (its probability), ``scores``
  (``{label: probability}``);
- regression: ``prediction`` (the value);
- tagging: ``words``, ``prediction`` (a tag per word), ``scores`` (each tag's probability
  at the word's first piece);
- qa: ``prediction`` (the answer text, ``""`` for none), ``score`` (its probability),
  ``start``/``end`` (its characters in the context);
- multiple_choice: ``prediction`` (the ending's index), ``score``, ``scores`` (per ending);
- a T5 text-to-text classifier: ``prediction`` (the generated text), ``score`` ``None``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from ptm_core.finetune.data.features import (
    ChoiceFeaturizer,
    SentenceFeaturizer,
    TaggingFeaturizer,
)
from ptm_core.finetune.data.qa import QAFeaturizer, postprocess_qa
from ptm_core.finetune.data.squad import read_squad
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.finetune.predict_inputs import Row, prediction_rows
from ptm_core.finetune.task_data import TaskData
from ptm_core.finetune.task_loaders import family_predictor
from ptm_core.finetune.task_spec import TaskSpec

#: What ``task.json`` says of a fine-tuned folder that has no predictor, and why.
UNSUPPORTED = {
    ("recipe", "kbert"): "a K-BERT model reads each sentence with its knowledge graph "
    "(install ptm-knowledge, whose family predicts with it)",
    ("recipe", "ernie_thu_finetune"): "an ERNIE-THU model reads entity links to its graph "
    "(install ptm-knowledge, whose family predicts with it)",
    ("family", "multimodal"): "a VisualBERT/ViLBERT model reads image region features "
    "(install ptm-multimodal, whose family predicts with it)",
    ("family", "xlm"): "an XLM classifier reads language ids with its text "
    "(install ptm-multilingual, whose family predicts with it)",
}


class PredictorError(ValueError):
    """A folder ``ptm predict`` cannot predict with (one line: which, why, what to do)."""


def check_predictable(directory: str | Path) -> dict[str, Any]:
    """``task.json`` of a fine-tuned ``final/`` that :class:`TaskPredictor` can load.

    Raises:
        PredictorError: not a fine-tuned folder, or one whose kind has no predictor.
    """
    directory = Path(directory)
    task_json = directory / "task.json"
    if not task_json.is_file():
        what = "does not exist" if not directory.exists() else "has no task.json"
        raise PredictorError(
            f"{directory}: {what}; ptm predict takes the final/ folder that ptm finetune "
            "wrote (<trainer.output_dir>/final)"
        )
    try:
        record = json.loads(task_json.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PredictorError(f"{task_json}: not valid JSON ({exc}); fine-tune again") from None
    if not isinstance(record, dict):
        raise PredictorError(f"{task_json}: not a JSON object; fine-tune again")
    if family_predictor(record) is not None:
        return dict(record)
    for (key, value), why in UNSUPPORTED.items():
        if record.get(key) == value:
            raise PredictorError(
                f"{directory}: no predictor for this kind ({key} {value!r}): {why}; score "
                "its dev file with `ptm evaluate` instead"
            )
    if (directory / "cogqa.json").exists():
        raise PredictorError(
            f"{directory}: no predictor for CogQA (multi-hop QA over a paragraph graph); "
            "use `ptm evaluate`"
        )
    return dict(record)


def check_device(device: str) -> torch.device:
    """``device`` as a :class:`torch.device`, refused in one line when it is not here."""
    try:
        where = torch.device(device)
    except RuntimeError as exc:
        raise PredictorError(f"--device {device!r}: {exc}; use cpu, cuda or cuda:N") from None
    if where.type == "cuda" and (
        not torch.cuda.is_available() or (where.index or 0) >= torch.cuda.device_count()
    ):
        raise PredictorError(
            f"--device {device}: no such CUDA device here "
            f"({torch.cuda.device_count()} visible); use --device cpu"
        )
    return where


class TaskPredictor:
    """A fine-tuned model, loaded once, that predicts on rows of its task.

    Args:
        directory: the run's ``final/`` (``task.json`` beside the weights).
        device: where to run (``"cpu"``, ``"cuda"``, ``"cuda:1"``...).
        batch_size: rows per forward pass (QA: windows); default the task's
            ``eval_batch_size``.
        bf16: run under bf16 autocast (faster on GPUs and recent CPUs; scores change in
            the third digit).
        version_2: qa: answer ``""`` when the null score wins (SQuAD v2.0); default
            whether the task's dev (or train) file, when it is still there, has
            unanswerable questions.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        device: str = "cpu",
        batch_size: int | None = None,
        bf16: bool = False,
        version_2: bool | None = None,
    ) -> None:
        from ptm_core.finetune.recipe import load_finetuned

        if family_predictor(check_predictable(directory)) is not None:
            raise PredictorError(
                f"{directory}: its family predicts with its own hook (the model reads more "
                "than text); use ptm_core.finetune.predict_output.predict_file"
            )
        check_device(device)
        model, tokenizer, task, record = load_finetuned(directory)
        self.model = model.to(device).eval()
        if bf16:
            from ptm_core.fast import bf16_linear_weights
            from ptm_core.training.precision import bound_onednn_cache

            bf16_linear_weights(self.model)  # autocast would cast them at every call
            if torch.device(device).type == "cpu":
                bound_onednn_cache()
        self.tokenizer: TaskTokenizer = tokenizer
        self.task: TaskSpec = task
        self.record = record
        self.device = torch.device(device)
        self.batch_size = int(batch_size or task.eval_batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.bf16 = bf16
        self.label_names: list[str] = list(record.get("label_names") or [])
        self.text_to_text = record.get("seq2seq") == "text_to_text"
        self.featurizer = _featurizer(task, tokenizer)
        self.version_2 = (
            _squad_v2(task) if version_2 is None and task.kind == "qa" else bool(version_2)
        )

    @property
    def kind(self) -> str:
        """The task kind (``classification``, ``regression``, ``tagging``, ``qa``,
        ``multiple_choice``)."""
        return self.task.kind

    def rows(self, path: str | Path) -> Iterator[Row]:
        """The input file's ``(values, example)`` rows, streamed."""
        return prediction_rows(self.task, path)

    def predict(self, rows: Sequence[Row]) -> list[dict[str, Any]]:
        """One output record per row, in the rows' order."""
        if not rows:
            return []
        examples = [example for _values, example in rows]
        with torch.inference_mode(), self._autocast():
            if self.text_to_text:
                results = self._generate(examples)
            elif self.kind == "qa":
                results = self._answers(examples)
            else:
                results = self._scored(examples)
        return [record_of(values, r) for (values, _e), r in zip(rows, results, strict=True)]

    # -- per kind ----------------------------------------------------------------------

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _batches(self, examples: Sequence[Any]) -> Iterator[tuple[list[int], Any]]:
        """``(positions, batch)`` over ``examples`` sorted by length (less padding)."""
        order = sorted(range(len(examples)), key=lambda i: _length(examples[i]))
        for start in range(0, len(order), self.batch_size):
            positions = order[start : start + self.batch_size]
            batch = self.featurizer.featurize([examples[i] for i in positions])
            yield positions, batch

    def _forward(self, batch: dict[str, torch.Tensor]) -> Any:
        inputs = {k: v.to(self.device) for k, v in batch.items() if k not in _TARGET_KEYS}
        if self.kind == "tagging":  # the tag 0 of every word only marked its first piece
            inputs["first_piece_mask"] = (batch["labels"] != -100).to(self.device)
        return self.model(inputs)

    def _scored(self, examples: Sequence[Any]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = [{} for _ in examples]
        for positions, batch in self._batches(examples):
            output = self._forward(batch)
            logits = output.logits.float().cpu()
            if self.kind == "tagging":
                firsts = batch["labels"] != -100  # (B, L): each word's first piece
                probabilities = logits.softmax(-1)
                tags = getattr(output, "predictions", None)
                best = tags.cpu() if tags is not None else logits.argmax(-1)
                for row, position in enumerate(positions):
                    chosen = best[row][firsts[row]].tolist()
                    chosen_p = probabilities[row][firsts[row]].gather(
                        -1, torch.tensor(chosen).unsqueeze(-1)
                    )
                    words = examples[position].words
                    results[position] = {
                        "words": list(words),
                        "prediction": [self._name(t) for t in chosen]
                        + ["O"] * (len(words) - len(chosen)),  # words cut by max_length
                        "scores": [round(float(p), 6) for p in chosen_p.squeeze(-1).tolist()],
                    }
            elif self.kind == "regression":
                for row, position in enumerate(positions):
                    results[position] = {"prediction": float(logits[row].reshape(-1)[0])}
            else:
                probabilities = logits.softmax(-1)
                for row, position in enumerate(positions):
                    p = probabilities[row].tolist()
                    best_index = max(range(len(p)), key=p.__getitem__)
                    if self.kind == "multiple_choice":
                        prediction: Any = best_index
                        per_choice: Any = [round(x, 6) for x in p]
                    else:
                        prediction = self._name(best_index)
                        per_choice = {self._name(i): round(x, 6) for i, x in enumerate(p)}
                    results[position] = {
                        "prediction": prediction,
                        "score": round(p[best_index], 6),
                        "scores": per_choice,
                    }
        return results

    def _answers(self, examples: Sequence[Any]) -> list[dict[str, Any]]:
        windows = self.featurizer.windows(examples)
        starts: list[torch.Tensor] = [torch.empty(0)] * len(windows)
        ends: list[torch.Tensor] = [torch.empty(0)] * len(windows)
        for positions, batch in self._batches(windows):
            logits = self._forward(batch).logits.float().cpu()
            for row, position in enumerate(positions):
                starts[position], ends[position] = logits[row, :, 0], logits[row, :, 1]
        details: dict[str, dict[str, Any]] = {}
        answers = postprocess_qa(
            windows,
            starts,
            ends,
            n_best=self.task.n_best,
            max_answer_length=self.task.max_answer_length,
            null_threshold=self.task.null_threshold,
            version_2=self.version_2,
            details=details,
        )
        return [{"prediction": answers[e.id], **details[e.id]} for e in examples]

    def _generate(self, examples: Sequence[Any]) -> list[dict[str, Any]]:
        from ptm_core.finetune.text_to_text import evaluate_text_to_text

        data = TaskData(list(examples), list(examples), self.featurizer, self.label_names, False)
        _metrics, texts = evaluate_text_to_text(
            self.model,  # type: ignore[arg-type]
            self.task,
            data,
            device=self.device,
            return_text=True,
        )
        return [{"prediction": text, "score": None} for text in texts]

    def _name(self, index: int) -> str | int:
        return self.label_names[index] if index < len(self.label_names) else index


_TARGET_KEYS = ("labels", "start_positions", "end_positions")


def _featurizer(task: TaskSpec, tokenizer: TaskTokenizer) -> Any:
    if task.kind == "qa":
        return QAFeaturizer(
            tokenizer,
            task.max_length,
            task.doc_stride,
            max_query_length=min(64, task.max_length - task.doc_stride - 4),
        )
    if task.format == "glue":
        kind: Literal["classification", "regression"] = (
            "regression" if task.kind == "regression" else "classification"
        )
        return SentenceFeaturizer(tokenizer, task.max_length, kind=kind)
    if task.format == "conll":
        return TaggingFeaturizer(tokenizer, task.max_length)
    return ChoiceFeaturizer(tokenizer, task.max_length)


def _squad_v2(task: TaskSpec) -> bool:
    """Whether the model was fine-tuned for unanswerable questions: its task's dev (or
    train) file, when still there, has one."""
    for name in (task.dev, task.train):
        if task.format == "squad" and Path(name).is_file():
            with contextlib.suppress(ValueError):
                return read_squad(name, check_answers=False).version_2
    return False


def _length(example: Any) -> int:
    """A cheap length proxy (characters) to sort rows by before batching."""
    if hasattr(example, "input_ids"):  # a QA window
        return len(example.input_ids)
    if hasattr(example, "words"):
        return sum(len(w) + 1 for w in example.words)
    if hasattr(example, "endings"):
        return len(example.context) + len(example.start) + max(map(len, example.endings))
    return len(example.text) + len(example.pair or "")


def record_of(values: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The input row's values (a clashing name kept as ``input_<name>``), then the result."""
    record = {(f"input_{k}" if k in result else k): v for k, v in values.items()}
    record.update(result)
    return record


__all__ = [
    "PredictorError",
    "TaskPredictor",
    "check_device",
    "check_predictable",
    "record_of",
]
