"""ptm-classic plugs into core from above: ptm-core finds its pieces without importing it."""

from __future__ import annotations

import subprocess
import sys

from ptm_core.finetune.task_loaders import task_loader


def test_ulmfit_task_loader_is_found_by_entry_point() -> None:
    from ptm_classic.recurrent.ulmfit import load_ulmfit_classifier

    assert task_loader({"ulmfit": True, "kind": "classification"}) is load_ulmfit_classifier
    assert task_loader({"ulmfit": False}) is None
    assert task_loader({"kind": "classification"}) is None


def test_core_loads_the_ulmfit_loader_without_importing_ptm_classic_first() -> None:
    # A fresh process: `load_finetuned` (through task_loader) is the first to reach
    # ptm_classic, through the installed package's entry point, not through an import in core.
    code = (
        "import sys\n"
        "from ptm_core.finetune.recipe import load_finetuned\n"
        "from ptm_core.finetune.task_loaders import task_loader\n"
        "assert not [m for m in sys.modules if m.startswith('ptm_classic')], 'imported early'\n"
        "loader = task_loader({'ulmfit': True})\n"
        "print(loader.__module__, loader.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ptm_classic.recurrent.ulmfit", "load_ulmfit_classifier"]


def test_evaluations_of_the_recurrent_kinds_are_registered_by_ptm_classic() -> None:
    from ptm_core import model_kinds
    from ptm_core.evaluation import kinds as core_kinds
    from ptm_core.evaluation.registry import evaluation_for_kind

    assert not hasattr(core_kinds, "AWD_LSTM") and not hasattr(core_kinds, "ELMO")
    import ptm_classic.evaluation_kinds  # noqa: F401  (registers on import)

    assert evaluation_for_kind(model_kinds.AWD_LSTM).name == "awd_lstm"
    assert evaluation_for_kind(model_kinds.ELMO).name == "elmo"
