"""T5 span corruption: round trip, 15% noise, mean span 3 (Raffel et al., 2020)."""

from __future__ import annotations

from types import MappingProxyType

import torch
from cases import Seq2SeqObjectiveTestCase

from ptm_core.objectives.t5_span import (
    T5SpanCorruptionObjective,
    random_spans_noise_mask,
    t5_reconstruct,
    t5_span_corruption,
)
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=500, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
SENTINELS = list(range(1000, 1064))


def test_input_target_pair_round_trips_to_the_original() -> None:
    g = torch.Generator().manual_seed(0)
    for n in (5, 17, 64, 200):
        ids = torch.randint(10, 500, (n,), generator=g).tolist()
        inputs, targets = t5_span_corruption(ids, SENTINELS, g)
        assert t5_reconstruct(inputs, targets, SENTINELS) == ids
        used = [t for t in inputs if t in SENTINELS]
        assert used == SENTINELS[: len(used)]  # distinct, in order
        assert targets[0] == SENTINELS[0] and targets[-1] == SENTINELS[len(used)]


def test_noise_rate_and_mean_span_length() -> None:
    g = torch.Generator().manual_seed(1)
    noisy = total = 0
    spans: list[int] = []
    for _ in range(300):
        n = int(torch.randint(64, 257, (1,), generator=g))
        mask = random_spans_noise_mask(n, g)
        noisy += sum(mask)
        total += n
        run = 0
        for flag in [*mask, False]:
            if flag:
                run += 1
            elif run:
                spans.append(run)
                run = 0
    assert abs(noisy / total - 0.15) < 0.01, noisy / total
    mean = sum(spans) / len(spans)
    assert abs(mean - 3.0) < 0.2, mean
    assert len(set(spans)) > 3  # lengths vary, not all 3


def test_objective_uses_sentinels_beyond_the_vocabulary() -> None:
    objective = T5SpanCorruptionObjective(VOCAB, num_sentinels=8, max_length=64)
    assert objective.extra_tokens == 8 and objective.sentinel_ids[0] == VOCAB.vocab_size
    source = [list(range(10, 40)), list(range(40, 60))]
    example = objective.make_example(source, torch.Generator().manual_seed(0))
    assert example["input_ids"][-1] == VOCAB.sep_id and example["labels"][-1] == VOCAB.sep_id
    assert example["decoder_input_ids"] == [VOCAB.cls_id, *example["labels"][:-1]]
    restored = t5_reconstruct(
        example["input_ids"][:-1], example["labels"][:-1], objective.sentinel_ids
    )
    assert restored == list(range(10, 60))


class TestT5SpanCorruptionContract(Seq2SeqObjectiveTestCase):
    objective_cls = T5SpanCorruptionObjective
    vocab = VOCAB
    kwargs = MappingProxyType({"num_sentinels": 8, "max_length": 32})
