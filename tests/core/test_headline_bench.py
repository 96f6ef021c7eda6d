"""The headline speed table (``python -m benchmarks.headline``) counts the FLOPs it divides.

Its "share of peak" column is executed FLOP/s over the measured GEMM peak, with the FLOPs
of a step counted by torch's ``FlopCounterMode``. These tests check that count against
the hand formula of :func:`benchmarks.gpu_suite.model_flops`, for ptm (MLM head on the
masked positions only) and for transformers (MLM head on every position).
"""

from __future__ import annotations

from benchmarks.bert_pair import SIZES, make_batch
from benchmarks.gpu_suite import model_flops
from benchmarks.headline import share, train_flops


def test_counted_training_flops_match_the_hand_formula() -> None:
    batch, length = 2, 32
    masked = int((make_batch(batch, length)["mlm_labels"] != -100).sum())
    hidden = SIZES["mini"]["hidden_size"]
    # Pooler (hidden x hidden) and NSP classifier (hidden x 2) on each sequence, x3 for
    # forward + backward: not part of model_flops, which counts the encoder and MLM head.
    heads = 6 * batch * (hidden * hidden + hidden * 2)
    counted = train_flops("mini", batch, length, None)
    assert counted["ptm"] == model_flops("mini", batch, length, masked) + heads
    assert counted["transformers"] == model_flops("mini", batch, length, batch * length) + heads
    assert masked < batch * length // 4  # the saving is ptm's masked-only head


def test_share_of_peak() -> None:
    # 1,000 tokens/s at 2 GFLOP per 100-token step = 20 GFLOP/s; of a 40 GFLOP/s peak: half.
    assert share(1000.0, 2 * 10**9, 100, 40.0) == 0.5


def test_memory_processes_build_the_same_models_alone() -> None:
    # The whole-process memory rows build one side only (no second library, no second
    # copy of the weights); the models must be the ones the speed rows time.
    from benchmarks.bert_pair import build_alone, build_pair

    pair = build_pair("mini")
    for impl, paired in (("ptm", pair.ours), ("transformers", pair.theirs)):
        alone = build_alone(impl, "mini")
        assert type(alone) is type(paired)
        shapes = {name: tuple(p.shape) for name, p in alone.state_dict().items()}
        assert shapes == {name: tuple(p.shape) for name, p in paired.state_dict().items()}
        assert repr(alone) == repr(paired)  # dropout rates, activations, norms
