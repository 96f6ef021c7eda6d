"""Peak memory of training steps for one implementation, in a fresh process.

    python -m benchmarks.memory --impl ptm --size mini

On CPU: the growth of the process's peak RSS over the training steps (after the model,
optimizer and batch exist); on CUDA: ``torch.cuda.max_memory_allocated``. Printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import resource

import torch

from benchmarks.bert_pair import build_pair, hf_inputs, make_batch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=["ptm", "transformers"], required=True)
    parser.add_argument("--size", default="mini")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(2)
    device = torch.device(args.device)
    pair = build_pair(args.size)
    model = (pair.ours if args.impl == "ptm" else pair.theirs).to(device).train()
    batch = {k: v.to(device) for k, v in make_batch(args.batch, args.length).items()}
    inputs = batch if args.impl == "ptm" else hf_inputs(batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(args.steps):
        with autocast:
            loss = model(inputs).loss if args.impl == "ptm" else model(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(json.dumps({"impl": args.impl, "size": args.size, "peak_mb": peak_mb}))


if __name__ == "__main__":
    main()
