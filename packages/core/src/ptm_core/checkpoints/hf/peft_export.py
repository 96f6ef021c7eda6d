"""``ptm export --format hf`` of a parameter-efficient fine-tune's ``final/``.

Two shapes (a LoRA or IA3 ``final/``; prompts and prefixes have no weights to merge into):

- **merged** (the default): the adapter folded into the base weights
  (``W + alpha / r * B A`` for LoRA, the IA3 scales into the rows or columns they scale),
  then the usual ``...For<Task>`` folder: plain transformers, no ``peft`` needed to run it.
- **adapter** (``--peft-adapter``): the base weights with the trained head as the
  ``...For<Task>`` folder, and ``adapter/`` beside them, a ``peft`` adapter folder
  (``adapter_config.json`` + ``adapter_model.safetensors``, transformers' module names) that
  ``peft.PeftModel.from_pretrained(model, "<out>/adapter")`` loads onto it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.peft.config import LIBRARY_METHODS

ADAPTER_DIR = "adapter"


def prepare_peft_export(
    source: Path,
    record: dict[str, Any],
    *,
    adapter: bool,
    load: Callable[[Path, dict[str, Any]], Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Load the run as a plain task model to export: merged, or with the adapter taken off.

    Args:
        load: reads the ``final/`` into its task model with the adapter attached (default:
            :func:`~ptm_core.finetune.peft_folder.load_peft_task_model`; an encoder-decoder's
            is :func:`~ptm_core.finetune.seq2seq_folder.load_seq2seq_adapter`).

    Returns:
        ``(model, adapter_state)``: the task model with fused projections again, and the
        adapter's tensors (empty when merged).

    Raises:
        CheckpointError: a prompt/prefix run (nothing to merge, no transformers
            counterpart), naming the fix.
    """
    from ptm_core.finetune.peft_folder import load_peft_task_model
    from ptm_core.peft import adapter_state
    from ptm_core.peft.attach import backbone
    from ptm_core.peft.library import merge_adapters, require_peft
    from ptm_core.peft.qkv import fuse_qkv

    method = record["peft"].get("method")
    if method not in LIBRARY_METHODS:
        raise CheckpointError(
            f"{source}: a finetune.peft={method} model has no Hugging Face counterpart to "
            "export (its virtual tokens live inside ptm's encoder or encoder-decoder); score and predict it "
            "with ptm evaluate / ptm predict, or fine-tune with finetune.peft=lora"
        )
    require_peft()
    model = (load or load_peft_task_model)(source, record)
    network = backbone(model)
    state = adapter_state(model) if adapter else {}
    if adapter:
        from peft.tuners.tuners_utils import BaseTunerLayer

        for parent in list(network.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, BaseTunerLayer):
                    setattr(parent, name, child.get_base_layer())
    else:
        merge_adapters(network)
    fuse_qkv(network)
    for param in model.parameters():
        param.requires_grad_(True)
    return model, state


def write_adapter_folder(
    exported: Path,
    state: dict[str, Any],
    record: dict[str, Any],
    prefix: str,
    base: str,
    module_name: Callable[[str], str] | None = None,
) -> list[str]:
    """Write ``exported/adapter/`` for the task-model folder just written in ``exported``
    (``module_name``: ptm -> transformers module names; default: BERT's with ``prefix``)."""
    from ptm_core.checkpoints.hf.peft_adapter import write_peft_adapter

    folder = exported / ADAPTER_DIR
    folder.mkdir()
    names = set(load_file(str(exported / "model.safetensors")).keys())
    return write_peft_adapter(
        folder,
        state,
        record["peft"],
        prefix=prefix,
        base=base,
        base_tensors=names,
        module_name=module_name,
    )
