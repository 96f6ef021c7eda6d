"""LoRA and IA3 on ptm's named ``nn.Linear`` layers, through Hugging Face ``peft``.

``peft.inject_adapter_in_model`` works on any torch module: it wraps the linears whose
names end with a target name. ptm's names (:data:`DEFAULT_TARGETS`): ``query``/``key``/
``value`` (the fused projections split by :mod:`ptm_core.peft.qkv`) and ``out_proj`` of
self-attention and of an encoder-decoder's cross-attention, ``query_proj``/``key_proj``/
``value_proj`` of XLNet's relative attention, ``w_in``/``w_gate``/``w_out`` of the
feed-forward blocks.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ptm_core.peft.config import PeftConfig
from ptm_core.peft.qkv import split_qkv

# LoRA: every attention and feed-forward projection (Hu et al., 2022 adapt W_q, W_v;
# QLoRA and most recipes since adapt every linear of the block).
DEFAULT_TARGETS: tuple[str, ...] = (
    "query",
    "key",
    "value",
    "out_proj",
    "query_proj",
    "key_proj",
    "value_proj",
    "w_in",
    "w_gate",
    "w_out",
)
# IA3 (Liu et al., 2022): rescale keys, values and the feed-forward's inner activations
# (the input of its output projection).
IA3_TARGETS: tuple[str, ...] = ("key", "value", "key_proj", "value_proj", "w_out")
IA3_FEEDFORWARD: tuple[str, ...] = ("w_out",)
# A wrapper encoder with linears of its own (ERNIE-THU's fusion layers) names them in these
# class attributes: LoRA's defaults add the first, IA3's (as feed-forward outputs) the second.
LORA_EXTRA_ATTRIBUTE = "peft_lora_targets"
IA3_EXTRA_ATTRIBUTE = "peft_ia3_feedforward"


def require_peft() -> Any:
    """The ``peft`` module, or one line naming the extra to install."""
    try:
        import peft
    except ImportError:
        raise ImportError(
            "finetune.peft=lora/ia3 needs the Hugging Face peft library: "
            "pip install 'ptm-core[peft]' (or uv sync --extra peft)"
        ) from None
    return peft


def library_config(config: PeftConfig, module: nn.Module) -> Any:
    """The ``peft`` ``LoraConfig``/``IA3Config`` for ``config`` on ``module``'s names."""
    peft = require_peft()
    names = {
        name.rsplit(".", 1)[-1] for name, m in module.named_modules() if isinstance(m, nn.Linear)
    }
    if config.target_modules is not None:
        missing = sorted(set(config.target_modules) - names)
        if missing:
            raise ValueError(
                f"finetune.peft_target_modules: {', '.join(missing)} name no nn.Linear of this "
                f"encoder; its linears are: {', '.join(sorted(names))}"
            )
    if config.method == "lora":
        defaults = (*DEFAULT_TARGETS, *getattr(module, LORA_EXTRA_ATTRIBUTE, ()))
        targets = list(config.target_modules or [t for t in defaults if t in names])
        return peft.LoraConfig(
            r=config.r,
            lora_alpha=config.alpha,
            lora_dropout=config.dropout,
            target_modules=targets,
            bias="none",
        )
    feedforward = (*IA3_FEEDFORWARD, *getattr(module, IA3_EXTRA_ATTRIBUTE, ()))
    defaults = (*IA3_TARGETS, *feedforward)
    targets = list(config.target_modules or [t for t in defaults if t in names])
    return peft.IA3Config(
        target_modules=targets,
        feedforward_modules=[t for t in feedforward if t in targets],
    )


def inject(encoder: nn.Module, config: PeftConfig) -> nn.Module:
    """Wrap ``encoder``'s target linears with ``config``'s LoRA or IA3 (in place).

    Self-attention's fused query/key/value projection is split first, so each is adapted
    on its own as in transformers' BERT. Only the adapter's parameters keep
    ``requires_grad``.

    Returns:
        ``encoder``, adapted.
    """
    peft = require_peft()
    split_qkv(encoder)
    peft.inject_adapter_in_model(library_config(config, encoder), encoder)
    for name, param in encoder.named_parameters():
        param.requires_grad_(is_adapter_parameter(name))
    return encoder


def is_adapter_parameter(name: str) -> bool:
    """Whether a parameter name belongs to a peft adapter (``lora_A``, ``ia3_l``...)."""
    return any(part.startswith(("lora_", "ia3_")) for part in name.split("."))


def merge_adapters(module: nn.Module) -> int:
    """Fold every LoRA/IA3 adapter under ``module`` into its base linear and unwrap it.

    Returns:
        How many layers were merged.
    """
    from peft.tuners.tuners_utils import BaseTunerLayer

    merged = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, BaseTunerLayer):
                child.merge()
                setattr(parent, name, child.get_base_layer())
                merged += 1
    return merged
