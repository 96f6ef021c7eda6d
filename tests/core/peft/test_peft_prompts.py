"""Soft prompts and prefixes inside ptm's encoder: shapes, masks, what trains, and prefix
tuning against peft's PrefixTuning on the same transformers BERT."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from ptm_core.checkpoints.hf.bert_tasks import load_hf_task_model
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import TaskModel, build_task_model
from ptm_core.peft import PeftConfig, PrefixAttention, SoftPromptEncoder, attach_peft
from ptm_core.peft.prompts import prompt_mask
from ptm_core.training import TrainerConfig
from ptm_core.training.optim import build_optimizer

VOCAB = 61
P = 3


def task_model(method: str, kind: str = "classification") -> TaskModel:
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=VOCAB,
        hidden_size=20,
        num_layers=2,
        num_heads=4,
        intermediate_size=27,
        max_positions=40,
        dropout=0.0,
        attention_dropout=0.0,
    )
    model = build_task_model(encoder, kind, 3, dropout=0.0)
    return attach_peft(model, PeftConfig(method=method, num_virtual_tokens=P)).eval()  # type: ignore[return-value]


def rows(padding: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(5, VOCAB, (2, 6), generator=generator)
    ids = torch.cat([ids, torch.zeros(2, padding, dtype=torch.long)], dim=1)
    mask = (ids != 0).long()
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_shapes_and_padding_is_ignored(method: str) -> None:
    model = task_model(method, "tagging")
    with torch.no_grad():
        short = model(rows(0)).logits  # (B, L, N): the real tokens only, no virtual ones
        padded = model(rows(4)).logits
    assert short.shape == (2, 6, 3)
    assert padded.shape == (2, 10, 3)
    torch.testing.assert_close(padded[:, :6], short, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_real_tokens_attend_the_virtual_ones(method: str) -> None:
    model = task_model(method, "tagging")
    generator = torch.Generator().manual_seed(4)  # random: a constant shift dies in LayerNorm
    with torch.no_grad():
        before = model(rows(0)).logits
        for name, param in model.encoder.named_parameters():
            if name.endswith(("prompt", "prefix_key", "prefix_value")):
                param.add_(torch.randn(param.shape, generator=generator))
        after = model(rows(0)).logits
    assert (after - before).abs().min() > 0  # every real position reads the virtual tokens


def testprompt_mask_layouts() -> None:
    padding = torch.tensor([[1, 1, 0]])
    assert prompt_mask(padding, 2).tolist() == [[1, 1, 1, 1, 0]]
    visible = torch.tensor([[[1, 1, 0], [1, 1, 0], [0, 0, 0]]], dtype=torch.bool)
    mask = prompt_mask(visible, 2)
    assert mask is not None
    assert mask.shape == (1, 5, 5)
    # Prompt rows see each other and the real tokens, not the padding column.
    assert mask[0, :2].tolist() == [[True, True, True, True, False]] * 2
    # Real rows see the prompt and what they saw before; the padding row sees nothing.
    assert mask[0, 2].tolist() == [True, True, True, True, False]
    assert not mask[0, 4].any()


@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_one_step_changes_only_the_virtual_tokens_and_the_head(method: str) -> None:
    model = task_model(method).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = build_optimizer(
        model, TrainerConfig(output_dir="unused", learning_rate=1e-2, device="cpu")
    )
    grouped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert grouped == {id(p) for p in model.parameters() if p.requires_grad}
    batch = {**rows(2), "labels": torch.tensor([0, 2])}
    model(batch).loss.backward()  # type: ignore[union-attr]
    optimizer.step()
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    virtual = {k for k in changed if k.endswith(("prompt", "prefix_key", "prefix_value"))}
    assert virtual and changed - virtual == {k for k in changed if k.startswith("head.")}
    assert any(k.startswith("head.") for k in changed)


def test_wrappers_are_where_the_seams_are() -> None:
    assert isinstance(task_model("prompt").encoder, SoftPromptEncoder)
    layers = task_model("prefix").encoder.layers
    assert all(isinstance(layer.attention, PrefixAttention) for layer in layers)


def test_prompt_refuses_rows_longer_than_the_positions_left() -> None:
    model = task_model("prompt")
    ids = torch.randint(5, VOCAB, (1, 39))
    with pytest.raises(ValueError, match=r"lower task\.max_length to 37"):
        model({"input_ids": ids})


def test_prefix_tuning_matches_peft_prefix_tuning_on_transformers_bert(tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = BertConfig(
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
    hf = BertForSequenceClassification(config).eval()
    hf.save_pretrained(tmp_path)
    model = load_hf_task_model(tmp_path).eval()
    attach_peft(model, PeftConfig(method="prefix", num_virtual_tokens=P))
    peft_model = peft.get_peft_model(
        hf, peft.PrefixTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=P)
    ).eval()
    # peft's prefix encoder: (P, layers * 2 * D), layer i's key at 2i and value at 2i + 1.
    table = peft_model.prompt_encoder["default"].embedding.weight
    with torch.no_grad():
        table.normal_(0.0, 0.5)
        split = table.view(P, 3 * 2, 36)
        for index, layer in enumerate(model.encoder.layers):
            layer.attention.prefix_key.copy_(split[:, 2 * index])
            layer.attention.prefix_value.copy_(split[:, 2 * index + 1])
    batch = rows(3)
    # transformers numbers positions after the past keys (P..P+L-1) when peft passes the
    # prefix as past_key_values; ptm keeps 0..L-1. Give ptm the same positions to compare.
    positions = torch.arange(P, P + batch["input_ids"].shape[1]).expand(2, -1)
    with torch.no_grad():
        ours = model({**batch, "position_ids": positions}).logits
        theirs = peft_model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
        ).logits
        plain = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert (theirs - plain).abs().max() > 1e-3  # the prefix does reach transformers' BERT
    assert (ours - theirs).abs().max() < 1e-5
