"""The GPU suite (``python -m benchmarks.gpu_suite``) stays one command away.

Without a GPU the suite cannot be timed here, so these tests run its code path on CPU
(``--smoke``: a mini model, 2 pairs) and check what it reports, not how fast anything is.
"""

from __future__ import annotations

import json

from benchmarks.bert_pair import VOCAB_SIZE
from benchmarks.gpu_suite import main, model_flops, peak_tflops


def test_model_flops_counts_dense_attention_and_masked_head() -> None:
    # BERT-base, batch 2 x 128, 10 masked positions, counted by hand.
    hidden, inner, layers, length, tokens = 768, 3072, 12, 128, 256
    dense = 6 * layers * (4 * hidden * hidden + 2 * hidden * inner) * tokens
    attention = 12 * layers * hidden * length * tokens
    head = 6 * hidden * (hidden + VOCAB_SIZE) * 10
    assert model_flops("base", 2, 128, 10) == dense + attention + head


def test_peak_is_none_on_cpu_unless_given() -> None:
    import torch

    assert peak_tflops(torch.device("cpu"), None) is None
    assert peak_tflops(torch.device("cpu"), 123.0) == 123.0


def test_smoke_run_reports_every_row(tmp_path) -> None:
    main(["--device", "cpu", "--smoke", "--pairs", "1", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "gpu_suite_smoke.json").read_text())
    (train,) = results["train"]
    assert train["size"] == "mini" and train["speedup_median"] > 0
    assert train["ptm_samples_per_s"] > 0 and train["transformers_samples_per_s"] > 0
    (unpadded,) = results["unpadding"]
    assert 0.2 < unpadded["padding"] < 0.5  # the ragged batch really has padding
    kinds = {row["kind"] for row in results["masks"]}
    assert {"padding", "causal", "kbert", "xlnet_content", "xlnet_query"} <= kinds
    # Every mask row was checked against the dense path before it was timed.
    assert all(row["max_abs_diff"] < 2e-2 for row in results["masks"])
    table = (tmp_path / "gpu_suite_smoke.md").read_text()
    assert "BERT-mini" in table and "kbert" in table
