"""XNLG's network: the decoder starts from the stage-1 encoder, the encoder freezes, the
target language steers the decoder, generation with a cache equals re-running the decoder,
and a folder round trip keeps every tensor (and the tied projection tied)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_core.encoders import generation
from ptm_core.encoders.decoder import TransformerDecoder
from ptm_multilingual.model import XLMEncoder, xlm_text_encoder
from ptm_multilingual.xnlg.model import XNLGModel, _Directed

V, PAD, START, END = 60, 2, 0, 1


def model(layers: int = 2, *, init: bool = True, seed: int = 0) -> XNLGModel:
    torch.manual_seed(seed)
    text = xlm_text_encoder(
        vocab_size=V,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=24,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return XNLGModel.from_encoder(
        XLMEncoder(text, ["xa", "xb", "xc"]),
        num_layers=layers,
        start_id=START,
        end_id=END,
        pad_id=PAD,
        init_decoder=init,
    )


def batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[0, 5, 6, 7, 1], [0, 8, 9, 1, PAD]])
    return {
        "input_ids": ids,
        "attention_mask": (ids != PAD).long(),
        "langs": torch.tensor([[0] * 5, [1] * 5]),
        "decoder_input_ids": torch.tensor([[0, 10, 11], [0, 12, PAD]]),
        "decoder_attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
        "decoder_langs": torch.tensor([1, 0]),
    }


def test_the_decoder_starts_from_the_encoder_except_cross_attention() -> None:
    net = model()
    enc, dec = net.encoder.encoder, net.decoder
    assert torch.equal(dec.embeddings.word.weight, enc.embeddings.word.weight)
    assert torch.equal(dec.embeddings.position.weight, enc.embeddings.position.weight)
    assert torch.equal(net.lang_embeddings.weight, net.encoder.lang_embeddings.weight)
    for i, layer in enumerate(dec.layers):
        source = enc.layers[i]
        assert torch.equal(layer.self_attention.qkv_proj.weight, source.attention.qkv_proj.weight)
        assert torch.equal(layer.feed_forward.w_out.bias, source.feed_forward.w_out.bias)
        assert torch.equal(layer.ffn_norm.weight, source.ffn_norm.weight)
    # tables are copies, not shared: fine-tuning the encoder's leaves the decoder's
    assert dec.embeddings.word.weight.data_ptr() != enc.embeddings.word.weight.data_ptr()
    assert net.head.proj.weight is dec.embeddings.word.weight
    fresh = model(init=False)
    assert not torch.equal(
        fresh.decoder.embeddings.word.weight, fresh.encoder.encoder.embeddings.word.weight
    )
    with pytest.raises(ValueError, match="decoder_layers <= 2"):
        model(layers=3)


def test_a_frozen_encoder_gets_no_gradient_and_the_decoder_does() -> None:
    net = model()
    net.freeze_encoder()
    net(**batch()).logits.sum().backward()
    assert all(p.grad is None for p in net.encoder.parameters())
    assert net.decoder.layers[0].cross_attention.q_proj.weight.grad is not None
    assert net.lang_embeddings.weight.grad is not None


def test_the_target_language_changes_the_decoder_output_only() -> None:
    net = model().eval()
    one = net(**batch())
    other = net(**{**batch(), "decoder_langs": torch.tensor([2, 2])})
    assert torch.equal(one.encoder_hidden_state, other.encoder_hidden_state)
    assert not torch.allclose(one.logits, other.logits)


def test_the_decoder_seam_adds_a_vector_before_the_embedding_norm() -> None:
    net = model().eval()
    dec: TransformerDecoder = net.decoder
    memory = torch.randn(2, 5, 16)
    ids = torch.tensor([[0, 10, 11], [0, 12, 13]])
    plain = dec(ids, memory)
    assert torch.equal(dec(ids, memory, extra_embeds=torch.zeros(2, 1, 16)), plain)
    vector = torch.randn(2, 1, 16)
    full = dec(ids, memory, extra_embeds=vector)
    assert torch.allclose(full, dec(ids, memory, extra_embeds=vector.expand(2, 3, 16)))
    cache = dec.init_cache(memory)
    steps = []
    for t in range(3):
        hidden, cache = dec.step(ids[:, t : t + 1], cache, extra_embeds=vector)
        steps.append(hidden)
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


@pytest.mark.parametrize("beams", [1, 3])
def test_cached_generation_equals_rerunning_the_decoder(beams: int) -> None:
    net = model().eval()
    b = batch()
    directed = _Directed(net, b["langs"], net.lang_id("xb"))
    kwargs = {"max_length": 6, "num_beams": beams}
    cached = generation.generate(directed, b["input_ids"], b["attention_mask"], **kwargs)
    rerun = generation.generate(
        directed, b["input_ids"], b["attention_mask"], use_cache=False, **kwargs
    )
    assert cached == rerun
    assert net.generate(b["input_ids"], b["attention_mask"], b["langs"], "xb", **kwargs) == cached


def test_greedy_generation_follows_the_teacher_forced_argmax() -> None:
    net = model().eval()
    b = batch()
    out = net.generate(
        b["input_ids"][:1], b["attention_mask"][:1], b["langs"][:1], "xc", max_length=4
    )[0]
    prefix = torch.tensor([[START]])
    for token in out:
        logits = net(
            b["input_ids"][:1], prefix, torch.tensor([2]), b["attention_mask"][:1], b["langs"][:1]
        ).logits
        assert int(logits[0, -1].argmax()) == token
        prefix = torch.cat([prefix, torch.tensor([[token]])], dim=1)


def test_an_unknown_language_is_refused_with_the_model_languages() -> None:
    with pytest.raises(ValueError, match=r"\['xa', 'xb', 'xc'\]"):
        model().lang_id("en")


def test_save_and_load_keep_every_tensor_and_the_tie(tmp_path: Path) -> None:
    net = model(seed=3)
    with torch.no_grad():
        net.head.proj.bias.add_(0.5)
    net.save_pretrained(tmp_path / "m")
    again = XNLGModel.from_pretrained(tmp_path / "m")
    for name, tensor in net.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name]), name
    assert again.head.proj.weight is again.decoder.embeddings.word.weight
    assert again.languages == ["xa", "xb", "xc"]
    net.eval(), again.eval()
    assert torch.equal(net(**batch()).logits, again(**batch()).logits)


def test_loading_another_folder_names_the_format(tmp_path: Path) -> None:
    from ptm_core.checkpoints.io import CheckpointError

    net = model()
    net.encoder.save_pretrained(tmp_path / "xlm")
    with pytest.raises(CheckpointError, match="not an XNLG folder"):
        XNLGModel.from_pretrained(tmp_path / "xlm")
