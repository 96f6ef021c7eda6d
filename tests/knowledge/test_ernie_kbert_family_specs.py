"""The ERNIE, K-BERT and KG-embedding specs: light modules, typed settings with one-line
errors, old folders recognised, and ERNIE-THU checkpoints laid out as before the spec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flows.config import ConfigError, compose_config
from flows.runner import family_of_folder, select, settings_of
from ptm_core.families import get


def test_spec_modules_import_no_torch() -> None:
    code = (
        "import sys, ptm_knowledge.family_ernie, ptm_knowledge.family_kbert, "
        "ptm_knowledge.family_kg; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("experiment", "family", "stage"),
    [
        ("ernie_baidu_tiny", "ernie_baidu", "pretrain"),
        ("ernie_thu_tiny", "ernie_thu", "pretrain"),
        ("ernie_thu_finetune_tiny", "ernie_thu", "finetune"),
        ("kbert_tiny_cls", "kbert", "finetune"),
        ("kbert_entity_typing_tiny", "kbert", "finetune"),
    ],
)
def test_presets_select_their_family_and_build_typed_settings(
    experiment: str, family: str, stage: str
) -> None:
    cfg = compose_config([f"experiment={experiment}"])
    spec, chosen = select(cfg)
    assert (spec.name, chosen) == (family, stage)
    assert settings_of(spec, cfg) is not None


def test_a_misspelt_knowledge_key_is_one_line_with_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        cfg = compose_config(["experiment=ernie_thu_tiny", "+knowledge.num_knowlege_layers=2"])
        settings_of(get("ernie_thu"), cfg)
    message = str(caught.value)
    assert "\n" not in message
    assert "knowledge.num_knowlege_layers" in message and "num_knowledge_layers" in message


def test_a_wrong_type_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"kbert\.max_entities"):
        cfg = compose_config(["experiment=kbert_tiny_cls", "kbert.max_entities=many"])
        settings_of(get("kbert"), cfg)


def test_an_ernie_thu_folder_without_its_kind_is_recognised(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (tmp_path / "knowledge_config.json").write_text("{}")
    spec = family_of_folder(tmp_path)
    assert spec is not None and spec.name == "ernie_thu"


def test_pretraining_checkpoints_keep_the_layout_of_before_the_spec() -> None:
    """State-dict keys and config.json of a training checkpoint are those the deleted
    ErnieThuPretrainingModel wrote (encoder.*, objectives.*; knowledge layers, entities)."""
    from ptm_core.encoders import bert_encoder
    from ptm_core.models.pretraining import PretrainingModel
    from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.tokenization import VocabInfo
    from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

    text = bert_encoder(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2)
    encoder = KnowledgeableEncoder.from_text_encoder(text, torch.randn(7, 8), 1)
    vocab = VocabInfo(pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4, vocab_size=50)
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, vocab),
            "dea": build_objective(DenoisingEntityAutoencoderObjective, encoder, vocab),
        }
    )
    model = PretrainingModel(encoder, mix, input_keys=get("ernie_thu").input_keys)
    assert {k.split(".")[0] for k in model.state_dict()} == {"encoder", "objectives"}
    config = model.checkpoint_config()
    assert list(config) == ["encoder", "knowledge_layers", "num_entities", "objectives"]
    assert (config["knowledge_layers"], config["num_entities"]) == (1, 7)
    assert "entity_ids" in get("ernie_thu").input_keys


def test_a_bad_kbert_switch_is_one_line(tmp_path: Path) -> None:
    from ptm_core.families.runner import FinetuneRun
    from ptm_core.training import TrainerConfig
    from ptm_knowledge.family_kbert import KBertData, KBertOptions, KBertSettings
    from ptm_knowledge.kbert.family_hooks import finetune

    settings = KBertSettings(
        data=KBertData(corpus="a.tsv", dev="b.tsv", kg="kg"), kbert=KBertOptions(kg="some")
    )
    run = FinetuneRun(settings=settings, trainer=TrainerConfig(output_dir=str(tmp_path)), seed=0)
    with pytest.raises(ValueError, match=r"^kbert.kg=some: must be full or none$"):
        finetune(run)
