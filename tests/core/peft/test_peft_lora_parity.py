"""LoRA on a ptm BERT equals Hugging Face peft's LoRA on the same transformers BERT.

Random init, odd sizes, imported both ways (a transformers folder loaded by ptm, and a ptm
model exported to transformers); the same adapter weights (lora_B nonzero) give the same
logits, and 10 AdamW steps on the same data keep them together.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from ptm_core.checkpoints.hf.bert_tasks import export_hf_task_model, load_hf_task_model
from ptm_core.checkpoints.hf.peft_adapter import hf_module_name
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import TaskModel, build_task_model
from ptm_core.peft import PeftConfig, attach_peft, count_trainable

peft = pytest.importorskip("peft")

VOCAB = 71
TARGETS_PTM = ("query", "key", "value", "out_proj", "w_in", "w_out")
# transformers' names of the same linears: attention.self.{query,key,value},
# attention.output.dense, intermediate.dense, output.dense (not the pooler's dense).
TARGETS_HF = r".*encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)"


def hf_config() -> BertConfig:
    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=36,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=53,
        max_position_embeddings=40,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=3,
    )


def from_hf(tmp_path: Path) -> tuple[TaskModel, BertForSequenceClassification]:
    torch.manual_seed(0)
    hf = BertForSequenceClassification(hf_config()).eval()
    hf.save_pretrained(tmp_path / "hf")
    return load_hf_task_model(tmp_path / "hf"), hf


def from_ptm(tmp_path: Path) -> tuple[TaskModel, BertForSequenceClassification]:
    torch.manual_seed(1)
    encoder = bert_encoder(
        vocab_size=VOCAB,
        hidden_size=36,
        num_layers=3,
        num_heads=4,
        intermediate_size=53,
        max_positions=40,
        dropout=0.0,
        attention_dropout=0.0,
    )
    model = build_task_model(encoder, "classification", 3, dropout=0.0)
    export_hf_task_model(model, tmp_path / "exported")
    hf = BertForSequenceClassification.from_pretrained(tmp_path / "exported").eval()
    return model, hf


def wrap_both(
    model: TaskModel, hf: BertForSequenceClassification, *, r: int = 4
) -> tuple[TaskModel, torch.nn.Module]:
    attach_peft(model, PeftConfig(method="lora", r=r, alpha=7.0, target_modules=TARGETS_PTM))
    config = peft.LoraConfig(
        r=r, lora_alpha=7.0, lora_dropout=0.0, target_modules=TARGETS_HF, bias="none"
    )
    peft_model = peft.get_peft_model(hf, config)
    # ptm's head (pooler + classifier) trains; the same parts of transformers' model do.
    for name, param in peft_model.named_parameters():
        if ".pooler." in name or ".classifier." in name:
            param.requires_grad_(True)
    # The same nonzero adapter weights on both sides (B = 0 would hide a wrong layout).
    hf_modules = dict(peft_model.base_model.model.named_modules())
    generator = torch.Generator().manual_seed(5)
    pairs = 0
    for name, module in model.encoder.named_modules():
        if not hasattr(module, "lora_A"):
            continue
        theirs = hf_modules[hf_module_name(name, "bert.")]
        for part in ("lora_A", "lora_B"):
            ours = getattr(module, part)["default"].weight
            value = torch.randn(ours.shape, generator=generator) * 0.2
            with torch.no_grad():
                ours.copy_(value)
                getattr(theirs, part)["default"].weight.copy_(value)
        pairs += 1
    assert pairs == 3 * 6  # 3 layers x (q, k, v, out, ffn in, ffn out)
    return model, peft_model


def batch(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (4, 11), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[3, 4:] = 0
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    labels = torch.randint(0, 3, (4,), generator=generator)
    return {
        "input_ids": ids * mask,
        "attention_mask": mask,
        "token_type_ids": types,
        "labels": labels,
    }


def hf_logits(peft_model: torch.nn.Module, data: dict[str, torch.Tensor]) -> torch.Tensor:
    return peft_model(
        input_ids=data["input_ids"],
        attention_mask=data["attention_mask"],
        token_type_ids=data["token_type_ids"],
    ).logits


@pytest.mark.parametrize("source", [from_hf, from_ptm], ids=["hf-folder-into-ptm", "ptm-exported"])
def test_lora_forward_and_ten_steps_match_peft(source, tmp_path: Path) -> None:
    model, hf = source(tmp_path)
    model, peft_model = wrap_both(model.eval(), hf)
    model.eval()
    peft_model.eval()
    data = batch(0)
    with torch.no_grad():
        ours, theirs = model(data).logits, hf_logits(peft_model, data)
    assert (ours - theirs).abs().max() < 1e-5
    trainable = [p for p in model.parameters() if p.requires_grad]
    hf_trainable = [p for p in peft_model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trainable) == sum(p.numel() for p in hf_trainable)
    optimizer = torch.optim.AdamW(trainable, lr=1e-2, weight_decay=0.01)
    hf_optimizer = torch.optim.AdamW(hf_trainable, lr=1e-2, weight_decay=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(10):
        data = batch(100 + step)
        loss = model(data).loss
        hf_loss = loss_fn(hf_logits(peft_model, data), data["labels"])
        assert abs(loss.item() - hf_loss.item()) < 1e-5
        for opt, value in ((optimizer, loss), (hf_optimizer, hf_loss)):
            opt.zero_grad()
            value.backward()
            opt.step()
    data = batch(999)
    with torch.no_grad():
        ours, theirs = model(data).logits, hf_logits(peft_model, data)
    difference = float((ours - theirs).abs().max())
    print(f"max |logit difference| after 10 steps: {difference:.2e}")
    assert difference < 1e-5
    # The trained adapters themselves agree too.
    hf_modules = dict(peft_model.base_model.model.named_modules())
    for name, module in model.encoder.named_modules():
        if hasattr(module, "lora_B"):
            theirs_b = hf_modules[hf_module_name(name, "bert.")].lora_B["default"].weight
            torch.testing.assert_close(
                module.lora_B["default"].weight, theirs_b, atol=1e-5, rtol=1e-4
            )


def test_only_the_adapter_and_head_train(tmp_path: Path) -> None:
    model, _ = from_hf(tmp_path)
    attach_peft(model, PeftConfig(method="lora", r=2))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable, "nothing trains"
    assert all(".lora_" in n or n.startswith("head.") for n in trainable)
    assert any(n.startswith("head.") for n in trainable)
    counted = count_trainable(model)
    assert 0 < counted.share < 0.5
    assert counted.trainable == sum(
        p.numel() for n, p in model.named_parameters() if n in trainable
    )
