"""Typed config schemas (#32 item 3): structured dataclasses in Hydra's ConfigStore.

A family's typed settings type its blocks (``data``) at compose time with the same one-line
errors as the YAML-key schema they replace; targets are merged into their dataclass or one
made from the builder's signature; values OmegaConf would convert are refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from flows.cli import main
from flows.config import ConfigError, compose_config, config_dir
from flows.config_schema import _omegaconf_type, target_schema, typed
from ptm_core.families import FamilySpec, registry
from ptm_core.model_kinds import with_kind
from ptm_core.training import TrainerConfig


@dataclass
class SchemaData:
    """Every key of configs/data/sample_corpus.yaml, plus ``langs`` that it does not set."""

    corpus: str | None = None
    prepared: str | None = None
    cache_dir: str | None = None
    tokenizer: str | None = None
    vocab_size: int = 4000
    lowercase: bool = True
    max_length: int = 128
    batch_size: int = 16
    pack: bool = False
    num_workers: int = 0
    langs: list[str] = field(default_factory=lambda: ["en"])

    def __post_init__(self) -> None:
        if self.vocab_size < 10:
            raise ValueError(f"vocab_size must be >= 10, got {self.vocab_size}")


@dataclass
class SchemaSettings:
    data: SchemaData = field(default_factory=SchemaData)
    init_embeddings: str | None = None  # a key at the root of config.yaml


TYPED = FamilySpec(
    name="typed_toy",
    description="a family with typed settings, for the config schema tests",
    settings=f"{__name__}:SchemaSettings",
)


@pytest.fixture
def typed_family() -> Iterator[FamilySpec]:
    registry.register(TYPED)
    yield TYPED
    registry.unregister(TYPED.name)


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as caught:
        compose_config(overrides)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.usefixtures("typed_family")
def test_the_familys_settings_type_its_blocks() -> None:
    valid = ", ".join(sorted(f.name for f in fields(SchemaData)))
    assert _error(["family=typed_toy", "data.vocab_sise=3"]) == (
        f"unknown key data.vocab_sise: did you mean data.vocab_size? valid keys of data: {valid}"
    )
    assert _error(["family=typed_toy", "data.langs=en"]) == (
        "bad config at data.langs: expected list[str], got 'en' (str); set data.langs=<list[str]>"
    )
    assert _error(["family=typed_toy", "data.pack=1"]) == (
        "bad config at data.pack: expected bool, got 1 (int); set data.pack=<bool>"
    )
    assert _error(["family=typed_toy", "data.batch_size=-2"]) == (
        "bad config at data.batch_size: expected a non-negative int (like the default 16), "
        "got -2; set data.batch_size=<int >= 0>"
    )
    assert _error(["family=typed_toy", "init_embeddings=[1]"]) == (
        "bad config at init_embeddings: expected str | null, got [1] (list); "
        "set init_embeddings=<str | null>"
    )
    # The dataclass's own checks run at compose time too.
    assert _error(["family=typed_toy", "data.vocab_size=3"]) == (
        "bad config at data: vocab_size must be >= 10, got 3"
    )


@pytest.mark.usefixtures("typed_family")
def test_a_settings_field_the_yaml_lacks_needs_no_plus() -> None:
    cfg = compose_config(["family=typed_toy", "data.langs=[en,fr]"])
    assert list(cfg.data.langs) == ["en", "fr"]
    # Without the family, data keeps its YAML keys: langs is unknown there.
    assert _error(["data.langs=[en,fr]"]).startswith("unknown key data.langs: valid keys of data")


def test_a_yaml_typo_is_caught_by_the_settings_too(
    typed_family: FamilySpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    for entry in config_dir().iterdir():
        (configs / entry.name).symlink_to(entry)
    (configs / "data_typo.yaml").write_text(
        "defaults:\n  - config\n  - _self_\nfamily: typed_toy\ndata:\n  batch_sise: 4\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PTM_CONFIG_DIR", str(configs))
    with pytest.raises(ConfigError, match=r"^unknown key data\.batch_sise: did you mean data\.ba"):
        compose_config(config_name="data_typo")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        # OmegaConf would read these as numbers or bools; the config passes values on as
        # written, so they are refused as before.
        ("model.dropout='0.1'", "expected float (bert_encoder), got '0.1' (str)"),
        ("model.num_layers='2'", "expected int (bert_encoder), got '2' (str)"),
        (
            "objective.objectives.mlm.masked_only=1",
            "expected bool (MaskedLMObjective), got 1 (int)",
        ),
        ("model.norm_position=mid", "expected 'post' | 'pre' (bert_encoder), got 'mid' (str)"),
    ],
)
def test_what_omegaconf_would_convert_is_refused(override: str, expected: str) -> None:
    assert expected in _error(["experiment=bert_tiny", override])


def test_builder_schemas_are_structured_dataclasses_in_the_config_store() -> None:
    schema = target_schema("ptm_core.encoders.bert_encoder")
    assert schema.owner == "bert_encoder"
    node = OmegaConf.structured(schema.structured)
    assert node.hidden_size == 768 and OmegaConf.get_type(node, "norm_position") is str
    stored = ConfigStore.instance().load("schema/target/ptm_core.encoders.bert_encoder.yaml")
    assert stored.node.hidden_size == 768
    assert target_schema("ptm_core.training.TrainerConfig").structured is TrainerConfig


def test_trainer_and_family_schemas_compose_from_the_store(typed_family: FamilySpec) -> None:
    compose_config(["family=typed_toy"])  # stores the selected family's settings
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        trainer = compose(config_name="schema/trainer")
        family = compose(config_name="schema/family/typed_toy")
    # Hydra packages a group's config under the group's name (``@trainer`` in a defaults
    # list puts it elsewhere).
    assert trainer.schema.max_steps == TrainerConfig(output_dir="x").max_steps
    assert OmegaConf.get_type(trainer.schema) is TrainerConfig
    assert family.schema.family.data.langs == ["en"]
    assert family.schema.family.data.vocab_size == 4000


class _Module:
    """Stands for a class OmegaConf cannot type (a tokenizer, a module)."""


@pytest.mark.parametrize(
    ("hint", "mapped"),
    [
        (int, int),
        (Sequence[int] | None, typing.Optional[list[int]]),  # noqa: UP045
        (Sequence[Sequence[int]], list[list[int]]),
        (tuple[float, float], list[float]),
        (Mapping[str, float] | None, typing.Optional[dict[str, float]]),  # noqa: UP045
        (Literal["post", "pre"], str),
        (str | os.PathLike[str] | None, typing.Optional[str]),  # noqa: UP045
        (bool | str, typing.Union[bool, str]),  # noqa: UP007
        (_Module | str | None, Any),
        (_Module, Any),
    ],
)
def test_hints_map_to_what_omegaconf_holds(hint: Any, mapped: Any) -> None:
    assert _omegaconf_type(hint) == mapped


def test_config_schema_prints_the_trainer_and_the_familys_settings(
    typed_family: FamilySpec, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "--schema", "family=typed_toy"]) == 0
    printed = capsys.readouterr().out
    assert "# schema/trainer (TrainerConfig)" in printed
    assert "# schema/family/typed_toy (SchemaSettings)" in printed
    assert "  langs:\n  - en" in printed
    assert main(["config", "--schema", "family=typed_toy", "data.vocab_sise=3"]) == 2
    assert "did you mean data.vocab_size?" in capsys.readouterr().err


def test_a_typed_trainer_node_reads_the_dataclass_defaults() -> None:
    node = OmegaConf.create({"_target_": "ptm_core.training.TrainerConfig", "output_dir": "x"})
    trainer = typed(node)
    assert trainer.devices == TrainerConfig(output_dir="x").devices
    assert typed(compose_config(["trainer.devices=2"]).trainer).devices == 2


def test_a_folder_no_family_claims_keeps_the_yaml_schema(
    typed_family: FamilySpec, tmp_path: Path
) -> None:
    # init_from's kind names the family to fine-tune; a kind no registered family claims
    # yet (a legacy one) leaves the config to the YAML schema instead of failing here.
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(with_kind({}, "encoder")), encoding="utf-8")
    spec = dataclasses.replace(typed_family, recipes={"typed_recipe": "finetune"})
    registry.unregister(typed_family.name)
    registry.register(spec)
    cfg = compose_config(["recipe=typed_recipe", f"init_from={folder}"])
    assert cfg.init_from == str(folder)
