"""Encoder-decoder switches and decoding: embeddings sharing, padding, causality, search."""

from __future__ import annotations

import pytest
import torch

from ptm_core.encoders import EncoderDecoderModel, Seq2SeqConfig, build_encoder_decoder


def _model(**kwargs: object) -> EncoderDecoderModel:
    torch.manual_seed(0)
    options = {
        "hidden_size": 16,
        "encoder_layers": 1,
        "decoder_layers": 2,
        "num_heads": 2,
        "max_positions": 24,
        "dropout": 0.0,
        "pad_token_id": 0,
        "eos_token_id": 3,
        "decoder_start_token_id": 2,
        **kwargs,
    }
    return build_encoder_decoder(40, **options).eval()  # type: ignore[arg-type]


def test_shared_and_separate_embeddings() -> None:
    shared = _model()
    assert shared.decoder.embeddings.word is shared.encoder.embeddings.word
    assert shared.lm_head.weight is shared.encoder.embeddings.word.weight
    separate = _model(share_embeddings=False, tie_lm_head=False)
    assert separate.decoder.embeddings.word is not separate.encoder.embeddings.word
    assert separate.lm_head.weight is not separate.decoder.embeddings.word.weight


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_padding_and_causality(norm_position: str) -> None:
    model = _model(norm_position=norm_position)
    src = torch.tensor([[5, 6, 7, 8, 9]])
    padded = torch.tensor([[5, 6, 7, 8, 9, 0, 0]])
    dec = torch.tensor([[2, 11, 12, 13]])
    with torch.no_grad():
        plain = model(src, dec).logits
        with_pad = model(padded, dec, attention_mask=(padded != 0).long()).logits
        later = model(src, torch.tensor([[2, 11, 30, 31]])).logits
    torch.testing.assert_close(plain, with_pad, atol=1e-5, rtol=0)
    torch.testing.assert_close(plain[:, :2], later[:, :2])  # position t sees inputs <= t only
    assert not torch.allclose(plain[:, 2:], later[:, 2:])


def test_greedy_and_beam_respect_max_length_and_end_token() -> None:
    model = _model()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]])
    mask = (src != 0).long()
    for beams in (1, 3):
        out = model.generate(src, mask, max_length=6, num_beams=beams)
        assert len(out) == 2
        for row in out:
            assert 1 <= len(row) <= 6
            assert 3 not in row[:-1]  # nothing after the end token
    # Force the end token: a huge bias on id 3 ends every row after one token.
    model.final_logits_bias[0, 3] = 100.0
    assert model.generate(src, mask, max_length=6) == [[3], [3]]
    assert model.generate(src, mask, max_length=6, num_beams=3) == [[3], [3]]


def test_beam_search_scores_at_least_greedy() -> None:
    model = _model()
    src = torch.tensor([[5, 6, 7, 8, 9, 10]])

    def logprob(ids: list[int]) -> float:
        dec = torch.tensor([[2, *ids[:-1]]])
        with torch.no_grad():
            logits = model(src, dec).logits.log_softmax(-1)
        return float(logits[0, torch.arange(len(ids)), torch.tensor(ids)].sum())

    greedy = model.generate(src, max_length=5)[0]
    beam = model.generate(src, max_length=5, num_beams=4, length_penalty=0.0)[0]
    if len(greedy) == len(beam):
        assert logprob(beam) >= logprob(greedy) - 1e-5


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="num_heads"):
        Seq2SeqConfig(vocab_size=10, hidden_size=10, num_heads=3)
    with pytest.raises(ValueError, match="max_positions"):
        _model()(torch.ones(1, 30, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))
