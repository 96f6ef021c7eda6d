"""A family with its own fine-tuning loop refuses the generic ``finetune.*`` keys it does not
read (KnowBERT, SentiLARE): ``finetune.peft=lora`` must not quietly train every weight."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptm_core.families.core_settings import FinetuneOptions, refuse_unread_finetune_options
from ptm_core.families.runner import FinetuneRun
from ptm_knowledge.family_knowbert import KnowBertSettings
from ptm_knowledge.knowbert.family_hooks import finetune as knowbert_finetune


def test_defaults_and_read_keys_pass() -> None:
    refuse_unread_finetune_options(FinetuneOptions(), "X", ())
    refuse_unread_finetune_options(
        FinetuneOptions(dropout=0.3, peft="lora"), "X", ("dropout", "peft")
    )


@pytest.mark.parametrize(
    "options, key",
    [
        (FinetuneOptions(peft="lora"), "finetune.peft=lora"),
        (FinetuneOptions(text_to_text=True), "finetune.text_to_text=True"),
        (FinetuneOptions(kg="my_kg"), "finetune.kg=my_kg"),
    ],
)
def test_an_unread_key_is_one_line_naming_it_and_what_is_read(
    options: FinetuneOptions, key: str
) -> None:
    with pytest.raises(ValueError, match="not supported for a X model") as err:
        refuse_unread_finetune_options(options, "X", ("dropout",), "use Y")
    message = str(err.value)
    assert message.startswith(key) and "reads finetune.dropout" in message
    assert message.endswith("use Y") and "\n" not in message


def test_knowbert_refuses_peft_before_loading_anything(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "knowbert_config.json").write_text("{}")
    settings = KnowBertSettings(finetune=FinetuneOptions(peft="lora"))
    run = FinetuneRun(settings=settings, trainer=None, seed=0, init_from=str(folder))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^finetune.peft=lora is not supported for a KnowBERT"):
        knowbert_finetune(run)
