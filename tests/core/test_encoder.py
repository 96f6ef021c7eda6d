"""Behaviour of TransformerEncoder: masks, inputs, variants and config errors."""

from __future__ import annotations

import pytest
import torch

from ptm_core import EncoderConfig, TransformerEncoder, bert_encoder
from ptm_core.modules import block_diagonal_mask, padding_to_visibility, to_sdpa_mask


def _encoder(**overrides: object) -> TransformerEncoder:
    kwargs = dict(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, max_positions=32)
    kwargs.update(overrides)
    return bert_encoder(**kwargs).eval()  # type: ignore[arg-type]


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_visibility_equal_to_padding_gives_same_outputs(norm_position: str) -> None:
    encoder = _encoder(norm_position=norm_position)
    ids = torch.randint(1, 50, (2, 9))
    padding = torch.ones(2, 9, dtype=torch.long)
    padding[1, 6:] = 0
    with torch.no_grad():
        a = encoder(ids, attention_mask=padding).last_hidden_state
        b = encoder(ids, attention_mask=padding_to_visibility(padding)).last_hidden_state
    # Outputs at padding positions carry nothing (zeros when the stack unpads).
    real = padding.bool()
    assert torch.allclose(a[real], b[real], atol=1e-6)


def test_hidden_token_has_no_influence_on_the_row_that_cannot_see_it() -> None:
    encoder = _encoder()
    ids = torch.randint(1, 50, (1, 8))
    visibility = torch.ones(1, 8, 8, dtype=torch.bool)
    visibility[0, 2, 5] = False  # row 2 may not look at token 5
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 7) % 50
    with torch.no_grad():
        a = encoder(ids, attention_mask=visibility).last_hidden_state
        b = encoder(changed, attention_mask=visibility).last_hidden_state
    # One layer deep, row 2 never sees token 5; in layer 2 it sees rows that saw it, so
    # build a visibility where nobody but token 5 itself sees 5 and compare every row.
    assert not torch.allclose(a[0, 5], b[0, 5])
    visibility[0, :, 5] = False
    visibility[0, 5, 5] = True
    with torch.no_grad():
        a = encoder(ids, attention_mask=visibility).last_hidden_state
        b = encoder(changed, attention_mask=visibility).last_hidden_state
    others = [i for i in range(8) if i != 5]
    assert torch.allclose(a[0, others], b[0, others], atol=1e-6)
    assert not torch.allclose(a[0, 5], b[0, 5])


def test_padding_tokens_do_not_change_real_outputs() -> None:
    encoder = _encoder()
    ids = torch.randint(1, 50, (1, 6))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 6 + [0] * 4])
    with torch.no_grad():
        a = encoder(ids).last_hidden_state
        b = encoder(padded, attention_mask=mask).last_hidden_state[:, :6]
    assert torch.allclose(a, b, atol=1e-6)


def test_rows_that_see_nothing_stay_finite() -> None:
    encoder = _encoder()
    ids = torch.randint(1, 50, (2, 5))
    visibility = torch.ones(2, 5, 5, dtype=torch.bool)
    visibility[0, 4, :] = False  # a [PAD] row that sees nothing
    visibility[0, :, 4] = False
    all_padding = torch.zeros(2, 5, dtype=torch.long)
    all_padding[1] = 1
    with torch.no_grad():
        assert torch.isfinite(encoder(ids, attention_mask=visibility).last_hidden_state).all()
        assert torch.isfinite(encoder(ids, attention_mask=all_padding).last_hidden_state).all()


def test_packed_documents_are_independent() -> None:
    encoder = _encoder()
    doc_a, doc_b = torch.randint(1, 50, (1, 4)), torch.randint(1, 50, (1, 3))
    packed = torch.cat([doc_a, doc_b], dim=1)
    segments = torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    positions = torch.tensor([[0, 1, 2, 3, 0, 1, 2]])
    with torch.no_grad():
        out = encoder(
            packed, attention_mask=block_diagonal_mask(segments), position_ids=positions
        ).last_hidden_state
        a = encoder(doc_a).last_hidden_state
        b = encoder(doc_b).last_hidden_state
    assert torch.allclose(out[:, :4], a, atol=1e-5)
    assert torch.allclose(out[:, 4:], b, atol=1e-5)


def test_inputs_embeds_equals_input_ids_and_hidden_states_count() -> None:
    encoder = _encoder(norm_position="pre")
    ids = torch.randint(1, 50, (2, 7))
    with torch.no_grad():
        a = encoder(ids, output_hidden_states=True)
        b = encoder(inputs_embeds=encoder.word_embeddings(ids))
    assert torch.allclose(a.last_hidden_state, b.last_hidden_state, atol=1e-6)
    assert a.hidden_states is not None and len(a.hidden_states) == 3
    assert b.hidden_states is None


def test_position_and_token_type_ids_are_used() -> None:
    encoder = _encoder()
    ids = torch.randint(1, 50, (1, 5))
    with torch.no_grad():
        base = encoder(ids).last_hidden_state
        shifted = encoder(ids, position_ids=torch.arange(3, 8)[None]).last_hidden_state
        typed = encoder(ids, token_type_ids=torch.ones(1, 5, dtype=torch.long)).last_hidden_state
    assert not torch.allclose(base, shifted)
    assert not torch.allclose(base, typed)


def test_bad_masks_and_inputs_are_clear_errors() -> None:
    encoder = _encoder()
    ids = torch.randint(1, 50, (1, 5))
    with pytest.raises(ValueError, match="length 4 but the input has 5"):
        encoder(ids, attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match=r"must be \[B, 5, 5\]"):
        encoder(ids, attention_mask=torch.ones(1, 5, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="must be bool"):
        encoder(ids, attention_mask=torch.ones(1, 5, 5))
    with pytest.raises(ValueError, match="exactly one of"):
        encoder()
    with pytest.raises(ValueError, match="longer than max_positions=32"):
        encoder(torch.randint(1, 50, (1, 33)))
    assert to_sdpa_mask(torch.ones(2, 5), 5) is None


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="hidden_size=30 must be divisible by num_heads=4"):
        EncoderConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match=r"activation .gelu2. is unknown; valid: .*gelu"):
        EncoderConfig(activation="gelu2")
    with pytest.raises(ValueError, match="norm_position"):
        EncoderConfig(norm_position="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown encoder config field\(s\) \['hiden_size'\]"):
        EncoderConfig.from_dict({"hiden_size": 3})


def test_dropout_is_active_in_training_only() -> None:
    encoder = _encoder(dropout=0.5)
    ids = torch.randint(1, 50, (1, 6))
    encoder.train()
    a, b = encoder(ids).last_hidden_state, encoder(ids).last_hidden_state
    assert not torch.allclose(a, b)
    encoder.eval()
    with torch.no_grad():
        assert torch.equal(encoder(ids).last_hidden_state, encoder(ids).last_hidden_state)


def test_pre_ln_cannot_be_exported_to_hf(tmp_path) -> None:
    from ptm_core import CheckpointError

    with pytest.raises(CheckpointError, match="pre-LN"):
        _encoder(norm_position="pre").save_pretrained(tmp_path / "x", format="hf")
    assert not (tmp_path / "x").exists()
