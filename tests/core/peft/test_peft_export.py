"""``ptm export --format hf`` of a LoRA run: merged into the weights (transformers alone
gives ptm's logits), or as a peft adapter folder that ``PeftModel.from_pretrained`` loads
onto the exported base model (the same logits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertForSequenceClassification

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import export_hf
from ptm_core.encoders.presets import bert_encoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.recipe import finetune, load_finetuned
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

peft = pytest.importorskip("peft")

REPO = Path(__file__).resolve().parents[3]
TASK = TaskSpec(
    name="sentiment",
    kind="classification",
    train=str(REPO / "data_specs/glue_classification/single_train.tsv"),
    dev=str(REPO / "data_specs/glue_classification/single_dev.tsv"),
    max_length=32,
)


def trained(tmp_path: Path, method: str) -> Path:
    base = tmp_path / "base"
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=36, num_layers=2, num_heads=4,
        intermediate_size=50,
    )  # fmt: skip
    encoder.save_pretrained(base, tokenizer=tokenizer)
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"), max_steps=4, progress=False, device="cpu",
        learning_rate=5e-3,
    )  # fmt: skip
    result = finetune(
        TASK,
        encoder=TransformerEncoder.from_pretrained(base),
        tokenizer=tokenizer,
        trainer=trainer,
        peft=PeftConfig(method=method, r=4, alpha=8.0),
        base=base,
    )
    # Four steps move an adapter little; make it matter, so a wrong name or layout shows.
    path = result.encoder_dir / "adapter.safetensors"
    if path.exists():
        generator = torch.Generator().manual_seed(1)
        state = load_file(str(path))
        noisy = {k: v + torch.randn(v.shape, generator=generator) for k, v in state.items()}
        save_file(noisy, str(path))
    return result.encoder_dir


def inputs() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[2, 15, 27, 31, 3, 0], [2, 40, 41, 42, 43, 3]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def ptm_logits(final: Path) -> torch.Tensor:
    model, *_ = load_finetuned(final)
    with torch.no_grad():
        return model(inputs()).logits


@pytest.mark.parametrize("method", ["lora", "ia3"])
def test_merged_export_runs_in_transformers_alone(tmp_path: Path, method: str) -> None:
    final = trained(tmp_path, method)
    export_hf(final, tmp_path / "merged")
    hf = BertForSequenceClassification.from_pretrained(tmp_path / "merged").eval()
    with torch.no_grad():
        theirs = hf(**inputs()).logits
    assert (ptm_logits(final) - theirs).abs().max() < 1e-5


@pytest.mark.parametrize("method", ["lora", "ia3"])
def test_peft_adapter_folder_loads_onto_the_exported_base(tmp_path: Path, method: str) -> None:
    final = trained(tmp_path, method)
    out = tmp_path / "exported"
    export_hf(final, out, peft_adapter=True)
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == method.upper()
    base = BertForSequenceClassification.from_pretrained(out).eval()
    with torch.no_grad():
        plain = base(**inputs()).logits
    model = peft.PeftModel.from_pretrained(base, out / "adapter").eval()
    with torch.no_grad():
        theirs = model(**inputs()).logits
    ours = ptm_logits(final)
    assert (ours - plain).abs().max() > 1e-4  # 10x the tolerance: the adapter matters
    assert (ours - theirs).abs().max() < 1e-5


def test_prompt_runs_do_not_export(tmp_path: Path) -> None:
    final = trained(tmp_path, "prompt")
    with pytest.raises(CheckpointError, match=r"finetune.peft=prompt model has no Hugging Face"):
        export_hf(final, tmp_path / "out")
