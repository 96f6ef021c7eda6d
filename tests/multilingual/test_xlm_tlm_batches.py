"""TLM / MLM batches: layout, masking rates, smoothed selection, alternation."""

from __future__ import annotations

import torch

from ptm_core.objectives import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_multilingual import (
    XLMBatches,
    XLMMaskedLMObjective,
    build_mlm_streams,
    build_tlm_example,
    build_tlm_examples,
    select_weighted_positions,
    xlm_text_encoder,
)

VOCAB = VocabInfo(vocab_size=200, cls_id=0, sep_id=1, pad_id=2, unk_id=3, mask_id=4)
EN, FR = 0, 1


def _pairs(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ls, lt = torch.randint(3, 20, (2,), generator=rng).tolist()
        out.append(
            (
                torch.randint(5, 200, (ls,), generator=rng).tolist(),
                torch.randint(5, 200, (lt,), generator=rng).tolist(),
            )
        )
    return out


def _objective(**kwargs: object) -> XLMMaskedLMObjective:
    encoder = xlm_text_encoder(vocab_size=200, hidden_size=16, num_layers=1, num_heads=2)
    return build_objective(XLMMaskedLMObjective, encoder, VOCAB, **kwargs)  # type: ignore[arg-type]


def test_tlm_example_layout() -> None:
    ex = build_tlm_example([10, 11, 12], [20, 21], EN, FR, VOCAB, max_length=64)
    assert ex["input_ids"] == [0, 10, 11, 12, 1, 0, 20, 21, 1]
    # Positions restart at 0 on the second sentence; languages follow the sides.
    assert ex["position_ids"] == [0, 1, 2, 3, 4, 0, 1, 2, 3]
    assert ex["langs"] == [EN] * 5 + [FR] * 4
    assert ex["special_tokens_mask"] == [1, 0, 0, 0, 1, 1, 0, 0, 1]
    # The order is configurable: fr-en puts French first.
    rev = build_tlm_example([20, 21], [10, 11, 12], FR, EN, VOCAB, max_length=64)
    assert rev["langs"] == [FR] * 4 + [EN] * 5


def test_tlm_example_truncates_each_side() -> None:
    ex = build_tlm_example(list(range(5, 100)), list(range(5, 100)), EN, FR, VOCAB, 20)
    assert len(ex["input_ids"]) == 20
    assert ex["position_ids"][10] == 0 and ex["langs"][10] == FR


def test_mlm_streams_have_fixed_length_and_one_language() -> None:
    sentences = [list(range(5, 5 + n)) for n in (7, 3, 12, 9, 4)]
    streams = build_mlm_streams(sentences, FR, VOCAB, stream_length=8)
    assert all(len(s["input_ids"]) == 8 for s in streams[:-1])
    assert all(s["input_ids"][0] == VOCAB.cls_id for s in streams)
    tokens = [t for s in streams for t in s["input_ids"][1:]]
    assert tokens.count(VOCAB.sep_id) == len(sentences)  # one </s> after every sentence
    assert all(set(s["langs"]) == {FR} for s in streams)
    assert all(s["position_ids"] == list(range(len(s["input_ids"]))) for s in streams)


def test_tlm_masking_rates_both_sides_never_padding() -> None:
    objective = _objective()
    examples = build_tlm_examples(_pairs(400), EN, FR, VOCAB, max_length=48)
    batches = XLMBatches(
        {},
        {"en-fr": examples},
        64,
        pad_id=VOCAB.pad_id,
        transform=objective.collate,
        mlm_steps=0,
        tlm_steps=1,
        seed=3,
        batches_per_epoch=400,
    )
    candidates = selected = masked = randomised = kept = 0
    sides_hit = [0, 0]
    rows = 0
    for batch in batches.iter_batches(0):
        labels = batch["mlm_labels"]
        sel = labels != IGNORE_INDEX
        special = batch["special_tokens_mask"].bool()
        pad = batch["attention_mask"] == 0
        assert not (sel & special).any() and not (sel & pad).any()
        ids = batch["input_ids"]
        assert (ids[pad] == VOCAB.pad_id).all()
        candidates += int((~special).sum())
        selected += int(sel.sum())
        masked += int((ids[sel] == VOCAB.mask_id).sum())
        kept += int((ids[sel] == labels[sel]).sum())
        randomised += int(((ids[sel] != VOCAB.mask_id) & (ids[sel] != labels[sel])).sum())
        for lang in (EN, FR):
            sides_hit[lang] += int((sel & (batch["langs"] == lang) & ~pad).any(1).sum())
        rows += ids.shape[0]
    assert candidates >= 100_000
    print(f"TLM: {candidates} candidate tokens, selected {selected / candidates:.4f}")
    assert abs(selected / candidates - 0.15) < 0.005
    assert abs(masked / selected - 0.8) < 0.01
    # A random draw equals the original 1/195 of the time; it then counts as "kept".
    assert abs(randomised / selected - 0.1) < 0.01
    assert abs(kept / selected - 0.1) < 0.01
    # Both sentences receive masks (most rows on each side; a short side may get none).
    assert sides_hit[EN] / rows > 0.8 and sides_hit[FR] / rows > 0.8


def test_frequency_smoothed_selection_prefers_rare_tokens() -> None:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 7, (2000, 40), generator=generator)  # ids 5 (frequent) and 6 (rare)
    counts = torch.zeros(200, dtype=torch.long)
    counts[5], counts[6] = 10_000, 100
    objective = _objective(frequency_alpha=0.5, token_counts=counts.tolist())
    special = torch.zeros_like(ids, dtype=torch.bool)
    weights = objective.selection_weights
    assert weights is not None
    selected = select_weighted_positions(~special, weights[ids], 0.15, generator)
    assert abs(selected.float().mean().item() - 0.15) < 0.005
    rate_rare = selected[ids == 6].float().mean().item()
    rate_frequent = selected[ids == 5].float().mean().item()
    print(f"selection rate: rare {rate_rare:.3f}, frequent {rate_frequent:.3f}")
    assert rate_rare > 2.5 * rate_frequent  # weights 10x apart, capped by 15% per row
    _, labels = objective.corrupt(ids, special, generator)
    assert ((labels != IGNORE_INDEX) == (labels == ids)).all()


def test_alternation_follows_the_ratio() -> None:
    mlm = {"en": build_mlm_streams([[5, 6, 7]] * 20, EN, VOCAB, 8)}
    tlm = {"en-fr": build_tlm_examples(_pairs(10), EN, FR, VOCAB, 32)}
    batches = XLMBatches(
        mlm, tlm, 4, pad_id=VOCAB.pad_id, mlm_steps=2, tlm_steps=1, batches_per_epoch=10
    )
    kinds = [batches.kind(e, i) for e in range(2) for i in range(10)]
    assert kinds[:6] == ["mlm", "mlm", "tlm", "mlm", "mlm", "tlm"]
    assert kinds.count("tlm") == 6  # steps 2, 5, 8, 11, 14, 17 of 20
    batch = batches.batch(0, 2)
    assert batch["tlm"].all() and (batch["position_ids"][:, 0] == 0).all()
    # Deterministic: the same position gives the same batch.
    again = batches.batch(0, 2)
    assert torch.equal(batch["input_ids"], again["input_ids"])
