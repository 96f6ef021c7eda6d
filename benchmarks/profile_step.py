"""Where the CPU time of one step goes, ptm and transformers side by side.

    python -m benchmarks.profile_step --size base --mode train
    python -m benchmarks.profile_step --size base --mode inference
    python -m benchmarks.profile_step --size base --precision bf16   # ptm bf16 vs transformers bf16
    python -m benchmarks.profile_step --size base --mode serving --precision bf16

``--mode serving`` profiles the serving benchmark's arms (:mod:`benchmarks.serving`): ptm's
``TaskPredictor.predict`` (what ``ptm predict`` calls) against transformers'
``BertForSequenceClassification`` (sdpa) with its tokenizer, on the same 256 sentences of
the log-normal length spread in batches of 32, tokenization included on both sides.

Runs ``torch.profiler`` over a few steps of each implementation (same weights, batch and
optimizers as ``benchmarks.run``), alternating the two, and prints the self CPU time of
the ATen operators grouped by role (GEMM, dropout random numbers, element-wise, ...) as
ms per step and % of the step. Profiled steps are slower than timed ones; read the shares,
not the absolute times, and compare speeds with ``benchmarks.run`` only.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.bert_pair import build_pair, hf_inputs, hf_optimizer, make_batch, ptm_optimizer

# Operator -> role; everything else is "other".
ROLES: dict[str, tuple[str, ...]] = {
    "GEMM (linear, attention matmuls)": (
        "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "mkl::_mkl_linear",
    ),
    "attention kernel / softmax": (
        "aten::_softmax", "aten::_softmax_backward_data", "aten::_safe_softmax",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    ),
    "dropout random numbers (bernoulli_)": ("aten::bernoulli_",),
    "element-wise mul/add/div (dropout apply, residuals, grads)": (
        "aten::mul", "aten::add", "aten::add_", "aten::div", "aten::mul_", "aten::div_",
        "aten::masked_fill", "aten::where",
    ),
    "copies (bias pre-fill in addmm, layout changes)": (
        "aten::copy_", "aten::clone", "aten::contiguous",
    ),
    "GELU": ("aten::gelu", "aten::gelu_backward"),
    "LayerNorm": ("aten::native_layer_norm", "aten::native_layer_norm_backward"),
    "AdamW": ("aten::_fused_adamw_",),
    "bias gradients (sum)": ("aten::sum",),
    "loss (log_softmax, nll)": (
        "aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss_forward",
        "aten::nll_loss_backward",
    ),
    "embedding lookup / backward": (
        "aten::index_select", "aten::embedding_dense_backward", "aten::index_add_",
    ),
    "compiled (Inductor) kernels": (),
}  # fmt: skip


def _role(op: str) -> str:
    if op.startswith("## Call CompiledFxGraph"):
        return "compiled (Inductor) kernels"
    return next((role for role, ops in ROLES.items() if op in ops), "other")


def steps(size: str, mode: str, bf16: bool = False) -> dict[str, Callable[[], object]]:
    """One step of each implementation: training (forward + backward + AdamW) or inference.

    ``bf16`` runs both forwards under CPU bf16 autocast (fp32 weights and AdamW), as
    ``trainer.precision=bf16`` does.
    """
    if mode == "serving":
        return serving_steps(size, bf16)
    pair = build_pair(size)
    data = make_batch(8, 128)
    if mode == "inference":
        encoder, bert = pair.encoder.eval(), pair.theirs.bert.eval()
        ids, mask = data["input_ids"], data["attention_mask"]

        def ours_inference() -> None:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                encoder(ids, attention_mask=mask)

        def theirs_inference() -> None:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                bert(input_ids=ids, attention_mask=mask)

        return {"ptm": ours_inference, "transformers": theirs_inference}
    ours, theirs = pair.ours.train(), pair.theirs.train()
    hf = hf_inputs(data)
    opt_ours, opt_theirs = ptm_optimizer(ours, 1e-5), hf_optimizer(theirs, 1e-5)

    def autocast() -> torch.autocast:
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    def ours_train() -> None:
        with autocast():
            loss = ours(data).loss
        loss.backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def theirs_train() -> None:
        with autocast():
            loss = theirs(**hf).loss
        loss.backward()
        opt_theirs.step()
        opt_theirs.zero_grad(set_to_none=True)

    return {"ptm": ours_train, "transformers": theirs_train}


def serving_steps(size: str, bf16: bool) -> dict[str, Callable[[], object]]:
    """The serving benchmark's ptm and transformers arms on 256 sentences."""
    import tempfile
    from pathlib import Path

    from benchmarks.serving import build, hf_arm, ptm_arm, sentences

    root = Path(tempfile.mkdtemp(prefix="ptm-profile-serving-"))
    final, hf, _onnx, _int8 = build(size, root)
    texts = sentences(256)
    ours, theirs = ptm_arm(final, bf16=bf16, texts=texts), hf_arm(hf, bf16=bf16)
    return {"ptm": lambda: ours(texts), "transformers": lambda: theirs(texts)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="base", choices=["mini", "base"])
    parser.add_argument("--mode", default="train", choices=["train", "inference", "serving"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    runs = steps(args.size, args.mode, bf16=args.precision == "bf16")
    for step in runs.values():  # warm-up (optimizer state, allocator)
        step()
        step()
    per_op: dict[str, dict[str, float]] = {name: defaultdict(float) for name in runs}
    for _ in range(args.steps):
        for name, step in runs.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step()
            for event in prof.key_averages():
                per_op[name][event.key] += event.self_cpu_time_total / 1e3 / args.steps
    for name, ops in per_op.items():
        total = sum(ops.values())
        roles: dict[str, float] = defaultdict(float)
        for op, ms in ops.items():
            roles[_role(op)] += ms
        print(
            f"\n{name} {args.size} {args.mode} {args.precision}: {total:.0f} ms per step (profiled)"
        )
        for role, ms in sorted(roles.items(), key=lambda item: -item[1]):
            if ms >= 0.005 * total:
                print(f"  {role:60s} {ms:8.1f} ms {100 * ms / total:5.1f}%")
        top = sorted(ops.items(), key=lambda item: -item[1])[:8]
        print("  top operators: " + ", ".join(f"{op} {100 * ms / total:.1f}%" for op, ms in top))


if __name__ == "__main__":
    main()
