"""Every concrete ``Objective`` of every package has an ``ObjectiveTestCase`` subclass.

As PyKEEN's ``MetaTestCase``: the objectives are found by importing each package's modules
that define one, the contract tests by importing every test module that subclasses the case.
A new objective without its few-line contract test fails here, by name.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path

from cases import ObjectiveTestCase

from ptm_core.objectives import Objective
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = (
    "ptm_core",
    "ptm_classic",
    "ptm_knowledge",
    "ptm_multilingual",
    "ptm_multimodal",
    "ptm_text",
)
# Bases that are not objectives of their own (subclassed by real ones).
ABSTRACT = {Objective, Seq2SeqObjective}
DEFINES_OBJECTIVE = re.compile(r"^class \w+\([\w.]*Objective\)", re.MULTILINE)


def _objective_classes() -> set[type]:
    for source in sorted((ROOT / "packages").glob("*/src/ptm_*/**/*.py")):
        if DEFINES_OBJECTIVE.search(source.read_text()):
            parts = source.with_suffix("").parts
            importlib.import_module(".".join(parts[parts.index("src") + 1 :]))
    found: set[type] = set()
    todo = [Objective]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if (
                sub.__module__.split(".")[0] in PACKAGES
                and sub not in ABSTRACT
                and not sub.__name__.startswith("_")
            ):
                found.add(sub)
    return found


def _tested_classes() -> set[type]:
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.name == Path(__file__).name or "ObjectiveTestCase" not in path.read_text():
            continue
        name = f"_objective_contract_{path.parent.name}_{path.stem}"
        if name in sys.modules:
            continue
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    tested: set[type] = set()
    todo: list[type] = [ObjectiveTestCase]
    while todo:
        case = todo.pop()
        for sub in case.__subclasses__():
            todo.append(sub)
            if "objective_cls" in vars(sub) or getattr(sub, "objective_cls", None):
                tested.add(sub.objective_cls)
    return tested


def test_every_objective_has_a_contract_test() -> None:
    objectives = _objective_classes()
    assert len(objectives) >= 20, sorted(c.__name__ for c in objectives)
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in objectives - _tested_classes())
    assert not missing, (
        "these objectives have no ObjectiveTestCase subclass (tests/core/objectives/cases.py): "
        + ", ".join(missing)
    )


def test_accuracy_equals_argmax_agreement() -> None:
    """The max-reduction accuracy matches ``argmax == label`` on untied logits, batched or
    not, counts a row whose label ties the maximum as correct, and is 0 on no rows."""
    import torch

    from ptm_core.objectives.base import accuracy

    gen = torch.Generator().manual_seed(0)
    for shape in [(64, 11), (4, 9, 30)]:
        logits = torch.randn(*shape, generator=gen, requires_grad=True)
        labels = torch.randint(0, shape[-1], shape[:-1], generator=gen)
        expected = (logits.argmax(-1) == labels).float().mean()
        got = accuracy(logits, labels)
        assert got.item() == expected.item()
        assert not got.requires_grad
    tied = torch.tensor([[1.0, 3.0, 3.0], [0.0, 2.0, 1.0]])
    assert accuracy(tied, torch.tensor([2, 0])).item() == 0.5
    assert accuracy(torch.zeros(0, 5), torch.zeros(0, dtype=torch.long)).item() == 0.0
