"""XLNet on the core encoder: parity with transformers, two-stream attention, recurrence."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_core import TransformerEncoder
from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders import EncoderConfig, XLNetConfig, xlnet_encoder
from ptm_core.modules.attention_masks import permutation_masks
from ptm_core.objectives.inputs import build_objective

transformers = pytest.importorskip("transformers")

TOL = 1e-5


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _hf_pair(tmp_path: Path, **config: object) -> tuple[object, TransformerEncoder]:
    """A random-init ``XLNetModel`` and the same weights loaded through ptm."""
    settings = dict(vocab_size=99, d_model=32, n_layer=2, n_head=4, d_inner=64, pad_token_id=0)
    settings.update(config)
    theirs = transformers.XLNetModel(transformers.XLNetConfig(**settings)).eval()
    theirs.save_pretrained(tmp_path)
    return theirs, TransformerEncoder.from_pretrained(tmp_path).eval()


def _order_ranks(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(length, generator=gen).argsort() for _ in range(batch)])


def _tiny(**overrides: object) -> TransformerEncoder:
    settings: dict[str, object] = dict(
        vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64
    )
    settings.update(overrides)
    return xlnet_encoder(**settings).eval()  # type: ignore[arg-type]


# ------------------------------------------------------------------ parity with transformers


def test_content_stream_matches_transformers_with_padding_and_segments(tmp_path: Path) -> None:
    theirs, ours = _hf_pair(tmp_path)
    ids = torch.randint(1, 99, (3, 9))
    types = torch.tensor([[0] * 4 + [1] * 5, [0] * 6 + [1] * 3, [0] * 9])
    padding = torch.ones(3, 9, dtype=torch.long)
    padding[1, 7:] = 0
    padding[2, 5:] = 0
    with torch.no_grad():
        expected = theirs(ids, attention_mask=padding, token_type_ids=types).last_hidden_state
        got = ours(ids, attention_mask=padding, token_type_ids=types).last_hidden_state
    real = padding.bool()
    assert (expected[real] - got[real]).abs().max() <= TOL


def test_two_stream_matches_transformers_perm_mask_and_target_mapping(tmp_path: Path) -> None:
    theirs, ours = _hf_pair(tmp_path)
    batch, length, count = 2, 8, 3
    ids = torch.randint(1, 99, (batch, length))
    types = torch.zeros(batch, length, dtype=torch.long)
    types[:, 5:] = 1
    ranks = _order_ranks(batch, length)
    content, query = permutation_masks(ranks, torch.ones(batch, length, dtype=torch.bool))
    # The targets: the last `count` tokens of each order.
    positions = ranks.argsort(dim=1)[:, length - count :]
    mapping = torch.zeros(batch, count, length)
    mapping.scatter_(2, positions[:, :, None], 1.0)
    with torch.no_grad():
        out = theirs(
            ids,
            token_type_ids=types,
            perm_mask=(~query).float(),
            target_mapping=mapping,
            output_hidden_states=True,
        )
        ours_out = ours(
            ids,
            attention_mask=content,
            token_type_ids=types,
            query_positions=positions,
            query_attention_mask=query.gather(1, positions[:, :, None].expand(-1, -1, length)),
        )
    assert ours_out.query_hidden_state is not None
    assert (out.last_hidden_state - ours_out.query_hidden_state).abs().max() <= TOL
    content_final = out.hidden_states[-2]  # (h, g) pairs flattened: the last h
    assert (content_final - ours_out.last_hidden_state).abs().max() <= TOL


def test_memory_matches_transformers_mems(tmp_path: Path) -> None:
    theirs, ours = _hf_pair(tmp_path, mem_len=6)
    first, second = torch.randint(1, 99, (2, 5)), torch.randint(1, 99, (2, 7))
    with torch.no_grad():
        a1 = theirs(first, use_mems=True)
        b1 = ours(first)
        a2 = theirs(second, mems=a1.mems, use_mems=True)
        b2 = ours(second, memory=b1.memory)
    assert b1.memory is not None and b2.memory is not None
    assert all(m.shape == (2, 5, 32) for m in b1.memory)
    assert all(m.shape == (2, 6, 32) for m in b2.memory)  # truncated to memory_length
    assert (a2.last_hidden_state - b2.last_hidden_state).abs().max() <= TOL
    for theirs_mem, ours_mem in zip(a2.mems, b2.memory, strict=True):
        assert (theirs_mem.transpose(0, 1) - ours_mem).abs().max() <= TOL


def test_export_to_transformers_round_trips(tmp_path: Path) -> None:
    ours = _tiny(vocab_size=99, memory_length=4)
    ours.save_pretrained(tmp_path / "hf", format="hf")
    theirs = transformers.XLNetModel.from_pretrained(tmp_path / "hf").eval()
    ids = torch.randint(1, 99, (2, 6))
    with torch.no_grad():
        diff = theirs(ids).last_hidden_state - ours(ids).last_hidden_state
    assert diff.abs().max() <= TOL
    back = TransformerEncoder.from_pretrained(tmp_path / "hf")
    assert back.config.memory_length == 4
    with torch.no_grad():
        assert torch.equal(back.eval()(ids).last_hidden_state, ours(ids).last_hidden_state)


def test_ptm_checkpoint_round_trips(tmp_path: Path) -> None:
    ours = _tiny(memory_length=3)
    ours.save_pretrained(tmp_path / "ptm")
    back = TransformerEncoder.from_pretrained(tmp_path / "ptm").eval()
    assert back.config == ours.config
    ids = torch.randint(1, 50, (2, 6))
    with torch.no_grad():
        assert torch.equal(back(ids).last_hidden_state, ours(ids).last_hidden_state)


def test_an_absolute_position_encoder_cannot_be_exported_as_xlnet(tmp_path: Path) -> None:
    from ptm_core.encoders import bert_encoder

    encoder = bert_encoder(vocab_size=50, hidden_size=32, num_layers=1, num_heads=2)
    with pytest.raises(CheckpointError, match="position_encoding"):
        encoder.save_pretrained(tmp_path / "x", format="hf-xlnet")
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------- two-stream attention


def _all_streams(
    encoder: TransformerEncoder, ids: torch.Tensor, ranks: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Content and query outputs at every position for one factorisation order."""
    batch, length = ids.shape
    content, query = permutation_masks(ranks, torch.ones(batch, length, dtype=torch.bool))
    positions = torch.arange(length).expand(batch, length)
    with torch.no_grad():
        out = encoder(
            ids, attention_mask=content, query_positions=positions, query_attention_mask=query
        )
    assert out.query_hidden_state is not None
    return out.last_hidden_state, out.query_hidden_state


