"""`ptm finetune ... finetune.peft=...`: the end table shows what trains, `ptm export`
merges or keeps the adapter, and bad settings are one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_core.encoders.presets import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pre") / "final"
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=1, num_heads=2,
        intermediate_size=48,
    )  # fmt: skip
    encoder.save_pretrained(path, tokenizer=tokenizer)
    return path


def test_lora_run_end_table_and_both_exports(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ft"
    code = main(
        [
            "finetune",
            "task=kg_pair",
            f"model={base}",
            "finetune.peft=lora",
            "finetune.peft_r=4",
            "trainer.max_steps=3",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "parameters/trainable_share" in captured.out  # the end table
    assert "trainable parameters" in captured.err  # the run log
    assert not (out / "final" / "model.safetensors").exists()
    assert main(["export", "--format", "hf", str(out / "final"), str(tmp_path / "merged")]) == 0
    assert (tmp_path / "merged" / "model.safetensors").is_file()
    assert not (tmp_path / "merged" / "adapter").exists()
    adapter = tmp_path / "adapter"
    assert (
        main(["export", "--format", "hf", str(out / "final"), str(adapter), "--peft-adapter"]) == 0
    )
    assert (adapter / "adapter" / "adapter_config.json").is_file()
    assert "PeftModel.from_pretrained" in capsys.readouterr().out


def test_bad_peft_settings_are_one_line(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["finetune", "task=kg_pair", "trainer.max_steps=1", f"trainer.output_dir={tmp_path}"]
    assert main([*common, f"model={base}", "finetune.peft=lorra"]) == 1
    assert (
        "unknown method 'lorra'; valid: none, lora, ia3, prompt, prefix" in capsys.readouterr().err
    )
    assert main([*common, "model=bert_tiny", "finetune.peft=lora"]) == 1
    assert "give model=<a final/ or Hugging Face folder>" in capsys.readouterr().err
    assert (
        main([*common, f"model={base}", "finetune.peft=lora", "finetune.peft_target_modules=[qkv]"])
        == 1
    )
    assert "qkv name no nn.Linear of this encoder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("family", "own"),
    [
        ("kbert", "kbert"),
        ("xlm", "xlm_finetune"),
        ("visualbert", "multimodal_finetune"),
        ("vilbert", "multimodal_finetune"),
    ],
)
def test_families_without_an_adapter_refuse_peft_in_one_line(family: str, own: str) -> None:
    """A family whose settings have no ``finetune`` block would drop ``finetune.peft`` and
    fine-tune every weight: the runner refuses it instead."""
    from omegaconf import OmegaConf

    from flows.config_errors import ConfigError
    from flows.runner import finetune
    from ptm_core.families import registry

    spec = registry.get(family)
    cfg = OmegaConf.create({"finetune": {"peft": "lora"}, "init_from": "runs/x/final", "seed": 0})
    with pytest.raises(
        ConfigError, match=rf"finetune.peft=lora is not supported for a {family} "
    ) as exc:
        finetune(spec, cfg)
    # ... and says where the family takes its adapter instead.
    assert f"takes its adapter as {own}.peft=<method>" in str(exc.value)
    assert "\n" not in str(exc.value)
