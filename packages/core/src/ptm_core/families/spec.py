"""What a model family is: one :class:`FamilySpec`, the only thing core and flows know of it.

A family (BERT-style encoders, XLM, ERNIE-THU, VisualBERT, ...) is registered by its package
through the ``ptm.families`` entry point group (:mod:`ptm_core.families.registry`). The spec
names the family's pieces as ``"module:attribute"`` strings, so reading every spec imports
no model, no torch and no heavy dependency: ``ptm --help`` and ``read_model_kind`` stay
fast, and a package that is not installed simply has no spec.

The runner (:func:`ptm_core.families.runner.run_pretraining`, the flows' ``pretrain``,
``finetune``, ``evaluate`` and ``export``) calls the hooks below; nothing in core or flows
names a family.

Hooks (each a ``"module:attribute"`` string, ``None`` when the family has none):

``settings``
    The family's typed config: a dataclass whose fields are the config blocks the family
    reads besides the shared ones (``trainer``, ``objective``, ``model``, ``seed``,
    ``init_from``): e.g. ``data`` and ``knowledge``. Each default is written here once; the
    YAML presets only set what differs. The runner builds it from the composed config
    (:func:`ptm_core.families.settings.settings_from_mapping`).
``plan_pretraining``
    ``plan(run: PretrainRun) -> PretrainingPlan``: the family's data (batches), its network
    and how to save it. The runner then wraps the network and the objectives in the one
    :class:`~ptm_core.models.pretraining.PretrainingModel` (reading ``input_keys``), trains
    with the one Trainer and calls ``plan.save_final``.
``pretrain``
    ``pretrain(run: PretrainRun) -> result``: for a family that does not train a network
    with the one Trainer (word2vec in gensim, GloVe's own AdaGrad loop); used when there is
    no ``plan_pretraining``. The result has the fields every run reports (``output_dir``,
    ``encoder_dir``, ``metrics_path``, ``last_checkpoint``, ``final_metrics``).
``finetune``
    ``finetune(run: FinetuneRun) -> FinetuneResult``: the family's task adapter. The
    runner picks the family from the ``init_from`` folder's ``"ptm_model"`` kind.
``load`` / ``save``
    ``load(path, **options) -> model`` / ``save(model, path, **options)``: the folder
    format of each kind in ``kinds`` (``from_pretrained``/``save_pretrained`` call these).
``evaluation``
    An :class:`~ptm_core.evaluation.registry.Evaluation` (``ptm evaluate``), or a tuple of
    them (a family whose pre-trained and fine-tuned folders score differently).
``export``
    ``export(model_dir, out_dir, **options) -> Path``: Hugging Face export, if any.
``recognizes``
    ``recognizes(path) -> bool``: for folders written before ``config.json`` carried
    ``"ptm_model"``: whether ``path`` is one of this family's.
``task_loaders``
    ``{marker: "module:function"}``: fine-tuned ``final/`` folders whose model is not a
    core ``TaskModel`` (ULMFiT's classifier) carry ``marker: true`` in ``task.json``;
    ``load(directory) -> nn.Module`` reads them.
``predictors``
    ``{recipe or family: "module:function"}``: ``ptm predict`` on a fine-tuned ``final/``
    whose ``task.json`` ``recipe`` (or ``family``) is the key, for models that read more
    than text (ERNIE-THU's entity links). ``function(directory, path, *, device,
    batch_size)`` returns an object with ``kind`` and ``records() -> Iterator[dict]``: one
    record per input row, in order (the row's values plus ``prediction`` and its scores).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FamilySpec:
    """One model family: its kinds, inputs, typed config and hooks.

    Attributes:
        name: the family's name (``config.family`` selects it; ``ptm families`` lists it).
        description: one line for ``ptm families`` and error messages.
        kinds: the ``"ptm_model"`` kinds its folders carry (an open registry: the union of
            every spec's kinds is :func:`ptm_core.model_kinds.known_kinds`).
        input_keys: the batch keys its network's forward reads.
        settings: ``"module:Class"`` of its typed config dataclass.
        plan_pretraining: ``"module:function"`` (see the module docstring).
        pretrain: ``"module:function"``, for training outside the Trainer.
        finetune: ``"module:function"``.
        load: ``{kind: "module:function"}``.
        save: ``{kind: "module:function"}``.
        evaluation: ``"module:attribute"`` naming an ``Evaluation``, or a tuple of them.
        export: ``"module:function"``.
        recognizes: ``"module:function"``.
        task_loaders: ``task.json`` marker -> ``"module:function"`` (see above).
        predictors: ``task.json`` recipe or family -> ``"module:function"`` (see above).
        hf_model_types: Hugging Face ``model_type`` -> converter module (``config_from_hf``,
            ``config_to_hf``, ``state_from_hf``, ``state_to_hf``, ``check_exportable``).
        recipes: the older ``recipe:`` names this family answers to (configs written before
            ``family:``): ``{recipe: stage}`` with stage ``"pretrain"`` or ``"finetune"``.
        package: the distribution that registered it (filled in by the registry).
    """

    name: str
    description: str
    kinds: tuple[str, ...] = ()
    input_keys: tuple[str, ...] = ()
    settings: str | None = None
    plan_pretraining: str | None = None
    pretrain: str | None = None
    finetune: str | None = None
    load: Mapping[str, str] = field(default_factory=dict)
    save: Mapping[str, str] = field(default_factory=dict)
    evaluation: str | tuple[str, ...] | None = None
    export: str | None = None
    recognizes: str | None = None
    task_loaders: Mapping[str, str] = field(default_factory=dict)
    predictors: Mapping[str, str] = field(default_factory=dict)
    hf_model_types: Mapping[str, str] = field(default_factory=dict)
    recipes: Mapping[str, str] = field(default_factory=dict)
    package: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"family name {self.name!r} must be an identifier (xlm, ernie_thu)")
        hooks = {
            "settings": self.settings,
            "plan_pretraining": self.plan_pretraining,
            "pretrain": self.pretrain,
            "finetune": self.finetune,
            "export": self.export,
            "recognizes": self.recognizes,
            **{f"load[{k}]": v for k, v in self.load.items()},
            **{f"save[{k}]": v for k, v in self.save.items()},
            **{f"evaluation[{i}]": v for i, v in enumerate(self.evaluations)},
            **{f"task_loaders[{k}]": v for k, v in self.task_loaders.items()},
            **{f"predictors[{k}]": v for k, v in self.predictors.items()},
        }
        for hook, target in hooks.items():
            if target is not None:
                check_target(target, where=f"family {self.name!r} {hook}")
        unknown = sorted(set(self.load) - set(self.kinds)) + sorted(
            set(self.save) - set(self.kinds)
        )
        if unknown:
            raise ValueError(
                f"family {self.name!r}: load/save name kinds {unknown} that are not in its "
                f"kinds {list(self.kinds)}"
            )
        if self.plan_pretraining is not None and self.pretrain is not None:
            raise ValueError(
                f"family {self.name!r}: give plan_pretraining (the Trainer trains) or "
                "pretrain (the family trains itself), not both"
            )
        stages = {stage for stage in self.recipes.values()} - {"pretrain", "finetune"}
        if stages:
            raise ValueError(
                f"family {self.name!r}: recipes map to {sorted(stages)}; use 'pretrain' or "
                "'finetune'"
            )

    def hook(self, name: str) -> Any:
        """The object a hook names, its module imported now.

        Raises:
            LookupError: the family has no such hook (the message names the family).
        """
        target = getattr(self, name)
        if target is None:
            raise LookupError(f"family {self.name!r} has no {name} hook")
        if isinstance(target, tuple):
            return tuple(resolve(t) for t in target)
        return resolve(target)

    @property
    def evaluations(self) -> tuple[str, ...]:
        """The ``evaluation`` hook as a tuple of targets (empty when there is none)."""
        if self.evaluation is None:
            return ()
        return (self.evaluation,) if isinstance(self.evaluation, str) else self.evaluation

    def has(self, name: str) -> bool:
        """Whether the family defines hook ``name``."""
        return getattr(self, name) is not None


def check_target(target: str, *, where: str = "target") -> None:
    """Raise ``ValueError`` unless ``target`` reads ``"package.module:attribute"``."""
    module, sep, attribute = target.partition(":")
    if not sep or not module or not attribute.isidentifier():
        raise ValueError(f"{where}: {target!r} is not a 'package.module:attribute' string")


def resolve(target: str) -> Any:
    """The attribute a ``"module:attribute"`` string names (its module imported now)."""
    check_target(target)
    module, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except AttributeError:
        raise ImportError(f"{target}: module {module} has no attribute {attribute!r}") from None
