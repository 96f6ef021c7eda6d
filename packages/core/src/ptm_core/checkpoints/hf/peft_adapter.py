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
"""

from __future__ import annotations

import re
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
        raise CheckpointError(
            f"adapter module {module!r} has no transformers BERT-layout counterpart; export "
            "with the adapter merged (leave --peft-adapter out)"
        )
    return f"{prefix}encoder.layer.{found.group(1)}.{inner}"


def hf_adapter_state(state: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """ptm adapter tensors (names under the encoder) -> peft's file names."""
    renamed: dict[str, Tensor] = {}
    for name, tensor in state.items():
        found = _ADAPTER_TENSOR.match(name)
        if found is None:
            raise CheckpointError(
                f"adapter tensor {name!r} is not a LoRA/IA3 tensor; only LoRA and IA3 adapters "
                "export as a peft adapter folder"
            )
        module, kind, weight = found.groups()
        renamed[f"base_model.model.{hf_module_name(module, prefix)}.{kind}{weight or ''}"] = (
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

    Returns:
        The transformers module names adapted.
    """
    from ptm_core.peft.library import require_peft

    peft = require_peft()
    tensors = hf_adapter_state(state, prefix)
    modules = sorted(
        {
            hf_module_name(found.group(1), prefix)
            for name in state
            if (found := _ADAPTER_TENSOR.match(name)) is not None
        }
    )
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
            feedforward_modules=[
                m for m in modules if m.endswith(".output.dense") and ".attention." not in m
            ],
            base_model_name_or_path=base,
        )
    config.save_pretrained(str(directory))
    save_file(tensors, str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    return modules
