"""KEPLER, WKLM and CogQA as family specs: light spec modules, typed settings with one-line
errors, KEPLER's fixed split, and CogQA folders saved before they named their kind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from knowledge_sample_paths import KG_DIR

from flows.config import ConfigError, compose_config
from flows.runner import family_of_folder, select, settings_of
from ptm_core.families import get
from ptm_core.model_kinds import read_model_kind
from ptm_knowledge.family_kepler import KeplerOptions
from ptm_knowledge.kg import KGError
from ptm_knowledge.linking import DEFAULT_THRESHOLD


def test_spec_modules_import_without_torch() -> None:
    code = (
        "import sys\n"
        "import ptm_knowledge.family_kepler, ptm_knowledge.family_wklm\n"
        "import ptm_knowledge.family_cogqa, ptm_knowledge.evaluation_kinds\n"
        "from ptm_core.families import families\n"
        "assert {'kepler', 'wklm', 'cogqa'} <= set(families())\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'spacy'))\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("experiment", "family", "stage"),
    [("kepler_tiny", "kepler", "pretrain"), ("wklm_tiny", "wklm", "pretrain"),
     ("cogqa_tiny", "cogqa", "finetune")],
)  # fmt: skip
def test_presets_select_their_family_and_build_typed_settings(
    experiment: str, family: str, stage: str
) -> None:
    cfg = compose_config([f"experiment={experiment}"])
    spec, chosen = select(cfg)
    assert (spec.name, chosen) == (family, stage)
    settings = settings_of(spec, cfg)
    assert settings.data.kg is not None  # every block of the preset became a typed field
    if family == "kepler":
        assert (
            settings.kepler.num_negatives == 2
            and settings.data.linker.threshold == DEFAULT_THRESHOLD
        )
    if family == "cogqa":
        assert settings.cogqa.reader.top_k == 2 and settings.cogqa.num_threads == 1


def test_a_misspelt_key_is_one_line_with_a_did_you_mean() -> None:
    with pytest.raises(ConfigError) as err:
        settings_of(get("kepler"), compose_config(["experiment=kepler_tiny", "kepler.ke_wieght=2"]))
    message = str(err.value)
    assert "kepler.ke_wieght" in message and "did you mean kepler.ke_weight" in message
    assert "train_triples" in message  # the typed settings' keys are the valid ones
    assert "\n" not in message


def test_a_value_of_the_wrong_type_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"wklm\.dynamic"):
        settings_of(get("wklm"), compose_config(["experiment=wklm_tiny", "wklm.dynamic=often"]))


def _write_triples(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_kepler_fixed_split_reads_the_graphs_ids_and_relations(tmp_path: Path) -> None:
    from ptm_knowledge.kepler import fixed_split, load_description_graph, triple_array

    graph = load_description_graph(KG_DIR)
    lines = [
        line
        for line in (KG_DIR / "triples.tsv").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    train_file = _write_triples(tmp_path / "train.tsv", lines[5:])
    test_file = _write_triples(tmp_path / "test.tsv", lines[:5])
    train, test = fixed_split(graph, train_file, test_file)
    everything = triple_array(graph)
    assert np.array_equal(np.concatenate([test, train]), everything)
    bad = _write_triples(tmp_path / "bad.tsv", [lines[0].rsplit("\t", 2)[0] + "\tno_rel\twarsaw"])
    with pytest.raises(KGError, match=rf"{bad}: relation 'no_rel' is not in"):
        fixed_split(graph, train_file, bad)


def test_kepler_fixed_split_needs_both_files(tmp_path: Path) -> None:
    from ptm_knowledge.kepler.descriptions import load_description_graph
    from ptm_knowledge.kepler.pretraining import _split

    options = KeplerOptions(test_triples=str(tmp_path / "test.tsv"))
    with pytest.raises(ValueError, match=r"kepler\.train_triples and kepler\.test_triples"):
        _split(load_description_graph(KG_DIR), options, 0)


@pytest.fixture
def saved_cogqa(tmp_path: Path, sample_kg) -> Path:
    from ptm_knowledge.cogqa import (
        CogQAReader,
        CogQAReasoner,
        CogQASystem,
        ReaderConfig,
        build_vocab,
        generate_bridge_questions,
        save_cogqa,
    )

    questions = generate_bridge_questions(sample_kg, num_questions=4, seed=0)
    reader = CogQAReader(
        build_vocab(questions),
        ReaderConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32),
    )
    return save_cogqa(CogQASystem(reader, CogQAReasoner(16, 8, 1)), tmp_path / "final")


def test_a_saved_cogqa_system_names_its_kind(saved_cogqa: Path) -> None:
    from ptm_core.checkpoints import registry

    assert read_model_kind(saved_cogqa) == "cogqa"
    family = family_of_folder(saved_cogqa)
    assert family is not None and family.name == "cogqa"
    system = registry.load("cogqa", saved_cogqa)
    assert any(k.startswith("reasoner.") for k in system.state_dict())


def test_a_cogqa_folder_saved_before_the_kind_still_loads_and_scores(saved_cogqa: Path) -> None:
    from flows.evaluation import model_family
    from ptm_knowledge.cogqa import load_cogqa

    (saved_cogqa / "config.json").unlink()  # the layout written before "ptm_model"
    assert read_model_kind(saved_cogqa) is None
    family = family_of_folder(saved_cogqa)
    assert family is not None and family.name == "cogqa"
    assert model_family(saved_cogqa) == "cogqa"
    settings = json.loads((saved_cogqa / "cogqa.json").read_text())
    assert load_cogqa(saved_cogqa).max_depth == settings["max_depth"]
