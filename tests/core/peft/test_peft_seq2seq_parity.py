"""LoRA on a ptm BART equals Hugging Face peft's LoRA on the same transformers BART (random
init, odd sizes, nonzero lora_B), in the forward pass and after AdamW steps; the same for
T5's encoder-decoder (the export of an adapter run: tests/core/peft/test_peft_seq2seq.py)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch
from transformers import (
    BartConfig,
    BartForSequenceClassification,
    T5Config,
    T5ForConditionalGeneration,
)

from ptm_core.checkpoints.hf.bart_tasks import load_hf_bart_classifier
from ptm_core.checkpoints.hf.peft_adapter import bart_module_name, t5_module_name
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.peft.library import inject

peft = pytest.importorskip("peft")

VOCAB = 71
TARGETS = ("query", "key", "value", "out_proj", "w_in", "w_gate", "w_out")
BART_HF = (
    r"model\.(encoder|decoder)\.layers\.\d+\.((self_attn|encoder_attn)\.(q|k|v|out)_proj|fc1|fc2)"
)
T5_HF = r"(encoder|decoder)\.block\.\d+\.layer\.\d\.(SelfAttention|EncDecAttention|DenseReluDense)\.(q|k|v|o|wi_0|wi_1|wo)"


def randomise(model: torch.nn.Module, seed: int = 1) -> None:
    # Norm weights start at 1 and biases at 0: perturb everything so every name is checked.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=g))


def share_adapters(ours: torch.nn.Module, peft_model: torch.nn.Module, name_of) -> int:
    """The same nonzero LoRA A/B on both sides (B = 0 would hide a wrong layout)."""
    theirs = dict(peft_model.base_model.model.named_modules())
    generator = torch.Generator().manual_seed(5)
    pairs = 0
    for name, module in ours.named_modules():
        if hasattr(module, "lora_A"):
            other = theirs[name_of(name)]
            for part in ("lora_A", "lora_B"):
                value = torch.randn(
                    getattr(module, part)["default"].weight.shape, generator=generator
                )
                with torch.no_grad():
                    getattr(module, part)["default"].weight.copy_(0.2 * value)
                    getattr(other, part)["default"].weight.copy_(0.2 * value)
            pairs += 1
    return pairs


def eos_rows(seed: int, eos: int = 2, pad: int = 1) -> dict[str, torch.Tensor]:
    """Right-padded rows that end with the end token (BART's classifier reads it)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, VOCAB, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    for row, length in enumerate((11, 8, 6)):
        ids[row, length - 1] = eos
        ids[row, length:] = pad
        mask[row, length:] = 0
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "labels": torch.randint(0, 3, (3,), generator=g),
    }


def test_lora_on_bart_matches_peft_forward_and_after_steps(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=VOCAB, d_model=36, encoder_layers=2, decoder_layers=3,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=53,
        decoder_ffn_dim=53, max_position_embeddings=40, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, num_labels=3,
    )  # fmt: skip
    hf = BartForSequenceClassification(config).eval()
    randomise(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = load_hf_bart_classifier(tmp_path / "hf").eval()
    attach_peft(
        ours, PeftConfig(method="lora", r=4, alpha=7.0, target_modules=(*TARGETS[:5], "w_out"))
    )
    lora = peft.LoraConfig(r=4, lora_alpha=7.0, lora_dropout=0.0, target_modules=BART_HF)
    peft_model = peft.get_peft_model(hf, lora).eval()
    for name, param in peft_model.named_parameters():
        if ".classification_head." in name:  # ptm's head trains; so does theirs
            param.requires_grad_(True)
    pairs = share_adapters(ours.model, peft_model, bart_module_name)
    assert pairs == 2 * 6 + 3 * 10  # encoder q k v o fc1 fc2; decoder + cross q k v o
    data = eval_data = eos_rows(0, config.eos_token_id, config.pad_token_id)

    def theirs(batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return peft_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits

    with torch.no_grad():
        before = ours(data).logits
        difference = (before - theirs(data)).abs().max()
    assert difference < 1e-5
    trainable = [p for p in ours.parameters() if p.requires_grad]
    hf_trainable = [p for p in peft_model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trainable) == sum(p.numel() for p in hf_trainable)
    optimizers = [torch.optim.AdamW(ps, lr=1e-2) for ps in (trainable, hf_trainable)]
    for step in range(6):
        data = eos_rows(100 + step, config.eos_token_id, config.pad_token_id)
        loss = ours(data).loss
        hf_loss = torch.nn.functional.cross_entropy(theirs(data), data["labels"])
        assert loss is not None and abs(loss.item() - hf_loss.item()) < 1e-5
        for optimizer, value in zip(optimizers, (loss, hf_loss), strict=True):
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
    with torch.no_grad():
        after = ours(eval_data).logits
        difference = (after - theirs(eval_data)).abs().max()
    print(f"BART LoRA: max |logit difference| after 6 steps {float(difference):.2e}")
    assert difference < 1e-5
    assert (after - before).abs().max() > 1e-2  # the steps moved the adapter and the head


def test_lora_on_t5_matches_peft_forward(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=VOCAB, d_model=36, d_kv=9, num_heads=4, d_ff=53, num_layers=2,
        num_decoder_layers=3, dropout_rate=0.0, feed_forward_proj="gated-gelu",
        relative_attention_num_buckets=8, relative_attention_max_distance=20,
        decoder_start_token_id=0, tie_word_embeddings=False,
    )  # fmt: skip
    hf = T5ForConditionalGeneration(config).eval()
    randomise(hf)
    hf.save_pretrained(tmp_path / "t5")
    ours = EncoderDecoderModel.from_pretrained(tmp_path / "t5").eval()
    inject(ours, PeftConfig(method="lora", r=4, alpha=7.0, target_modules=TARGETS))
    lora = peft.LoraConfig(r=4, lora_alpha=7.0, lora_dropout=0.0, target_modules=T5_HF)
    peft_model = peft.get_peft_model(hf, lora).eval()
    pairs = share_adapters(ours, peft_model, partial(t5_module_name, gated=True))
    assert pairs == 2 * 7 + 3 * 11  # q k v o wi_0 wi_1 wo; the decoder's cross q k v o too
    data = eos_rows(0)
    decoder = torch.randint(0, VOCAB, (3, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = ours(data["input_ids"], decoder, attention_mask=data["attention_mask"]).logits
        expected = peft_model(
            input_ids=data["input_ids"], attention_mask=data["attention_mask"],
            decoder_input_ids=decoder,
        ).logits  # fmt: skip
    # T5 scales neither its attention nor (untied) its logits, which reach ~25 here: float32
    # rounding alone gives ~1e-5 (9e-6 without LoRA), so the bound is relative to that scale.
    difference = float((got - expected).abs().max())
    print(f"T5 LoRA: max |logit difference| {difference:.2e} of {float(expected.abs().max()):.1f}")
    assert difference < 1e-6 * float(expected.abs().max())
