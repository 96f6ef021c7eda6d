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


@pytest.fixture(scope="module")
def bart_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 'pre-trained' tiny BART-layout folder with its tokenizer (what `ptm pretrain
    experiment=bart_tiny` leaves, in ptm format)."""
    from ptm_core.encoders import build_encoder_decoder

    path = tmp_path_factory.mktemp("bart") / "final"
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    vocab = tokenizer.vocab_info
    torch.manual_seed(0)
    model = build_encoder_decoder(
        tokenizer.vocab_size, hidden_size=32, encoder_layers=1, decoder_layers=1, num_heads=2,
        intermediate_size=48, max_positions=96, pad_token_id=vocab.pad_id,
        bos_token_id=vocab.cls_id, eos_token_id=vocab.sep_id,
        decoder_start_token_id=vocab.cls_id,
    )  # fmt: skip
    model.save_pretrained(path)
    tokenizer.save(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_prompt_and_prefix_on_bart_train_save_reload_evaluate_and_predict(
    bart_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    out = tmp_path / "ft"
    code = main(
        [
            "finetune",
            "task=kg_pair",
            f"model={bart_base}",
            f"finetune.peft={method}",
            "finetune.peft_virtual_tokens=8",
            "trainer.max_steps=3",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"({method})" in captured.err  # the run log's trainable-parameter line
    final = out / "final"
    assert (final / "adapter.safetensors").is_file()
    assert not (final / "model.safetensors").exists()  # the base is not copied
    assert main(["evaluate", str(final)]) == 0
    capsys.readouterr()  # stdout, or Prefect's log where an earlier test left an API URL set
    assert "accuracy" in (out / "evaluation-final.md").read_text()
    rows = REPO / "data_specs/glue_classification/dev.tsv"
    predictions = tmp_path / "dev.predictions.jsonl"
    assert main(["predict", str(final), str(rows), "--output", str(predictions)]) == 0
    assert len(predictions.read_text().splitlines()) == 68
    assert main(["export", "--format", "hf", str(final), str(tmp_path / "hf")]) == 1
    assert f"finetune.peft={method} model has no Hugging Face" in capsys.readouterr().err
