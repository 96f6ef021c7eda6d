"""Peak memory of training steps for one implementation, in a fresh process.

    python -m benchmarks.memory --impl ptm --size mini

On CPU: the peak resident memory during the training steps above the resident memory
before them (the model, optimizer and batch already exist; the kernel's high-water mark is
reset through /proc/self/clear_refs so model construction does not count); with
``--whole``, the whole process's peak (``VmHWM``: interpreter, libraries, model, optimizer
and steps), which is what a user's machine must hold. On CUDA:
``torch.cuda.max_memory_allocated``. ``--precision default`` runs each library in its own
default: ptm in what ``trainer.precision=auto`` picks (bf16 autocast on a CPU with bf16
units), transformers in fp32 (the Trainer's default). ``--alone`` builds only the measured
side's model, importing only its own library (:func:`benchmarks.bert_pair.build_alone`),
with the batch read from ``--batch-file``: the process then holds what a user of that
library holds, not the other library and a second copy of the weights. Printed as JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys

import torch

from benchmarks.bert_pair import (
    build_alone,
    build_pair,
    hf_inputs,
    hf_optimizer,
    make_batch,
    ptm_optimizer,
)
from benchmarks.peak_rss import reset_peak_rss, status_kb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=["ptm", "transformers"], required=True)
    parser.add_argument("--size", default="mini")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--precision",
        choices=["equal", "default"],
        default="equal",
        help="equal: fp32 on CPU, bf16 autocast on CUDA, both sides; default: each library's",
    )
    parser.add_argument("--whole", action="store_true", help="whole-process peak (CPU)")
    parser.add_argument(
        "--alone", action="store_true", help="build only this side's model, with its library only"
    )
    parser.add_argument("--batch-file", help="--alone: the batch, saved by torch.save")
    args = parser.parse_args()
    torch.set_num_threads(2)
    device = torch.device(args.device)
    if args.alone:
        if not args.batch_file:
            parser.error("--alone needs --batch-file (make_batch would import ptm)")
        model = build_alone(args.impl, args.size).to(device).train()
        batch = torch.load(args.batch_file, weights_only=True)
    else:
        pair = build_pair(args.size)
        model = (pair.ours if args.impl == "ptm" else pair.theirs).to(device).train()
        del pair
        gc.collect()
        batch = make_batch(args.batch, args.length)
    batch = {k: v.to(device) for k, v in batch.items()}
    inputs = batch if args.impl == "ptm" else hf_inputs(batch)
    # Each library's default optimizer, as in the timed training benchmark.
    optimizer = (ptm_optimizer if args.impl == "ptm" else hf_optimizer)(model, 1e-4)
    bf16 = device.type == "cuda"
    if args.precision == "default" and device.type == "cpu" and args.impl == "ptm":
        from ptm_core.training.precision import resolve_precision

        bf16 = resolve_precision("auto", device) == torch.bfloat16
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    before = reset_peak_rss()
    for _ in range(args.steps):
        with autocast:
            loss = model(inputs).loss if args.impl == "ptm" else model(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = (status_kb("VmHWM") - (0 if args.whole else before)) / 1024
    print(
        json.dumps(
            {
                "impl": args.impl,
                "size": args.size,
                "peak_mb": peak_mb,
                "precision": "bf16 autocast" if bf16 else "fp32",
                "whole_process": args.whole,
                "alone": args.alone,
                "loaded": {name: name in sys.modules for name in ("ptm_core", "transformers")},
            }
        )
    )


if __name__ == "__main__":
    main()
