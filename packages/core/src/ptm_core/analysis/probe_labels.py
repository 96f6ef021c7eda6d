"""Word labels for layer probes from a CoNLL column file (POS, chunk or NER columns).

The file is read by ptm's CoNLL reader (:func:`ptm_core.finetune.data.conll.read_conll`,
``data_specs/conll_tagging``), any column as the label, with no tagging scheme checked
(a POS column is no BIO). Each sentence becomes one text, its words joined by single
spaces, and every word one labelled span of it.
"""

from __future__ import annotations

from pathlib import Path

from ptm_core.analysis.layer_features import LabeledText
from ptm_core.data.errors import DataError
from ptm_core.finetune.data.conll import read_conll


def conll_texts(path: str | Path, column: int = -1) -> list[LabeledText]:
    """The sentences of a CoNLL file with column ``column`` as each word's label.

    Args:
        path: a CoNLL-2003 style file (one ``word col1 col2 ...`` line per word, a blank
            line between sentences).
        column: the label's column, 0-based from the word (1 = the second column, e.g.
            CoNLL-2003's POS; negative counts from the end, -1 = the last, e.g. NER).

    Raises:
        DataError: ``file:line`` of a line without that column, or a file without
            sentences.
        ValueError: ``column`` 0 (the word itself).
    """
    if column == 0:
        raise ValueError("--column 0 is the word itself; give the label's column (1, 2, ... or -1)")
    try:
        records = read_conll(path, tag_column=column, scheme="none")
        sentences = list(records)
    except DataError as exc:
        if exc.field != "tag":
            raise
        raise DataError(
            exc.path,
            exc.line,
            "label column",
            exc.problem,
            "give every word line the label's column, or pass another --column "
            "(0-based from the word, -1 = the last)",
        ) from None
    names = records.label_names
    texts = []
    for sentence in sentences:
        spans, start = [], 0
        for word in sentence.words:
            spans.append((start, start + len(word)))
            start += len(word) + 1
        assert sentence.tags is not None
        texts.append(
            LabeledText(
                " ".join(sentence.words),
                spans,
                [names[t] for t in sentence.tags],
                where=f"{path}:{sentence.line}",
            )
        )
    return texts
