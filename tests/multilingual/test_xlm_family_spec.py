"""The xlm family's spec: typed settings from the presets, one-line errors, a light spec,
old folders recognised."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from flows.config import ConfigError, compose_config
from flows.runner import select, settings_of
from ptm_multilingual.families import XLM, recognizes_xlm
from ptm_multilingual.settings import XLMData, XLMSettings


def test_the_presets_select_xlm_and_fill_its_typed_settings() -> None:
    cfg = compose_config(["experiment=xlm_tlm_tiny"])
    spec, stage = select(cfg)
    assert (spec.name, stage, spec.package) == ("xlm", "pretrain", "ptm-multilingual")
    settings = settings_of(XLM, cfg)
    assert isinstance(settings, XLMSettings)
    assert settings.data.vocab_size == 1000  # the sample preset's, not the default
    assert settings.data.directions == ["en-fr", "fr-en", "en-de", "de-en", "de-fr", "fr-de"]
    assert settings.data.prepared is None
    zero_shot = compose_config(["experiment=xlm_zero_shot"])
    assert (select(zero_shot)[0].name, select(zero_shot)[1]) == ("xlm", "finetune")
    finetune = settings_of(XLM, zero_shot).xlm_finetune
    assert (finetune.train_lang, finetune.max_length, sorted(finetune.dev)) == (
        "en",
        48,
        ["de", "en", "fr"],
    )
    assert settings_of(XLM, zero_shot).experiment_name == "xlm_zero_shot"


def test_a_value_of_the_wrong_type_is_one_line_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"data\.batch_size") as composed:
        compose_config(["experiment=xlm_tlm_tiny", "data.batch_size=many"])
    # A config that reached the runner another way (a hand-written preset) is typed there.
    cfg = compose_config(["experiment=xlm_tlm_tiny"])
    OmegaConf.update(cfg, "data.batch_size", "many")
    with pytest.raises(ConfigError, match=r"^data\.batch_size: ") as typed:
        settings_of(XLM, cfg)
    assert "\n" not in str(composed.value) + str(typed.value)


def test_defaults_are_the_dataclass_s() -> None:
    # A data preset that sets only the corpora gets every other value from XLMData.
    assert XLMData(corpus="c").batch_size == XLMData().batch_size == 32


def test_listing_families_loads_no_torch() -> None:
    code = (
        "import sys\n"
        "from ptm_core.families import families\n"
        "assert 'xlm' in families(), families()\n"
        "from ptm_core.model_kinds import known_kinds\n"
        "assert 'xlm' in known_kinds()\n"
        "assert 'torch' not in sys.modules, 'listing families imported torch'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_folder_saved_before_ptm_model_is_recognised_as_xlm(tmp_path: Path) -> None:
    from flows.runner import family_of_folder
    from ptm_multilingual.model import XLMEncoder, xlm_text_encoder

    final = tmp_path / "final"
    text = xlm_text_encoder(vocab_size=30, hidden_size=8, num_layers=1, num_heads=2)
    XLMEncoder(text, ["en", "fr"]).save_pretrained(final)
    family = family_of_folder(final)
    assert family is not None and family.name == "xlm"
    config = json.loads((final / "config.json").read_text())
    config.pop("ptm_model")
    (final / "config.json").write_text(json.dumps(config))
    family = family_of_folder(final)
    assert family is not None and family.name == "xlm"
    assert XLMEncoder.from_pretrained(final).languages == ["en", "fr"]
    config["ptm_format"] = "ptm-encoder-1"  # another family's folder is not claimed
    (final / "config.json").write_text(json.dumps(config))
    assert not recognizes_xlm(final)
