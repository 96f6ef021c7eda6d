"""``ptm predict`` on an XLM classifier: each row's text with its language's id.

The family's ``predictors`` hook (:class:`~ptm_core.families.spec.FamilySpec`). The input is
a table of any format of :mod:`ptm_core.finetune.data.tables` with a ``text`` (or
``sentence``) column and a ``lang`` column naming one of the model's languages (XLM adds a
language embedding to every token, so the language is an input, not a guess). Rows are
read, scored (grouped by language inside a chunk) and written in chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.tables import TableFile
from ptm_core.finetune.predict import record_of
from ptm_multilingual.finetune import XLMSentenceFeaturizer, load_xlm_classifier

TEXT_COLUMNS = ("text", "sentence")


class XLMPredictions:
    """The records of ``ptm predict`` for an XLM classifier ``final/`` on one input file.

    Args:
        directory: the fine-tuned ``final/``.
        path: the rows to predict on (``text`` and ``lang`` columns).
        device: where to run.
        batch_size: rows per forward pass (default 64).
    """

    def __init__(
        self, directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        model, tokenizer, record = load_xlm_classifier(directory)
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.kind = str(record.get("kind", "classification"))
        self.names: list[str] = list(record.get("label_names") or [])
        self.max_length = int(record.get("max_length", 128))
        self.device = torch.device(device)
        self.batch_size = int(batch_size or 64)
        self.languages = list(model.encoder.languages)
        self.table = TableFile(path)
        header = self.table.header_line if self.table.by_line else None
        text = next((c for c in TEXT_COLUMNS if c in self.table.columns), None)
        for name, found in (("text", text), ("lang", "lang" in self.table.columns or None)):
            if found is None:
                raise self.table.error(
                    header,
                    name,
                    f"the {self.table.where_columns} has no {name} column "
                    f"(it has {list(self.table.columns)})",
                    f"give each row its text and its language (lang: one of {self.languages})",
                )
        self.text = str(text)
        self._featurizers: dict[str, XLMSentenceFeaturizer] = {}

    def records(self) -> Iterator[dict[str, Any]]:
        """One record per input row, in order: the row's values, ``prediction``, scores."""
        chunk: list[tuple[dict[str, Any], str, SentenceExample]] = []
        for _key, number, values in self.table.scan():
            chunk.append((values, *self._example(number, values)))
            if len(chunk) >= self.batch_size * 16:
                yield from self._scored(chunk)
                chunk = []
        yield from self._scored(chunk)

    def _example(self, number: int, values: dict[str, Any]) -> tuple[str, SentenceExample]:
        lang, text = values.get("lang"), values.get(self.text)
        if lang not in self.languages:
            raise self.table.error(
                number,
                "lang",
                f"language {lang!r} is not one of the model's",
                f"use one of {self.languages}",
            )
        if not isinstance(text, str) or not text.strip():
            raise self.table.error(
                number, self.text, f"expected text, got {text!r:.40}", "write the text"
            )
        return str(lang), SentenceExample(
            text=text, pair=None, label=None, id=str(number), line=number
        )

    def _scored(
        self, chunk: list[tuple[dict[str, Any], str, SentenceExample]]
    ) -> Iterator[dict[str, Any]]:
        results: list[dict[str, Any]] = [{} for _ in chunk]
        for lang in dict.fromkeys(lang for _v, lang, _e in chunk):
            positions = [i for i, (_v, row_lang, _e) in enumerate(chunk) if row_lang == lang]
            featurizer = self._featurizers.setdefault(
                lang, XLMSentenceFeaturizer(self.tokenizer, lang, self.max_length)
            )
            for start in range(0, len(positions), self.batch_size):
                part = positions[start : start + self.batch_size]
                batch = featurizer.featurize([chunk[i][2] for i in part])
                with torch.inference_mode():
                    logits = self.model({k: v.to(self.device) for k, v in batch.items()}).logits
                for i, row in zip(part, logits.float().cpu(), strict=True):
                    results[i] = self._result(row)
        for (values, _lang, _example), result in zip(chunk, results, strict=True):
            yield record_of(values, result)

    def _result(self, logits: torch.Tensor) -> dict[str, Any]:
        if self.kind == "regression":
            return {"prediction": float(logits.reshape(-1)[0])}
        p = logits.softmax(-1).tolist()
        best = max(range(len(p)), key=p.__getitem__)
        names = self.names or [str(i) for i in range(len(p))]
        return {
            "prediction": names[best],
            "score": round(p[best], 6),
            "scores": {names[i]: round(x, 6) for i, x in enumerate(p)},
        }


def predict_xlm_rows(
    directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
) -> XLMPredictions:
    """The ``predictors`` hook: :class:`XLMPredictions` for ``directory`` on ``path``."""
    return XLMPredictions(directory, path, device=device, batch_size=batch_size)


__all__ = ["XLMPredictions", "predict_xlm_rows"]
