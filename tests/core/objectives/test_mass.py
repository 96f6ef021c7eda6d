"""MASS (Song et al., 2019): fragment masking, and its two limits k=1 (MLM) and k=m (LM)."""

from __future__ import annotations

from types import MappingProxyType

import torch
from cases import Seq2SeqObjectiveTestCase

from ptm_core.encoders import build_encoder_decoder
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.mass import MassObjective, mass_mask
from ptm_core.objectives.seq2seq_lm import pad_seq2seq
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=100, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
MASK = VOCAB.mask_id
IDS = list(range(10, 30))  # m = 20


def test_half_the_sentence_is_one_contiguous_fragment() -> None:
    g = torch.Generator().manual_seed(0)
    starts = set()
    for _ in range(50):
        example, u, k = mass_mask(IDS, MASK, g)
        assert k == 10
        starts.add(u)
        assert example["input_ids"][u : u + k] == [MASK] * k
        assert example["input_ids"][:u] == IDS[:u] and example["input_ids"][u + k :] == IDS[u + k :]
        predicted = [t for t, y in enumerate(example["labels"]) if y != IGNORE_INDEX]
        assert predicted == list(range(u, u + k))
        # Decoder inputs: the fragment shifted by one inside the fragment, [MASK] elsewhere.
        dec = example["decoder_input_ids"]
        assert dec[u] == MASK and dec[u + 1 : u + k] == IDS[u : u + k - 1]
        assert all(t == MASK for i, t in enumerate(dec) if not u < i < u + k)
    assert len(starts) > 5


def test_k1_reduces_to_masked_lm() -> None:
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        example, u, k = mass_mask(IDS, MASK, g, fragment_length=1)
        assert k == 1
        # Encoder: one [MASK] (an MLM input); decoder: no information at all, one label.
        assert example["input_ids"] == [MASK if t == u else x for t, x in enumerate(IDS)]
        assert example["decoder_input_ids"] == [MASK] * len(IDS)
        assert example["labels"] == [IDS[u] if t == u else IGNORE_INDEX for t in range(len(IDS))]
    # Two sentences that differ only at the masked position give identical model inputs:
    # the prediction is a function of the MLM-masked encoder input alone.
    first, u, _ = mass_mask(IDS, MASK, torch.Generator().manual_seed(5), fragment_length=1)
    other = [99 if t == u else x for t, x in enumerate(IDS)]
    second, u2, _ = mass_mask(other, MASK, torch.Generator().manual_seed(5), fragment_length=1)
    assert u2 == u
    assert first["input_ids"] == second["input_ids"]
    assert first["decoder_input_ids"] == second["decoder_input_ids"]
    assert first["labels"][u] == IDS[u] and second["labels"][u] == 99


def test_km_reduces_to_a_left_to_right_lm() -> None:
    example, u, k = mass_mask(IDS, MASK, torch.Generator().manual_seed(2), fragment_length=len(IDS))
    assert (u, k) == (0, len(IDS))
    assert example["input_ids"] == [MASK] * len(IDS)  # the encoder sees nothing
    assert example["decoder_input_ids"] == [MASK, *IDS[:-1]]  # teacher-forced LM, [MASK] = BOS
    assert example["labels"] == IDS
    # Model level: logits at t never depend on tokens after t (a standard causal LM).
    torch.manual_seed(0)
    model = build_encoder_decoder(
        100,
        hidden_size=16,
        encoder_layers=1,
        decoder_layers=1,
        num_heads=2,
        max_positions=32,
        dropout=0.0,
        pad_token_id=0,
    ).eval()
    changed = [*IDS[:10], *[50] * 10]
    example2, _, _ = mass_mask(changed, MASK, torch.Generator().manual_seed(2), fragment_length=20)
    batch = pad_seq2seq([example, example2], VOCAB.pad_id)
    with torch.no_grad():
        logits = model(batch["input_ids"], batch["decoder_input_ids"]).logits
    torch.testing.assert_close(logits[0, :11], logits[1, :11])
    assert not torch.allclose(logits[0, 11:], logits[1, 11:])


def test_objective_masks_about_half() -> None:
    objective = MassObjective(VOCAB, max_length=64)
    batch = objective.collate([[IDS[:8], IDS[8:]], [IDS[:7]]], torch.Generator().manual_seed(0))
    predicted = (batch["labels"] != IGNORE_INDEX).sum(dim=1).tolist()
    assert predicted == [10, 4]


class TestMassContract(Seq2SeqObjectiveTestCase):
    objective_cls = MassObjective
    vocab = VOCAB
    kwargs = MappingProxyType({"max_length": 32})
