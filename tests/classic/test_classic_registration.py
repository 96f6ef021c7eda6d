"""ptm-classic plugs into core from above: ptm-core finds its pieces through the family specs
(the ``ptm.families`` entry point) without importing it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ptm_core.finetune.task_loaders import task_loader


def test_ulmfit_task_loader_is_found_through_the_awd_lstm_spec() -> None:
    from ptm_classic.recurrent.ulmfit import load_ulmfit_classifier
    from ptm_core.families import get

    assert dict(get("awd_lstm").task_loaders) == {
        "ulmfit": "ptm_classic.recurrent.ulmfit:load_ulmfit_classifier"
    }
    assert task_loader({"ulmfit": True, "kind": "classification"}) is load_ulmfit_classifier
    assert task_loader({"ulmfit": False}) is None
    assert task_loader({"kind": "classification"}) is None


def test_core_loads_the_ulmfit_loader_without_importing_ptm_classic_first() -> None:
    # A fresh process: `load_finetuned` (through task_loader) is the first to reach
    # ptm_classic's loader, through the installed package's spec; reading the specs imports
    # only the light ptm_classic.families (and the kind names), no model module.
    code = (
        "import sys\n"
        "from ptm_core.finetune.recipe import load_finetuned\n"
        "from ptm_core.finetune.task_loaders import task_loader\n"
        "from ptm_core.families import families\n"
        "families()\n"
        "early = [m for m in sys.modules if m.startswith('ptm_classic')]\n"
        "assert set(early) <= {'ptm_classic', 'ptm_classic.families', 'ptm_classic.kinds'}, early\n"
        "loader = task_loader({'ulmfit': True})\n"
        "print(loader.__module__, loader.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ptm_classic.recurrent.ulmfit", "load_ulmfit_classifier"]


def test_the_family_specs_are_light() -> None:
    # `ptm families` and read_model_kind read every spec before torch is loaded.
    code = (
        "import sys\n"
        "import ptm_classic, ptm_classic.families\n"
        "heavy = [m for m in ('torch', 'gensim', 'numpy', 'hydra') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr


def test_evaluations_of_the_recurrent_kinds_come_from_the_specs() -> None:
    from flows.evaluation import load_evaluations
    from ptm_classic import evaluation_kinds, kinds
    from ptm_core import model_kinds
    from ptm_core.evaluation import kinds as core_kinds
    from ptm_core.evaluation.registry import evaluation_for_kind
    from ptm_core.families import get

    assert not hasattr(core_kinds, "AWD_LSTM") and not hasattr(core_kinds, "ELMO")
    assert not hasattr(model_kinds, "AWD_LSTM") and not hasattr(model_kinds, "ELMO")
    assert get("awd_lstm").hook("evaluation") is evaluation_kinds.AWD_LSTM
    assert get("elmo").hook("evaluation") is evaluation_kinds.ELMO
    load_evaluations()
    assert evaluation_for_kind(kinds.AWD_LSTM).name == "awd_lstm"
    assert evaluation_for_kind(kinds.ELMO).name == "elmo"
    assert {kinds.AWD_LSTM, kinds.ELMO} <= model_kinds.known_kinds()


def test_an_awd_lstm_folder_names_its_family_with_or_without_ptm_model(tmp_path: Path) -> None:
    # `ptm finetune model=<folder>` picks ULMFiT's classifier from the folder, not by sniffing
    # in flows: the "ptm_model" kind, or (folders saved before it) the spec's `recognizes`.
    import json

    from flows.runner import family_of_folder
    from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel

    config = AWDLSTMConfig(vocab_size=20, embedding_size=8, hidden_size=8, num_layers=2)
    folder = AWDLSTMLanguageModel(config).save_pretrained(tmp_path / "final")
    assert family_of_folder(folder).name == "awd_lstm"
    path = folder / "config.json"
    written = json.loads(path.read_text())
    del written["ptm_model"]
    path.write_text(json.dumps(written))
    assert family_of_folder(folder).name == "awd_lstm"
