"""ERNIE-THU fine-tuning links task text with the one ``data.linker`` object."""

from __future__ import annotations

from flows.config import compose_config
from flows.runner import settings_of
from ptm_knowledge.family_ernie import ERNIE_THU


def test_fine_tuning_linker_is_the_data_linker() -> None:
    overrides = ["experiment=ernie_thu_finetune_tiny", "data.linker.guard=none"]
    settings = settings_of(ERNIE_THU, compose_config([*overrides, "data.linker.threshold=0.9"]))
    assert settings.ernie_finetune.linker == settings.data.linker
    assert settings.ernie_finetune.linker.guard == "none"
    assert settings.ernie_finetune.linker.threshold == 0.9