def test_a_later_token_never_changes_an_earlier_query_or_content_output() -> None:
    encoder = _tiny(num_layers=3)
    length = 10
    ids = torch.randint(5, 50, (1, length))
    ranks = _order_ranks(1, length, seed=3)
    content, query = _all_streams(encoder, ids, ranks)
    changed_later = 0
    for position in range(length):
        perturbed = ids.clone()
        perturbed[0, position] = (ids[0, position] + 7) % 45 + 5
        new_content, new_query = _all_streams(encoder, perturbed, ranks)
        rank = ranks[0, position]
        earlier = ranks[0] < rank
        # Query stream: every token up to and including this one in the order (its own
        # query never sees its content).
        same_query = ranks[0] <= rank
        assert (new_query[0, same_query] - query[0, same_query]).abs().max() <= 1e-6, position
        if bool(earlier.any()):
            assert (new_content[0, earlier] - content[0, earlier]).abs().max() <= 1e-6
        later = ranks[0] > rank
        if bool(later.any()):
            delta = (new_query[0, later] - query[0, later]).abs().amax(dim=-1)
            changed_later += int((delta > 1e-4).sum())
    # The test can fail: later tokens do depend on earlier ones.
    assert changed_later > length


def test_the_query_stream_never_sees_its_own_content_but_the_content_stream_does() -> None:
    encoder = _tiny()
    length = 7
    ids = torch.randint(5, 50, (2, length))
    ranks = _order_ranks(2, length, seed=5)
    content, query = _all_streams(encoder, ids, ranks)
    for position in range(length):
        perturbed = ids.clone()
        perturbed[:, position] = (ids[:, position] + 11) % 45 + 5
        new_content, new_query = _all_streams(encoder, perturbed, ranks)
        assert (new_query[:, position] - query[:, position]).abs().max() <= 1e-6
        assert (new_content[:, position] - content[:, position]).abs().max() > 1e-4


