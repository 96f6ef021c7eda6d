"""``ptm predict`` on a K-BERT fine-tuned classifier: each row read as a sentence tree.

The family's ``predictors`` hook (:class:`~ptm_core.families.spec.FamilySpec`). The KG comes
from ``task.json``'s ``provenance`` (``kg_path``, ``predicate``, ``aliases``, as
``ptm finetune`` records it) and the featurizer from the model's saved settings
(:func:`~ptm_knowledge.kbert.finetune.featurizer_for`). The input is a table of any format of
:mod:`ptm_core.finetune.data.tables` with a header: the sentence in ``text_a`` (or ``text``,
``sentence``), a second one in ``text_b`` for a pair; a ``label`` column is kept, never read.
Rows are read, scored and written in chunks. Taggers have no predictor yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ptm_core.finetune.data.tables import TableFile
from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
from ptm_core.finetune.predict import PredictorError, record_of
from ptm_knowledge.kbert.finetune import featurizer_for, load_kbert_classifier
from ptm_knowledge.kbert.model import segment_words
from ptm_knowledge.kbert.tsv import LabeledSentence

TEXT_COLUMNS = ("text_a", "text", "sentence")


class KBertPredictions:
    """The records of ``ptm predict`` for a K-BERT classifier ``final/`` on one input file.

    Args:
        directory: the fine-tuned ``final/``.
        path: the rows to predict on.
        device: where to run.
        batch_size: rows per forward pass (default 64).
    """

    def __init__(
        self, directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        from ptm_knowledge.kbert.knowledge import knowledge_from_graph
        from ptm_knowledge.kg import load_knowledge_graph

        model, config = load_kbert_classifier(directory)
        if model.kind != "classification":
            raise PredictorError(
                f"{directory}: no predictor for K-BERT {model.kind} models yet (branch tokens "
                "must be left out of the word tags); score its dev file with `ptm evaluate`"
            )
        provenance = config.get("provenance") or {}
        if not provenance.get("kg_path"):
            raise PredictorError(
                f"{directory / 'task.json'}: no provenance.kg_path, so the KG this model reads "
                "is unknown; fine-tune it with `ptm finetune`, which records it"
            )
        knowledge = knowledge_from_graph(
            load_knowledge_graph(provenance["kg_path"]),
            predicate=bool(provenance.get("predicate", True)),
            aliases=bool(provenance.get("aliases", False)),
        )
        tokenizer = load_task_tokenizer(directory)
        self.model = model.to(device).eval()
        self.featurizer = featurizer_for(config, tokenizer, knowledge)
        self.names: list[str] = list(config["label_names"])
        self.kind = "classification"
        self.device = torch.device(device)
        self.batch_size = int(batch_size or 64)
        self.table = TableFile(path)
        text = next((c for c in TEXT_COLUMNS if c in self.table.columns), None)
        if text is None:
            raise self.table.error(
                self.table.header_line if self.table.by_line else None,
                "text_a",
                f"the {self.table.where_columns} has no text_a, text or sentence column "
                f"(it has {list(self.table.columns)})",
                "name the sentence column text_a (and a second sentence text_b)",
            )
        self.text = text
        self.second = "text_b" if "text_b" in self.table.columns else None

    def records(self) -> Iterator[dict[str, Any]]:
        """One record per input row, in order: the row's values, ``prediction``, scores."""
        chunk: list[tuple[dict[str, Any], LabeledSentence]] = []
        for _key, number, values in self.table.scan():
            chunk.append((values, self._sentence(number, values)))
            if len(chunk) >= self.batch_size:
                yield from self._scored(chunk)
                chunk = []
        yield from self._scored(chunk)

    def _sentence(self, number: int, values: dict[str, Any]) -> LabeledSentence:
        texts = []
        for column in (self.text, self.second):
            if column is None:
                continue
            value = values.get(column)
            if not isinstance(value, str) or not value.strip():
                raise self.table.error(
                    number, column, f"expected a sentence, got {value!r:.40}", "write the text"
                )
            texts.append(segment_words(value))
        return LabeledSentence(texts[0], 0, texts[1] if len(texts) > 1 else None)

    def _scored(
        self, chunk: list[tuple[dict[str, Any], LabeledSentence]]
    ) -> Iterator[dict[str, Any]]:
        if not chunk:
            return
        batch = self.featurizer.featurize([sentence for _values, sentence in chunk])
        inputs = {k: v.to(self.device) for k, v in batch.items() if k != "labels"}
        with torch.inference_mode():
            probabilities = self.model(inputs).logits.float().softmax(-1).cpu().tolist()
        for (values, _sentence), p in zip(chunk, probabilities, strict=True):
            best = max(range(len(p)), key=p.__getitem__)
            yield record_of(
                values,
                {
                    "prediction": self.names[best],
                    "score": round(p[best], 6),
                    "scores": {self.names[i]: round(x, 6) for i, x in enumerate(p)},
                },
            )


def predict_kbert_rows(
    directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
) -> KBertPredictions:
    """The ``predictors`` hook: :class:`KBertPredictions` for ``directory`` on ``path``."""
    return KBertPredictions(directory, path, device=device, batch_size=batch_size)


__all__ = ["KBertPredictions", "predict_kbert_rows"]
