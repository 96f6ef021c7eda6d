"""Parameter-efficient fine-tuning: LoRA and IA3 through Hugging Face ``peft`` on ptm's
named linears, soft prompts and prefixes through the encoder's seams.

``finetune.peft=lora|ia3|prompt|prefix`` (:class:`PeftConfig`) freezes the encoder and
trains the adapter and the task head (:func:`attach_peft`).
"""

from ptm_core.peft.attach import (
    TrainableParameters,
    adapter_state,
    attach_peft,
    count_trainable,
    is_adapter_tensor,
)
from ptm_core.peft.config import PEFT_METHODS, PeftConfig
from ptm_core.peft.prompts import PrefixAttention, SoftPromptEncoder

__all__ = [
    "PEFT_METHODS",
    "PeftConfig",
    "PrefixAttention",
    "SoftPromptEncoder",
    "TrainableParameters",
    "adapter_state",
    "attach_peft",
    "count_trainable",
    "is_adapter_tensor",
]
