"""LXMERT's contract case: generated scenes (pairs + region features), not the samples."""

from __future__ import annotations

from pathlib import Path

from family_contract import FamilyContract
from generated_image_text import finetune_overrides, pretrain_overrides

FAMILY = "lxmert"


class TestLXMERTContract(FamilyContract):
    family = FAMILY
    finetune_config = "config"  # image-text fine-tunes compose from config.yaml

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        return pretrain_overrides("lxmert_tiny", tmp_path)

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(tmp_path / "pretrain" / "data" / "eval")

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return finetune_overrides("lxmert_vqa_tiny", tmp_path, final_dir)
