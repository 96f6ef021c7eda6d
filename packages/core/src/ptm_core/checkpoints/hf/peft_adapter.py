"""A ptm LoRA/IA3 adapter as a Hugging Face ``peft`` adapter folder.

``peft.PeftModel.from_pretrained(model, folder)`` reads ``adapter_config.json`` and
``adapter_model.safetensors`` (tensor names ``base_model.model.<module>.lora_A.weight``,
the adapter name left out). ptm's adapted linears have transformers' BERT-layout
counterparts (BERT, RoBERTa, XLM-R, ELECTRA):

=============================================  ==========================================
ptm module                                     transformers module
=============================================  ==========================================
``layers.i.attention.qkv_proj.{query,key,value}``  ``<p>encoder.layer.i.attention.self.{...}``
``layers.i.attention.out_proj``                ``<p>encoder.layer.i.attention.output.dense``
``layers.i.feed_forward.w_in``                 ``<p>encoder.layer.i.intermediate.dense``
``layers.i.feed_forward.w_out``                ``<p>encoder.layer.i.output.dense``
=============================================  ==========================================

(``<p>``: the task model's encoder prefix, ``bert.``, ``electra.``...).

An encoder-decoder's adapted linears (names under the
:class:`~ptm_core.encoders.encoder_decoder.EncoderDecoderModel`) map to BART's
(:func:`bart_module_name`: ``<p>{encoder,decoder}.layers.i.{self_attn,encoder_attn}.
{q,k,v,out}_proj``, ``fc1``, ``fc2``; ``<p>`` = ``model.``) or T5's
(:func:`t5_module_name`: ``{encoder,decoder}.block.i.layer.j.{SelfAttention,
EncDecAttention}.{q,k,v,o}``, ``DenseReluDense.{wi,wi_0,wi_1,wo}``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import Tensor

from ptm_core.checkpoints.io import CheckpointError

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_INSIDE_LAYER = {
    "attention.qkv_proj.query": "attention.self.query",
    "attention.qkv_proj.key": "attention.self.key",
    "attention.qkv_proj.value": "attention.self.value",
    "attention.out_proj": "attention.output.dense",
    "feed_forward.w_in": "intermediate.dense",
    "feed_forward.w_out": "output.dense",
}
_SEQ2SEQ_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(.+)$")
# ptm module inside an encoder-decoder layer -> BART's; encoder self-attention is
# "attention", the decoder's "self_attention".
_BART_LAYER = {
    **{
        f"{attention}.qkv_proj.{part}": f"self_attn.{part[0]}_proj"
        for attention in ("attention", "self_attention")
        for part in ("query", "key", "value")
    },
    "attention.out_proj": "self_attn.out_proj",
    "self_attention.out_proj": "self_attn.out_proj",
    "cross_attention.q_proj.query": "encoder_attn.q_proj",
    "cross_attention.kv_proj.key": "encoder_attn.k_proj",
    "cross_attention.kv_proj.value": "encoder_attn.v_proj",
    "cross_attention.out_proj": "encoder_attn.out_proj",
    "feed_forward.w_in": "fc1",
    "feed_forward.w_out": "fc2",
}
_T5_ATTENTION = {"qkv_proj.query": "q", "qkv_proj.key": "k", "qkv_proj.value": "v",
                 "out_proj": "o", "q_proj.query": "q", "kv_proj.key": "k",
                 "kv_proj.value": "v"}  # fmt: skip
# A peft tensor name: <module>.<adapter tensor>.<adapter name>[.weight]
_ADAPTER_TENSOR = re.compile(r"^(.+?)\.(lora_A|lora_B|ia3_l)\.default(\.weight)?$")


def hf_module_name(module: str, prefix: str) -> str:
    """The transformers name of a ptm encoder linear (see the module table).

    Raises:
        CheckpointError: the module has no BERT-layout counterpart.
    """
    found = _LAYER.match(module)
    inner = _INSIDE_LAYER.get(found.group(2)) if found else None
    if found is None or inner is None:
        raise _no_counterpart(module, "BERT-layout")
    return f"{prefix}encoder.layer.{found.group(1)}.{inner}"


def _no_counterpart(module: str, layout: str) -> CheckpointError:
    return CheckpointError(
        f"adapter module {module!r} has no transformers {layout} counterpart; export "
        "with the adapter merged (leave --peft-adapter out)"
    )


def bart_module_name(module: str, prefix: str = "model.") -> str:
    """The transformers BART name of an encoder-decoder linear (see the module docstring)."""
    found = _SEQ2SEQ_LAYER.match(module)
    inner = _BART_LAYER.get(found.group(3)) if found else None
    if found is None or inner is None:
        raise _no_counterpart(module, "BART")
    return f"{prefix}{found.group(1)}.layers.{found.group(2)}.{inner}"


def t5_module_name(module: str, *, gated: bool) -> str:
    """The transformers T5 name of an encoder-decoder linear (``gated``: T5 v1.1's
    ``wi_0``/``wi_1``)."""
    found = _SEQ2SEQ_LAYER.match(module)
    if found is None:
        raise _no_counterpart(module, "T5")
    side, index, inner = found.groups()
    block, (sublayer, _, rest) = f"{side}.block.{index}.layer", inner.partition(".")
    feed_forward = 2 if side == "decoder" else 1
    attention = {"attention": (0, "SelfAttention"), "self_attention": (0, "SelfAttention"),
                 "cross_attention": (1, "EncDecAttention")}.get(sublayer)  # fmt: skip
    if attention is not None and rest in _T5_ATTENTION:
        return f"{block}.{attention[0]}.{attention[1]}.{_T5_ATTENTION[rest]}"
    linears = {"w_gate": "wi_0", "w_in": "wi_1", "w_out": "wo"} if gated else {
        "w_in": "wi", "w_out": "wo"}  # fmt: skip
    if sublayer == "feed_forward" and rest in linears:
        return f"{block}.{feed_forward}.DenseReluDense.{linears[rest]}"
    raise _no_counterpart(module, "T5")


def hf_adapter_state(
    state: dict[str, Tensor], prefix: str, module_name: Callable[[str], str] | None = None
) -> dict[str, Tensor]:
    """ptm adapter tensors (names under the encoder) -> peft's file names (``module_name``:
    the ptm -> transformers module map; default: BERT's with ``prefix``)."""
    module_name = module_name or partial(hf_module_name, prefix=prefix)
    renamed: dict[str, Tensor] = {}
    for name, tensor in state.items():
        found = _ADAPTER_TENSOR.match(name)
        if found is None:
            raise CheckpointError(
                f"adapter tensor {name!r} is not a LoRA/IA3 tensor; only LoRA and IA3 adapters "
                "export as a peft adapter folder"
            )
        module, kind, weight = found.groups()
        renamed[f"base_model.model.{module_name(module)}.{kind}{weight or ''}"] = (
            tensor.detach().contiguous()
        )
    return renamed


