"""The CPU's measured bf16 matrix-multiply peak, to set a speed figure against the limit.

A training step cannot run faster than its matrix products allow. The product of
BERT-base's feed-forward shape (``(M, 768) @ (768, 3072)``) in bf16, timed here, is about
as fast as this CPU multiplies; a step's executed FLOP/s as a share of it says how much
of the machine a library uses.

    python -m benchmarks.gemm_peak --threads 1,2
"""

from __future__ import annotations

import argparse
import time

import torch

ROWS, HIDDEN, INTERMEDIATE = 2048, 768, 3072


def gemm_peak(threads: int, *, repeats: int = 20, dtype: torch.dtype = torch.bfloat16) -> float:
    """GFLOP/s of the best of ``repeats`` ``(2048, 768) @ (768, 3072)`` products in
    ``dtype`` (bf16 unless told) on ``threads`` threads (torch's thread count is restored
    afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(ROWS, HIDDEN, generator=gen).to(dtype)
        b = torch.randn(HIDDEN, INTERMEDIATE, generator=gen).to(dtype)
        for _ in range(3):
            a @ b
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)
    return 2 * ROWS * HIDDEN * INTERMEDIATE / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    args = parser.parse_args()
    for threads in (int(t) for t in args.threads.split(",")):
        print(f"{threads} thread(s): {gemm_peak(threads):.0f} GFLOP/s bf16")


if __name__ == "__main__":
    main()
