"""Key/value cache of encoder-decoder generation: same tokens and step logits as re-running
the decoder on the whole prefix, beam reordering, and greedy parity with transformers' BART."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
import torch

from ptm_core.encoders import EncoderDecoderModel, build_encoder_decoder
from ptm_core.encoders.decoder import DecoderCache

EOS, START, PAD = 3, 2, 0


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(norm_position: str = "post", seed: int = 0) -> EncoderDecoderModel:
    # Wide random weights (and perturbed LayerNorms/biases) so that outputs depend on the
    # source and on positions, and the end token wins at various steps.
    torch.manual_seed(seed)
    model = build_encoder_decoder(
        24,
        hidden_size=32,
        encoder_layers=2,
        decoder_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_positions=40,
        dropout=0.0,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=START,
        norm_position=norm_position,
        initializer_range=0.3,
    ).eval()
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn(tensor.shape, generator=g))
    return model


def _source() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor(
        [
            [5, 6, 7, 8, 9, 10, 11],
            [9, 10, 11, 12, 0, 0, 0],
            [12, 13, 0, 0, 0, 0, 0],
            [20, 4, 7, 7, 19, 0, 0],
        ]
    )
    return src, (src != PAD).long()


@pytest.mark.parametrize("norm_position", ["post", "pre"])
@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize(("max_length", "eos", "seed"), [(12, 3, 0), (6, 12, 1), (20, 8, 2)])
def test_generate_with_cache_gives_the_tokens_of_full_recompute(
    norm_position: str, num_beams: int, max_length: int, eos: int, seed: int
) -> None:
    model = _model(norm_position, seed)
    src, mask = _source()
    generate = partial(
        model.generate, src, mask, max_length=max_length, num_beams=num_beams, eos_token_id=eos
    )
    cached = generate()
    reference = generate(use_cache=False)
    assert cached == reference
    assert len(cached) == 4
    assert all(1 <= len(row) <= max_length for row in cached)
    assert len({tuple(row) for row in cached}) > 1  # the source matters


def test_cases_above_end_early_and_run_to_max_length() -> None:
    # Guard the parametrisation: some rows stop at the end token, others hit max_length.
    ends, full = 0, 0
    src, mask = _source()
    for max_length, eos, seed in [(12, 3, 0), (6, 12, 1), (20, 8, 2)]:
        for norm_position in ("post", "pre"):
            model = _model(norm_position, seed)
            for row in model.generate(src, mask, max_length=max_length, eos_token_id=eos):
                ends += row[-1] == eos and len(row) < max_length
                full += len(row) == max_length
    assert ends >= 2 and full >= 2, (ends, full)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_step_logits_equal_full_recompute_at_every_step(norm_position: str) -> None:
    model = _model(norm_position)
    src, mask = _source()
    g = torch.Generator().manual_seed(5)
    prefix = torch.randint(4, 24, (4, 15), generator=g)
    prefix[:, 0] = START
    with torch.no_grad():
        memory = model.encode(src, mask).last_hidden_state
        _, full = model.decode(prefix, memory, mask)  # (B, T, V)
        cache = model.init_decoder_cache(memory, mask)
        for t in range(prefix.shape[1]):
            logits, cache = model.decode_step(prefix[:, t : t + 1], cache)
            assert cache.length == t + 1
            torch.testing.assert_close(logits[:, 0], full[:, t], atol=1e-5, rtol=0)
        # Several tokens in one step (a forced prefix), then one at a time.
        cache = model.init_decoder_cache(memory, mask)
        logits, cache = model.decode_step(prefix[:, :6], cache)
        torch.testing.assert_close(logits, full[:, :6], atol=1e-5, rtol=0)
        logits, cache = model.decode_step(prefix[:, 6:9], cache)
        torch.testing.assert_close(logits, full[:, 6:9], atol=1e-5, rtol=0)
        logits, cache = model.decode_step(prefix[:, 9:10], cache)
        torch.testing.assert_close(logits[:, 0], full[:, 9], atol=1e-5, rtol=0)


def test_reorder_selects_rows_of_self_and_cross_attention() -> None:
    # Rows of different sources (cross keys of batch N): reordering must move both.
    model = _model()
    src, mask = _source()
    g = torch.Generator().manual_seed(6)
    prefix = torch.randint(4, 24, (4, 6), generator=g)
    prefix[:, 0] = START
    index = torch.tensor([2, 0, 0, 3, 1])
    with torch.no_grad():
        memory = model.encode(src, mask).last_hidden_state
        cache = model.init_decoder_cache(memory, mask)
        _, cache = model.decode_step(prefix[:, :5], cache)
        cache = cache.reorder(index)
        assert cache.num_rows == 5
        logits, _ = model.decode_step(prefix[index, 5:6], cache)
        _, full = model.decode(prefix[index], memory[index], mask[index])
    torch.testing.assert_close(logits[:, 0], full[:, 5], atol=1e-5, rtol=0)


def test_beam_search_reorders_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model("post", seed=0)
    src, mask = _source()
    generate = partial(model.generate, src, mask, max_length=12, num_beams=4)
    reference = generate(use_cache=False)

    original = DecoderCache.reorder
    calls: list[tuple[int, list[int]]] = []

    def recording(self: DecoderCache, index: torch.Tensor) -> DecoderCache:
        calls.append((self.num_rows, index.tolist()))
        return original(self, index)

    monkeypatch.setattr(DecoderCache, "reorder", recording)
    assert generate() == reference
    # Beams were re-selected: with the row count unchanged, some surviving beam continues
    # another row than its own, and some row continues in two beams.
    steady = [index for rows, index in calls if len(index) == rows]
    assert any(index != list(range(len(index))) for index in steady)
    assert any(len(set(index)) < len(index) for index in steady)

    def keep_slots(self: DecoderCache, index: torch.Tensor) -> DecoderCache:
        # A cache that keeps row r in slot r instead of following the parents: wrong tokens.
        return original(self, torch.arange(len(index)).clamp(max=self.num_rows - 1))

    monkeypatch.setattr(DecoderCache, "reorder", keep_slots)
    assert generate() != reference


@pytest.mark.parametrize("use_cache", [True, False])
def test_batched_beam_search_equals_one_source_at_a_time(use_cache: bool) -> None:
    model = _model("pre", seed=1)
    src, mask = _source()
    batched = model.generate(src, mask, max_length=10, num_beams=3, use_cache=use_cache)
    alone = [
        model.generate(
            src[i : i + 1], mask[i : i + 1], max_length=10, num_beams=3, use_cache=use_cache
        )[0]
        for i in range(len(src))
    ]
    assert batched == alone


def test_cache_errors_name_the_fix() -> None:
    model = _model()
    src, mask = _source()
    with torch.no_grad():
        memory = model.encode(src, mask).last_hidden_state
        cache = model.init_decoder_cache(memory, mask)
        with pytest.raises(ValueError, match="reorder"):
            model.decode_step(torch.full((3, 1), START), cache)
        with pytest.raises(ValueError, match="max_positions"):
            model.decode_step(torch.full((4, 41), START), cache)
        with pytest.raises(ValueError, match="1-D"):
            cache.reorder(torch.zeros(2, 2, dtype=torch.long))


def test_greedy_with_cache_matches_transformers_bart() -> None:
    transformers = pytest.importorskip("transformers")
    from ptm_core.checkpoints import fill_shared_tensors
    from ptm_core.checkpoints.hf.bart import hf_bart_to_ptm, hf_config_to_seq2seq

    config = transformers.BartConfig(
        vocab_size=97,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=40,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        forced_eos_token_id=None,
    )
    torch.manual_seed(0)
    hf = transformers.BartForConditionalGeneration(config).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in hf.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.2 * torch.randn(tensor.shape, generator=g))
        # Small token vectors against the rest: fewer repeats of the input token.
        hf.model.shared.weight.mul_(0.3)
        hf.final_logits_bias[0, 2] = 0.0  # no bias for or against the end token
    ours_config = hf_config_to_seq2seq(hf.config.to_dict(), source="test")
    ours = EncoderDecoderModel(ours_config).eval()
    ours.load_state_dict(
        fill_shared_tensors(ours, hf_bart_to_ptm(dict(hf.state_dict()), ours_config))
    )

    ids = torch.randint(3, 97, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 1  # BART pad id
    generation = transformers.GenerationConfig(
        max_new_tokens=16,
        num_beams=1,
        do_sample=False,
        decoder_start_token_id=2,
        eos_token_id=2,
        pad_token_id=1,
        bos_token_id=0,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
        no_repeat_ngram_size=0,
        min_length=0,
    )
    with torch.no_grad():
        expected = hf.generate(input_ids=ids, attention_mask=mask, generation_config=generation)
    got = ours.generate(ids, mask, max_length=16)
    want = []
    for row in expected[:, 1:].tolist():
        want.append(row[: row.index(2) + 1] if 2 in row else row)
    assert got == want
    assert any(row[-1] == 2 for row in got)  # a row ends early
    assert any(len(set(row)) > 1 for row in got)  # and some row is not one repeated token
