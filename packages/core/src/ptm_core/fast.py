"""Fast paths that keep the maths: compiled, weight-frozen inference; bf16 linear weights.

:func:`bf16_linear_weights` stores the linear layers of a model that runs under bf16
autocast in bf16 once, instead of autocast casting every weight at every call; the outputs
are bit-identical (``ptm predict --bf16`` does it).

:func:`compile_for_inference` runs an encoder (or any module) through ``torch.compile``
(Inductor) with *freezing*: the weights are folded into the compiled graph as constants,
which lets Inductor pre-pack the linear layers for oneDNN/MKL and fuse the element-wise
work (bias + GELU, residual + LayerNorm, the mask) into a few generated kernels. The
outputs equal the eager module's to float rounding (checked to ``1e-5`` in
``tests/core/test_fast_path.py``). On two CPU threads at batch 8 x 128 it measured 1.04x
(BERT-base) and 1.08x (mini) against the eager forward of ``transformers`` (eager ptm:
1.03x / 1.06x): GEMMs are ~80% of the forward on both sides and are not made faster, only
the element-wise remainder is (see docs/guides/speed.md).

Freezing is for inference only: the compiled graph runs without gradients, and weights
changed after the first call (fine-tuning, ``load_state_dict``) are **not** seen; compile
again after changing them. The first call compiles (tens of seconds on CPU; a new input
shape compiles again, after which batch and length are treated as dynamic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch._inductor.config as inductor_config
from torch import nn


class CompiledInference:
    """A module compiled for inference; call it like the module itself.

    Every call runs under :func:`torch.no_grad`. Built by :func:`compile_for_inference`.

    Attributes:
        module: the eager module (in eval mode), kept for its attributes and weights.
    """

    def __init__(
        self, module: nn.Module, compiled: Callable[..., Any], inductor_config: dict[str, Any]
    ) -> None:
        self.module = module
        self._compiled = compiled
        self._inductor_config = inductor_config

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.module.training:
            raise RuntimeError(
                f"{type(self.module).__name__} was switched to training mode after "
                "compile_for_inference; the compiled graph is inference-only (dropout off, "
                "weights frozen). Call .eval() on it again, or train the eager module."
            )
        # Inductor reads ``freezing`` when it compiles, which is at the first call (and at
        # a recompile for a new shape), not at ``torch.compile``; ``torch.compile(options=)``
        # does not reach it, so the setting is applied around every call instead.
        with torch.no_grad(), inductor_config.patch(self._inductor_config):
            return self._compiled(*args, **kwargs)


def compile_for_inference(
    module: nn.Module,
    *,
    freezing: bool = True,
    max_autotune: bool = False,
    dynamic: bool | None = None,
) -> CompiledInference:
    """Compile ``module`` (e.g. a :class:`~ptm_core.TransformerEncoder`) for fast inference.

    Puts the module in eval mode and wraps ``torch.compile(module)`` so that every call
    runs without gradients. Same maths as the eager module (outputs equal to float
    rounding); compilation happens at the first call.

    Args:
        module: the model to serve; its weights must not change afterwards (with
            ``freezing``).
        freezing: fold the weights into the graph as constants (Inductor freezing), so
            linear layers are pre-packed for oneDNN and constant work is done once.
        max_autotune: let Inductor benchmark GEMM implementations (its C++ templates
            against oneDNN/MKL) at compile time; compiles much longer, may be faster.
        dynamic: passed to ``torch.compile``; ``None`` compiles for the first shape and
            switches to dynamic batch/length when a second shape arrives.

    Returns:
        A :class:`CompiledInference`; call it with the module's own arguments.

    Raises:
        RuntimeError: at the first call, when Inductor cannot compile on this machine
            (no C++ compiler); use the eager module there.

    Example:
        >>> fast = compile_for_inference(TransformerEncoder.from_pretrained(path))
        >>> fast(input_ids, attention_mask=mask).last_hidden_state
    """
    module.eval()
    compiled = torch.compile(module, dynamic=dynamic)
    return CompiledInference(module, compiled, {"freezing": freezing, "max_autotune": max_autotune})


def bf16_linear_weights(model: nn.Module) -> int:
    """Store the weights and biases of ``model``'s :class:`~torch.nn.Linear` layers in bf16,
    for inference under bf16 autocast; returns how many layers were cast.

    Under ``torch.autocast(dtype=torch.bfloat16)`` every linear layer casts its fp32
    weight to bf16 at every call: on a CPU that copy is a large share of a forward over
    short sentences (1.08x BERT-mini, 1.11x BERT-base at batch 32 x 30 tokens when it is
    gone). Autocast would compute with exactly these bf16 values, so the outputs are
    bit-identical (``tests/core/test_fast_path.py``). Everything else (LayerNorm,
    embeddings, softmax) stays as autocast runs it. A linear layer whose weight is shared
    with a module that is not a linear layer (an MLM decoder tied to the word embeddings)
    is left in fp32, since casting it would change the embedding lookup. Inference only:
    training on the cast weights would update bf16 parameters.
    """
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    linear_weights = {id(m.weight) for m in linears}
    shared = {
        id(p)
        for m in model.modules()
        if not isinstance(m, nn.Linear)
        for p in m.parameters(recurse=False)
        if id(p) in linear_weights
    }
    cast = [m for m in linears if id(m.weight) not in shared and m.weight.dtype == torch.float32]
    for layer in cast:
        layer.to(torch.bfloat16)
    return len(cast)
