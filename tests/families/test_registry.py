"""The family registry, spec checks, and the runner's selection and typed settings."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from flows.config import ConfigError
from flows.runner import select, settings_of
from ptm_core.checkpoints import registry as checkpoints
from ptm_core.families import FamilySpec, registry
from ptm_core.model_kinds import read_model_kind, with_kind


@dataclass
class ToyData:
    corpus: str | None = None
    vocab_size: int = 8000
    langs: list[str] = field(default_factory=lambda: ["en"])


@dataclass
class ToySettings:
    data: ToyData = field(default_factory=ToyData)


def load_toy(path: Path, **options: object) -> str:
    return f"loaded {Path(path).name}"


def save_toy(model: object, path: Path, **options: object) -> None:
    Path(path).mkdir(parents=True, exist_ok=True)
    (Path(path) / "config.json").write_text(json.dumps(with_kind({}, "toy_kind")))


TOY = FamilySpec(
    name="toy",
    description="a family for the registry's tests",
    kinds=("toy_kind",),
    input_keys=("input_ids", "toy_ids"),
    settings=f"{__name__}:ToySettings",
    load={"toy_kind": f"{__name__}:load_toy"},
    save={"toy_kind": f"{__name__}:save_toy"},
    recipes={"toy_recipe": "pretrain", "toy_finetune": "finetune"},
)


@pytest.fixture
def toy() -> object:
    registry.register(TOY)
    yield TOY
    registry.unregister("toy")


def test_an_entry_point_names_a_spec_or_a_sequence_of_specs() -> None:
    module = types.ModuleType("ptm_toy_plugin")
    module.ONE = TOY  # type: ignore[attr-defined]
    module.MANY = (TOY,)  # type: ignore[attr-defined]
    module.WRONG = 3  # type: ignore[attr-defined]
    sys.modules["ptm_toy_plugin"] = module
    try:
        one = registry._specs_of(EntryPoint("toy", "ptm_toy_plugin:ONE", registry.GROUP))
        many = registry._specs_of(EntryPoint("toy", "ptm_toy_plugin:MANY", registry.GROUP))
        assert [s.name for s in one] == [s.name for s in many] == ["toy"]
        assert one[0].package == "ptm_toy_plugin"  # no distribution: the module's top
        with pytest.raises(TypeError, match="must name a FamilySpec"):
            registry._specs_of(EntryPoint("toy", "ptm_toy_plugin:WRONG", registry.GROUP))
    finally:
        del sys.modules["ptm_toy_plugin"]


def test_a_broken_plugin_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    point = EntryPoint("gone", "ptm_no_such_module_anywhere:SPEC", registry.GROUP)
    assert registry._specs_of(point) == []
    assert "does not load" in caplog.text


def test_lookups_by_name_kind_and_recipe(toy: FamilySpec) -> None:
    assert registry.get("toy") is toy
    assert registry.for_kind("toy_kind") is toy
    assert registry.for_recipe("toy_finetune") == (toy, "finetune")
    assert "toy_kind" in registry.known_kinds()
    with pytest.raises(registry.UnknownFamilyError, match="did you mean 'toy'"):
        registry.get("tyo")
    with pytest.raises(registry.UnknownFamilyError, match="is the package that saved it"):
        registry.for_kind("no_such_kind")


def test_a_kind_belongs_to_one_family(toy: FamilySpec) -> None:
    other = FamilySpec(name="other_toy", description="", kinds=("toy_kind",))
    with pytest.raises(ValueError, match="claimed by families 'toy' and 'other_toy'"):
        registry.register(other)
    assert "other_toy" not in registry.families()


def test_a_spec_checks_its_hooks_when_written() -> None:
    with pytest.raises(ValueError, match=r"'no colon' is not a 'package\.module:attribute'"):
        FamilySpec(name="bad", description="", plan_pretraining="no colon")
    with pytest.raises(ValueError, match="not in its kinds"):
        FamilySpec(name="bad", description="", load={"elsewhere": "m:f"})
    with pytest.raises(ValueError, match=r"plan_pretraining .* or pretrain .*, not both"):
        FamilySpec(name="bad", description="", plan_pretraining="m:plan", pretrain="m:train")
    with pytest.raises(ValueError, match="identifier"):
        FamilySpec(name="not-a-name", description="")
    with pytest.raises(LookupError, match="family 'toy' has no finetune hook"):
        TOY.hook("finetune")


def test_a_registered_kind_is_known_to_folders_and_checkpoints(
    toy: FamilySpec, tmp_path: Path
) -> None:
    checkpoints.save("toy_kind", object(), tmp_path / "saved")
    assert read_model_kind(tmp_path / "saved") == "toy_kind"
    assert checkpoints.load("toy_kind", tmp_path / "saved") == "loaded saved"
    registry.unregister("toy")
    with pytest.raises(ValueError, match=r"unknown 'ptm_model' 'toy_kind'.*installed"):
        read_model_kind(tmp_path / "saved")


def test_select_by_family_recipe_and_the_folders_kind(toy: FamilySpec, tmp_path: Path) -> None:
    assert select(OmegaConf.create({"family": "toy"})) == (toy, "pretrain")
    assert select(OmegaConf.create({"recipe": "toy_finetune"})) == (toy, "finetune")
    with pytest.raises(ConfigError, match="unknown family 'toi'; did you mean 'toy'"):
        select(OmegaConf.create({"family": "toi"}))
    with pytest.raises(ConfigError, match="stage=train"):
        select(OmegaConf.create({"family": "toy", "stage": "train"}))
    # The folder names its family: a fine-tune of a toy folder is the toy family's.
    checkpoints.save("toy_kind", object(), tmp_path / "final")
    other = FamilySpec(name="other_toy", description="", recipes={"other_ft": "finetune"})
    registry.register(other)
    try:
        cfg = {"recipe": "other_ft", "init_from": str(tmp_path / "final")}
        assert select(OmegaConf.create(cfg)) == (toy, "finetune")
        with pytest.raises(ConfigError, match="is a toy model but family=other_toy"):
            select(OmegaConf.create({**cfg, "family": "other_toy", "stage": "finetune"}))
    finally:
        registry.unregister("other_toy")


def test_typed_settings_write_each_default_once_and_refuse_bad_keys(toy: FamilySpec) -> None:
    settings = settings_of(toy, OmegaConf.create({"data": {"vocab_size": "300"}}))
    assert settings == ToySettings(data=ToyData(vocab_size=300))
    with pytest.raises(ConfigError, match=r"'data.vocab_sise'; did you mean data.vocab_size\?"):
        settings_of(toy, OmegaConf.create({"data": {"vocab_sise": 3}}))
    with pytest.raises(ConfigError, match=r"data.vocab_size: Value 'abc'"):
        settings_of(toy, OmegaConf.create({"data": {"vocab_size": "abc"}}))


def test_ptm_families_lists_each_family_with_its_stages_and_kinds(toy: FamilySpec) -> None:
    from flows.runner import families_table

    lines = families_table().splitlines()
    assert lines[0].split()[:4] == ["family", "stages", "kinds", "package"]
    (row,) = [line for line in lines if line.startswith("toy ")]
    assert row.split()[:3] == ["toy", "-", "toy_kind"]
    assert row.endswith("a family for the registry's tests")


def claims_everything(path: Path) -> bool:
    return True


def test_an_extensions_family_recognises_old_folders_before_cores(tmp_path: Path) -> None:
    """A folder without "ptm_model" that core's encoder family and an extension's family
    both claim (an old ERNIE-THU final/ has an encoder's files) is the extension's."""
    hook = f"{__name__}:claims_everything"
    core = FamilySpec(name="toy_core", description="", recognizes=hook, package="ptm-core")
    ext = FamilySpec(name="toy_ext", description="", recognizes=hook, package="ptm-toy")
    other = FamilySpec(name="toy_other", description="", recognizes=hook, package="ptm-other")
    registry.register(core)
    registry.register(ext)
    try:
        assert registry.recognizing(tmp_path).name == "toy_ext"
        registry.register(other)
        with pytest.raises(ValueError, match="families toy_ext, toy_other all recognise"):
            registry.recognizing(tmp_path)
    finally:
        for name in ("toy_core", "toy_ext", "toy_other"):
            registry.unregister(name)


def test_export_goes_through_the_folders_family(toy: FamilySpec, tmp_path: Path) -> None:
    from flows.export import exporter
    from ptm_core.checkpoints import CheckpointError
    from ptm_core.checkpoints.hf.export import export_hf

    checkpoints.save("toy_kind", object(), tmp_path / "final")
    with pytest.raises(CheckpointError, match=r"a toy model has no Hugging Face .* encoder"):
        exporter(tmp_path / "final")
    (tmp_path / "stranger").mkdir()
    assert exporter(tmp_path / "stranger") is export_hf  # its refusal names what it is
