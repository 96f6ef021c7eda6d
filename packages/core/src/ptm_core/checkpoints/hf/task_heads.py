"""The fine-tuning classes of each Hugging Face family, as rows ptm reads and writes.

Each converter module (``ptm_core.checkpoints.hf.<model_type>``) lists its
``...For{SequenceClassification, TokenClassification, QuestionAnswering, MultipleChoice}``
classes in ``task_heads(model_type)`` (one module may serve several model types: RoBERTa
and XLM-R): the architecture name, the ptm task kind, the map from ptm's
head parameters to the file's tensor names, and how the head's variant (summary token,
pooler activation, dropout) is read from and written to the ``config.json``:

===========  =====================================  =======================================
family       sequence classification                multiple choice
===========  =====================================  =======================================
bert         ``bert.pooler`` (tanh) + classifier    the same, one score per choice
albert       ``albert.pooler`` (tanh) + classifier  the same
electra      ``classifier.{dense,out_proj}``:       ``sequence_summary`` (``summary_type``,
             dropout, dense, GELU, dropout, out     ``summary_activation``) + classifier
xlnet        ``sequence_summary`` (last token,      the same + ``logits_proj``
             tanh) + ``logits_proj``
roberta,     ``classifier.{dense,out_proj}``:       ``roberta.pooler`` (tanh) + classifier
xlm-roberta  dropout, dense, tanh, dropout, out
distilbert   ``pre_classifier``, ReLU, dropout,     the same
             ``classifier``
===========  =====================================  =======================================

Token classification and question answering are ``classifier`` / ``qa_outputs`` on every
token in all of them (XLNet's ``XLNetForQuestionAnsweringSimple``; its token classifier has
no dropout). :mod:`ptm_core.checkpoints.hf.bert_tasks` loads and exports through these rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ptm_core.checkpoints.io import CheckpointError

POOLED_KINDS = ("classification", "multiple_choice")
QA_NAMES = {"qa_outputs.weight": "qa_outputs.weight", "qa_outputs.bias": "qa_outputs.bias"}
CLASSIFIER_NAMES = {"classifier.weight": "classifier.weight", "classifier.bias": "classifier.bias"}
#: RoBERTa's and ELECTRA's sequence classifier: ``classifier.dense`` then ``out_proj``.
DENSE_OUT_PROJ_NAMES = {
    "pooler.dense.weight": "classifier.dense.weight",
    "pooler.dense.bias": "classifier.dense.bias",
    "classifier.weight": "classifier.out_proj.weight",
    "classifier.bias": "classifier.out_proj.bias",
}


@dataclass(frozen=True)
class HeadVariant:
    """How a sequence-level head summarises the sequence (see :mod:`ptm_core.heads.tasks`).

    Attributes:
        pool: ``"first"`` (BERT's ``[CLS]``) or ``"last"`` (XLNet's summary token).
        activation: the pooler's activation, ``"tanh"``, ``"gelu"`` (ELECTRA) or ``"relu"``
            (DistilBERT).
        input_dropout: dropout on the summary token before the pooler as well (ELECTRA,
            RoBERTa's classifier).
        dropout: the head's dropout probability.
    """

    pool: str = "first"
    activation: str = "tanh"
    input_dropout: bool = False
    dropout: float = 0.1

    def shape(self) -> tuple[str, str, bool]:
        """What decides the computation (dropout aside): the part export must match."""
        return (self.pool, self.activation, self.input_dropout)


def read_dropout(
    dropout_keys: tuple[str, ...], default: float = 0.1
) -> Callable[[dict[str, Any], str], HeadVariant]:
    """A ``read`` for BERT's pooler: the dropout from the first of ``dropout_keys`` set."""

    def read(config: dict[str, Any], source: str) -> HeadVariant:
        for key in dropout_keys:
            if config.get(key) is not None:
                return HeadVariant(dropout=float(config[key]))
        return HeadVariant(dropout=default)

    return read


def write_dropout(dropout_key: str | None) -> Callable[[HeadVariant], dict[str, Any] | None]:
    """A ``write`` for BERT's pooler (``None`` for any other variant)."""

    def write(variant: HeadVariant) -> dict[str, Any] | None:
        if variant.shape() != HeadVariant().shape():
            return None
        return {dropout_key: variant.dropout} if dropout_key else {}

    return write


@dataclass(frozen=True)
class HFTaskHead:
    """One ``...For<Task>`` class of a Hugging Face family.

    Attributes:
        architecture: the class name in ``config.json``'s ``architectures``.
        kind: ptm's task kind (``classification`` covers regression: the config decides).
        names: ptm head parameter -> tensor name in the model file.
        read: ``read(config, source)`` -> the :class:`HeadVariant` the config describes
            (raises :class:`CheckpointError` naming ``source`` for a variant ptm lacks).
        write: ``write(variant)`` -> the config keys that describe ``variant``, or ``None``
            when this class cannot hold it.
        fixed: a variant the class always has (ELECTRA's classification head), for errors.
        optional: tensor names of ``names`` a file may lack (a bias its config turns off,
            ModernBERT's ``classifier_bias`` / ``norm_bias``): the ptm parameter is then zero.
        export: rewrites the head's file tensors for the encoder's config before they are
            written (ModernBERT folds a norm bias its config cannot hold into the classifier
            bias); ``None`` = written as they are.
    """

    architecture: str
    kind: str
    names: Mapping[str, str]
    read: Callable[[dict[str, Any], str], HeadVariant] = field(default=read_dropout(()))
    write: Callable[[HeadVariant], dict[str, Any] | None] = field(default=write_dropout(None))
    fixed: str = "a tanh pooler on the first token"
    optional: tuple[str, ...] = ()
    export: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None


def bert_style_rows(
    prefix: str,
    pooler: Mapping[str, str],
    *,
    sequence_dropout: tuple[str, ...],
    token_dropout: tuple[str, ...],
) -> tuple[HFTaskHead, ...]:
    """The four classes of BERT's layout (a tanh pooler + classifier; classifier;
    qa_outputs; pooler + one score), for the family whose architectures start ``prefix``.

    Args:
        prefix: ``"Bert"``, ``"Albert"``.
        pooler: ptm ``pooler.dense.{weight,bias}`` -> the file's pooler tensors.
        sequence_dropout: config keys of the pooled heads' dropout, first one set wins
            (the first is written on export).
        token_dropout: the same for the token classifier.
    """
    classifier = CLASSIFIER_NAMES
    pooled = {**pooler, **classifier}
    return (
        HFTaskHead(
            f"{prefix}ForSequenceClassification",
            "classification",
            pooled,
            read_dropout(sequence_dropout),
            write_dropout(sequence_dropout[0]),
        ),
        HFTaskHead(
            f"{prefix}ForTokenClassification",
            "tagging",
            classifier,
            read_dropout(token_dropout),
            write_dropout(token_dropout[0]),
        ),
        HFTaskHead(f"{prefix}ForQuestionAnswering", "qa", QA_NAMES),
        HFTaskHead(
            f"{prefix}ForMultipleChoice",
            "multiple_choice",
            pooled,
            read_dropout(sequence_dropout),
            write_dropout(sequence_dropout[0]),
        ),
    )


_SUMMARY_TYPES = ("first", "last")
_SUMMARY_ACTIVATIONS = ("tanh", "gelu")


def read_summary(
    config: dict[str, Any], source: str, *, default_type: str, default_activation: str
) -> HeadVariant:
    """The :class:`HeadVariant` of a ``SequenceSummary`` (ELECTRA, XLNet) config.

    Raises:
        CheckpointError: a summary ptm's heads do not compute (``summary_type`` ``mean`` or
            ``cls_index``, no projection, no or another activation, a projection to the
            labels, a first dropout unlike the last one), naming the key and the fix.
    """
    summary_type = config.get("summary_type", default_type)
    # transformers leaves a family's defaults out of config.json.
    activation = config.get("summary_activation", default_activation)
    problems = []
    if summary_type not in _SUMMARY_TYPES:
        problems.append(f"summary_type {summary_type!r} (ptm: {' or '.join(_SUMMARY_TYPES)})")
    if not config.get("summary_use_proj", True):
        problems.append("summary_use_proj false (ptm's head always projects)")
    if config.get("summary_proj_to_labels"):
        problems.append("summary_proj_to_labels true (ptm projects to the hidden size)")
    if activation not in _SUMMARY_ACTIVATIONS:
        problems.append(
            f"summary_activation {activation!r} (ptm: {' or '.join(_SUMMARY_ACTIVATIONS)})"
        )
    last = float(config.get("summary_last_dropout", 0.1) or 0.0)
    first = float(config.get("summary_first_dropout") or 0.0)
    if first and first != last:
        problems.append(
            f"summary_first_dropout {first} != summary_last_dropout {last} (ptm's head has one "
            "dropout)"
        )
    if problems:
        raise CheckpointError(
            f"{source}: the sequence summary has {'; '.join(problems)}; ptm cannot compute "
            "this head. Fix these keys (the weights do not depend on them) or load the encoder "
            "alone"
        )
    return HeadVariant(
        pool=str(summary_type), activation=str(activation), input_dropout=first > 0, dropout=last
    )


def write_summary(variant: HeadVariant) -> dict[str, Any]:
    """The ``SequenceSummary`` config keys of ``variant`` (the inverse of
    :func:`read_summary`)."""
    return {
        "summary_type": variant.pool,
        "summary_use_proj": True,
        "summary_proj_to_labels": False,
        "summary_activation": variant.activation,
        "summary_last_dropout": variant.dropout,
        "summary_first_dropout": variant.dropout if variant.input_dropout else 0.0,
    }


def find_row(rows: tuple[HFTaskHead, ...], architectures: list[str]) -> HFTaskHead | None:
    """The first row whose class ``architectures`` names."""
    for name in architectures:
        for row in rows:
            if row.architecture == name:
                return row
    return None


def task_head_tensors(config: dict[str, Any]) -> tuple[str, set[str]] | None:
    """For a ``...For<Task>`` ``config.json`` dict: its class and its head's tensor names
    (without the encoder prefix), which an encoder-only load leaves out; else ``None``."""
    from ptm_core.checkpoints import registry

    model_type = str(config.get("model_type", "bert"))
    module = registry.hf_encoder_family(model_type)
    rows = getattr(module, "task_heads", None)
    if module is None or rows is None:
        return None
    row = find_row(rows(model_type), list(config.get("architectures") or []))
    if row is None:
        return None
    prefix = str(getattr(module, "HF_PREFIX", ""))
    return row.architecture, {name.removeprefix(prefix) for name in row.names.values()}
