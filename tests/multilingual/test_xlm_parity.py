"""Parity with transformers' XLMModel / XLMWithLMHeadModel on random weights, both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from ptm_multilingual import XLMEncoder, XLMForMaskedLM, load_hf_xlm, save_hf_xlm  # noqa: E402


def _config() -> object:
    return transformers.XLMConfig(
        vocab_size=97,
        emb_dim=32,
        n_layers=2,
        n_heads=4,
        n_langs=3,
        use_lang_emb=True,
        max_position_embeddings=40,
        dropout=0.0,
        attention_dropout=0.0,
        id2lang={0: "de", 1: "en", 2: "fr"},
        lang2id={"de": 0, "en": 1, "fr": 2},
    )


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 97, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    ids[mask == 0] = 2  # XLM's <pad>
    langs = torch.randint(0, 3, (3, 12), generator=g)
    # TLM-style positions that restart on the second sentence.
    positions = torch.cat([torch.arange(6), torch.arange(6)]).expand(3, 12).clone()
    return {"input_ids": ids, "attention_mask": mask, "langs": langs, "position_ids": positions}


def _randomise(model: torch.nn.Module) -> None:
    # Non-trivial LayerNorm and bias values, so a swapped name cannot go unnoticed.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def test_xlm_model_parity_and_export(tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf = transformers.XLMModel(_config()).eval()
    _randomise(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = load_hf_xlm(tmp_path / "hf").eval()
    assert ours.encoder.languages == ["de", "en", "fr"]
    inputs = _inputs()
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        ref = hf(**inputs, output_hidden_states=True)
        got = ours.encoder(**inputs, output_hidden_states=True)
    err = (ref.last_hidden_state - got.last_hidden_state)[real].abs().max().item()
    print(f"XLMModel max abs diff on real tokens: {err:.2e}")
    assert err <= 1e-5
    for a, b in zip(ref.hidden_states, got.hidden_states, strict=True):
        assert (a - b)[real].abs().max().item() <= 1e-5
    # The language ids matter: other languages, other outputs.
    with torch.no_grad():
        other = ours.encoder(**{**inputs, "langs": (inputs["langs"] + 1) % 3}).last_hidden_state
    assert (other - got.last_hidden_state)[real].abs().max() > 1e-2

    # Export back: the Hugging Face model read from our directory gives the same outputs.
    save_hf_xlm(ours.encoder, tmp_path / "back")
    back = transformers.XLMModel.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        again = back(**inputs).last_hidden_state
    assert (again - ref.last_hidden_state)[real].abs().max().item() <= 1e-5
    assert XLMEncoder.from_pretrained(tmp_path / "hf").languages == ["de", "en", "fr"]


def test_xlm_lm_head_parity_and_export(tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf = transformers.XLMWithLMHeadModel(_config()).eval()
    _randomise(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = load_hf_xlm(tmp_path / "hf").eval()
    assert isinstance(ours, XLMForMaskedLM)
    assert ours.head.proj.weight is ours.encoder.word_embeddings.weight
    inputs = _inputs()
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        ref = hf(**inputs).logits
        got = ours(**inputs)
    err = (ref - got)[real].abs().max().item()
    print(f"XLMWithLMHeadModel max abs logit diff on real tokens: {err:.2e}")
    assert err <= 1e-5

    save_hf_xlm(ours, tmp_path / "back")
    back = transformers.XLMWithLMHeadModel.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        again = back(**inputs).logits
    assert (again - ref)[real].abs().max().item() <= 1e-5
    assert (
        back.config.n_langs == 3
        and str(back.config.id2lang.get("2", back.config.id2lang.get(2))) == "fr"
    )


def test_ptm_format_round_trip(tmp_path: Path) -> None:
    from ptm_multilingual import xlm_text_encoder

    model = XLMEncoder(
        xlm_text_encoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2), ["en", "fr"]
    ).eval()
    model.save_pretrained(tmp_path / "x")
    loaded = XLMEncoder.from_pretrained(tmp_path / "x").eval()
    ids = torch.randint(5, 50, (2, 7))
    langs = torch.tensor([[0] * 7, [1] * 7])
    with torch.no_grad():
        assert torch.equal(
            model(ids, langs=langs).last_hidden_state, loaded(ids, langs=langs).last_hidden_state
        )
    assert loaded.languages == ["en", "fr"]