def write_peft_adapter(
    directory: Path,
    state: dict[str, Tensor],
    settings: dict[str, Any],
    *,
    prefix: str,
    base: str,
    base_tensors: set[str],
    module_name: Callable[[str], str] | None = None,
) -> list[str]:
    """Write ``adapter_config.json`` + ``adapter_model.safetensors`` into ``directory``.

    Args:
        directory: an existing folder (inside an atomic write).
        state: the ptm adapter's tensors (:func:`~ptm_core.peft.adapter_state`).
        settings: its ``task.json`` ``peft`` record (method, r, alpha, dropout).
        prefix: the exported task model's encoder prefix (``bert.``).
        base: ``base_model_name_or_path`` to record (the exported model folder).
        base_tensors: the names in the exported model's ``model.safetensors``; every adapted
            module must be there.
        module_name: ptm module -> transformers module (default: BERT layout's with
            ``prefix``; :func:`bart_module_name`, :func:`t5_module_name`).

    Returns:
        The transformers module names adapted.
    """
    from ptm_core.peft.library import require_peft

    peft = require_peft()
    module_name = module_name or partial(hf_module_name, prefix=prefix)
    tensors = hf_adapter_state(state, prefix, module_name)
    ours = {found.group(1) for name in state if (found := _ADAPTER_TENSOR.match(name))}
    modules = sorted({module_name(module) for module in ours})
    # IA3 scales the input of a feed-forward output projection, the output of the others.
    feedforward = sorted({module_name(m) for m in ours if m.endswith("feed_forward.w_out")})
    missing = [m for m in modules if f"{m}.weight" not in base_tensors]
    if missing:
        raise CheckpointError(
            f"the exported model has no {missing[0]}.weight for the adapter; export with the "
            "adapter merged (leave --peft-adapter out)"
        )
    if settings["method"] == "lora":
        config = peft.LoraConfig(
            r=int(settings["r"]),
            lora_alpha=float(settings["alpha"]),
            lora_dropout=float(settings["dropout"]),
            target_modules=modules,
            bias="none",
            base_model_name_or_path=base,
        )
    else:
        config = peft.IA3Config(
            target_modules=modules,
            feedforward_modules=feedforward,
            base_model_name_or_path=base,
        )
    config.save_pretrained(str(directory))
    save_file(tensors, str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    return modules
