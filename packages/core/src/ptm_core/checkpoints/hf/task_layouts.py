"""Where each Hugging Face ``...For<Task>`` class keeps its head, per model type.

ptm's task heads (:mod:`ptm_core.heads.tasks`) hold ``pooler.dense`` (sequence-level
kinds), ``classifier`` and ``qa_outputs``; the ``transformers`` classes keep the same
tensors under other names:

============  ===========================  =========================  =====================
model type    sequence classification      multiple choice            pooler activation
============  ===========================  =========================  =====================
bert          ``bert.pooler.dense``,       the same                   tanh
              ``classifier``
roberta,      ``classifier.dense``,        ``roberta.pooler.dense``,  tanh
xlm-roberta   ``classifier.out_proj``      ``classifier``
distilbert    ``pre_classifier``,          the same                   ReLU
              ``classifier``
============  ===========================  =========================  =====================

Token classification is ``classifier`` and question answering ``qa_outputs`` in all of
them. :mod:`~ptm_core.checkpoints.hf.bert_tasks` reads and writes the folders through
these tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("classification", "tagging", "qa", "multiple_choice")


@dataclass(frozen=True)
class TaskLayout:
    """The task classes of one Hugging Face model type.

    Attributes:
        model_type: the ``model_type`` of its ``config.json``.
        prefix: the encoder's weight prefix (``bert.``).
        class_prefix: the start of the class names (``Bert``).
        head_names: per ptm task kind, ptm head parameter -> Hugging Face tensor.
        activation: the activation after ``pooler.dense`` (BERT's pooler: ``tanh``).
        kinds: the task kinds that have a class.
    """

    model_type: str
    prefix: str
    class_prefix: str
    head_names: Mapping[str, Mapping[str, str]]
    activation: str = "tanh"
    kinds: tuple[str, ...] = KINDS

    def architecture(self, kind: str) -> str:
        """The ``transformers`` class of ``kind`` (regression is a sequence classifier)."""
        suffix = {
            "classification": "SequenceClassification",
            "regression": "SequenceClassification",
            "tagging": "TokenClassification",
            "qa": "QuestionAnswering",
            "multiple_choice": "MultipleChoice",
        }[kind]
        return f"{self.class_prefix}For{suffix}"

    def architectures(self) -> dict[str, str]:
        """Class name -> ptm task kind, for the kinds this model type has."""
        return {self.architecture(kind): kind for kind in self.kinds}

    def names(self, kind: str) -> Mapping[str, str]:
        """ptm head parameter -> Hugging Face tensor for ``kind``."""
        return self.head_names["classification" if kind == "regression" else kind]


def _names(pooler: str, classifier: str) -> dict[str, str]:
    return {
        "pooler.dense.weight": f"{pooler}.weight",
        "pooler.dense.bias": f"{pooler}.bias",
        "classifier.weight": f"{classifier}.weight",
        "classifier.bias": f"{classifier}.bias",
    }


_TOKENS = {"classifier.weight": "classifier.weight", "classifier.bias": "classifier.bias"}
_SPANS = {"qa_outputs.weight": "qa_outputs.weight", "qa_outputs.bias": "qa_outputs.bias"}


def _layout(
    model_type: str, prefix: str, class_prefix: str, pooled: dict[str, str], chosen: dict[str, str]
) -> TaskLayout:
    return TaskLayout(
        model_type,
        prefix,
        class_prefix,
        {"classification": pooled, "multiple_choice": chosen, "tagging": _TOKENS, "qa": _SPANS},
    )


BERT = _layout(
    "bert",
    "bert.",
    "Bert",
    _names("bert.pooler.dense", "classifier"),
    _names("bert.pooler.dense", "classifier"),
)
_ROBERTA_POOLED = _names("classifier.dense", "classifier.out_proj")
_ROBERTA_CHOSEN = _names("roberta.pooler.dense", "classifier")
ROBERTA = _layout("roberta", "roberta.", "Roberta", _ROBERTA_POOLED, _ROBERTA_CHOSEN)
XLM_ROBERTA = _layout("xlm-roberta", "roberta.", "XLMRoberta", _ROBERTA_POOLED, _ROBERTA_CHOSEN)
_DISTILBERT_POOLED = _names("pre_classifier", "classifier")
DISTILBERT = TaskLayout(
    "distilbert",
    "distilbert.",
    "DistilBert",
    {
        "classification": _DISTILBERT_POOLED,
        "multiple_choice": _DISTILBERT_POOLED,
        "tagging": _TOKENS,
        "qa": _SPANS,
    },
    activation="relu",
)

LAYOUTS: dict[str, TaskLayout] = {
    layout.model_type: layout for layout in (BERT, ROBERTA, XLM_ROBERTA, DISTILBERT)
}


def layout_for_config(config: Any) -> TaskLayout:
    """The layout an encoder config exports to: its ``hf_model_type``'s, else BERT's."""
    return LAYOUTS[getattr(config, "hf_model_type", "bert")]


def layout_for_architecture(architecture: str) -> TaskLayout | None:
    """The layout that has a class named ``architecture``; ``None`` if none has."""
    for layout in LAYOUTS.values():
        if architecture in layout.architectures():
            return layout
    return None


def all_architectures() -> dict[str, str]:
    """Every task class ptm reads -> its ptm task kind."""
    return {
        name: kind for layout in LAYOUTS.values() for name, kind in layout.architectures().items()
    }