def test_the_first_token_of_an_order_gets_a_finite_query_output() -> None:
    encoder = _tiny()
    ids = torch.randint(5, 50, (2, 6))
    _, query = _all_streams(encoder, ids, _order_ranks(2, 6))
    assert bool(torch.isfinite(query).all())


def test_permutation_masks_follow_the_order_and_hide_padding() -> None:
    ranks = torch.tensor([[2, 0, 1, 3]])
    padding = torch.tensor([[1, 1, 1, 0]])
    content, query = permutation_masks(ranks, padding)
    expected_content = torch.tensor(
        [[1, 1, 1, 0], [0, 1, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool
    )
    expected_query = torch.tensor(
        [[0, 1, 1, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool
    )
    assert torch.equal(content[0], expected_content)
    assert torch.equal(query[0], expected_query)


# ------------------------------------------------------------------------ recurrence


def test_outputs_depend_on_the_previous_segment_through_memory() -> None:
    encoder = _tiny(memory_length=6)
    first, second = torch.randint(5, 50, (2, 6)), torch.randint(5, 50, (2, 5))
    other_first = first.clone()
    other_first[:, 2] = (first[:, 2] + 13) % 45 + 5
    with torch.no_grad():
        memory = encoder(first).memory
        other_memory = encoder(other_first).memory
        out = encoder(second, memory=memory).last_hidden_state
        out_other = encoder(second, memory=other_memory).last_hidden_state
        out_alone = encoder(second).last_hidden_state
    assert (out - out_other).abs().max() > 1e-4
    assert (out - out_alone).abs().max() > 1e-4


def test_no_gradient_flows_into_the_memory() -> None:
    encoder = _tiny(memory_length=6).train()
    first = encoder.word_embeddings(torch.randint(5, 50, (2, 6))).detach().requires_grad_(True)
    out_first = encoder(inputs_embeds=first)
    assert out_first.memory is not None
    assert not any(m.requires_grad for m in out_first.memory)
    second = encoder(torch.randint(5, 50, (2, 5)), memory=out_first.memory)
    second.last_hidden_state.sum().backward()
    assert first.grad is None  # nothing reached the previous segment
    assert encoder.word_embeddings.weight.grad is not None  # the current segment trains


def test_memory_must_match_the_layers() -> None:
    encoder = _tiny(memory_length=4)
    memory = encoder(torch.randint(5, 50, (1, 4))).memory
    assert memory is not None
    with pytest.raises(ValueError, match="memory has 1 tensors but the encoder has 2 layers"):
        encoder(torch.randint(5, 50, (1, 4)), memory=memory[:1])


# ------------------------------------------------------------------------ config errors


def test_relative_options_need_relative_positions() -> None:
    # XLNet's switches are XLNetConfig's fields, not every encoder's.
    assert not {"segment_encoding", "memory_length"} & set(EncoderConfig().to_dict())
    with pytest.raises(ValueError, match="must be 'relative'"):
        XLNetConfig(position_encoding="absolute")
    with pytest.raises(ValueError, match="build an XLNetConfig"):
        EncoderConfig(position_encoding="relative")
    with pytest.raises(ValueError, match="segment_encoding must be 'absolute' or 'relative'"):
        XLNetConfig(segment_encoding="bucketed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_length must be an integer >= 0"):
        XLNetConfig(memory_length=-1)
    # An absolute-position config.json that sets them is refused, naming their owner.
    for key, value in (("segment_encoding", "relative"), ("memory_length", 8)):
        with pytest.raises(ValueError, match=rf"c.json: {key}=.*belongs to XLNetConfig"):
            EncoderConfig.from_dict({key: value}, source="c.json")
    with pytest.raises(ValueError, match="must be 'absolute' or 'relative'"):
        EncoderConfig(position_encoding="alibi")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="'rotary' is ModernBERT's encoder: build a ModernBertConfig"
    ):
        EncoderConfig(position_encoding="rotary")


def test_relative_encoder_rejects_position_ids_and_absolute_encoders_reject_memory() -> None:
    with pytest.raises(ValueError, match="do not pass position_ids"):
        _tiny()(torch.randint(5, 50, (1, 4)), position_ids=torch.arange(4)[None])
    from ptm_core.encoders import bert_encoder

    bert = bert_encoder(vocab_size=50, hidden_size=32, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="position_encoding='relative'"):
        bert(torch.randint(5, 50, (1, 4)), query_positions=torch.zeros(1, 1, dtype=torch.long))


def test_a_relative_encoder_has_no_length_limit() -> None:
    encoder = _tiny()
    out = encoder(torch.randint(5, 50, (1, 700)))
    assert out.last_hidden_state.shape == (1, 700, 32)


def test_memory_mask_hides_the_previous_segments_padding() -> None:
    encoder = _tiny(memory_length=5)
    with torch.no_grad():
        memory = encoder(torch.randint(5, 50, (1, 5))).memory
        assert memory is not None
        noisy = tuple(m.clone() for m in memory)
        for m in noisy:
            m[:, 3:] += 5.0  # change the positions the mask calls padding
        keep = torch.tensor([[1, 1, 1, 0, 0]])
        current = torch.randint(5, 50, (1, 4))
        out = encoder(current, memory=memory, memory_mask=keep).last_hidden_state
        out_noisy = encoder(current, memory=noisy, memory_mask=keep).last_hidden_state
        out_unmasked = encoder(current, memory=noisy).last_hidden_state
    assert (out - out_noisy).abs().max() <= 1e-6
    assert (out - out_unmasked).abs().max() > 1e-4


def test_permutation_lm_logits_match_xlnet_lm_head_model(tmp_path: Path) -> None:
    from ptm_core.checkpoints.hf.xlnet import load_lm_head
    from ptm_core.objectives import PermutationLMObjective
    from ptm_core.tokenization import VocabInfo

    settings = dict(vocab_size=99, d_model=32, n_layer=2, n_head=4, d_inner=64, pad_token_id=0)
    theirs = transformers.XLNetLMHeadModel(transformers.XLNetConfig(**settings)).eval()
    with torch.no_grad():
        theirs.lm_loss.bias.normal_()
    theirs.save_pretrained(tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path).eval()
    objective = build_objective(PermutationLMObjective, encoder, VocabInfo(99, 0, 1, 2, 3, 4))
    load_lm_head(tmp_path, objective)
    batch, length, count = 2, 8, 2
    ids = torch.randint(5, 99, (batch, length))
    ranks = _order_ranks(batch, length, seed=9)
    content, query = permutation_masks(ranks, torch.ones(batch, length, dtype=torch.bool))
    positions = ranks.argsort(dim=1)[:, length - count :]
    mapping = torch.zeros(batch, count, length).scatter_(2, positions[:, :, None], 1.0)
    rows = query.gather(1, positions[:, :, None].expand(-1, -1, length))
    with torch.no_grad():
        expected = theirs(ids, perm_mask=(~query).float(), target_mapping=mapping).logits
        out = encoder(
            ids, attention_mask=content, query_positions=positions, query_attention_mask=rows
        )
        assert out.query_hidden_state is not None
        got = objective.logits(out.query_hidden_state)
    assert (expected - got).abs().max() <= TOL
    with pytest.raises(CheckpointError, match="not an XLNetLMHeadModel"):
        transformers.XLNetModel(transformers.XLNetConfig(**settings)).save_pretrained(
            tmp_path / "bare"
        )
        load_lm_head(tmp_path / "bare", objective)


def test_encoders_without_bert_layout_refuse_bert_family_exports(tmp_path: Path) -> None:
    from ptm_core.encoders import bert_encoder

    xlnet = _tiny()
    with pytest.raises(CheckpointError, match=r"position_encoding='relative'.*hf-xlnet"):
        xlnet.save_pretrained(tmp_path / "a", format="hf-bert")
    t5_like = bert_encoder(
        vocab_size=50, hidden_size=32, num_layers=1, num_heads=2, norm_position="post"
    )
    t5_like = TransformerEncoder(
        EncoderConfig(**{**t5_like.config.to_dict(), "position_encoding": "bucketed"})
    )
    for fmt in ("hf", "hf-bert", "hf-electra"):
        with pytest.raises(CheckpointError, match="position_encoding='bucketed'"):
            t5_like.save_pretrained(tmp_path / fmt, format=fmt)
        assert not (tmp_path / fmt).exists()
