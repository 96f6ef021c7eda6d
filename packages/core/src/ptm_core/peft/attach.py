"""Put a parameter-efficient method on a task model, and tell what trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from torch import Tensor, nn

from ptm_core.peft.config import LIBRARY_METHODS, PeftConfig
from ptm_core.peft.prompts import (
    PREFIX_KEY,
    PREFIX_VALUE,
    PROMPT_KEY,
    SoftPromptEncoder,
    add_prefixes,
)


@dataclass(frozen=True)
class TrainableParameters:
    """How many parameters train (adapter + head) out of all the model holds.

    Attributes:
        trainable: parameters with ``requires_grad``.
        total: every parameter (tied ones once).
    """

    trainable: int
    total: int

    @property
    def share(self) -> float:
        """``trainable / total`` (0 for an empty model)."""
        return self.trainable / self.total if self.total else 0.0

    def facts(self) -> dict[str, int | float]:
        """What a fine-tune's ``eval.json`` records (``train_and_score``'s ``facts``)."""
        return {
            "parameters/trainable": self.trainable,
            "parameters/trainable_share": round(self.share, 6),
        }

    def describe(self) -> str:
        """``"trainable parameters 12,345 of 4,400,000 (0.28%)"``."""
        return (
            f"trainable parameters {self.trainable:,} of {self.total:,} ({100 * self.share:.2f}%)"
        )


def count_trainable(model: nn.Module) -> TrainableParameters:
    """Count ``model``'s trainable and total parameters (``parameters()`` skips tied repeats)."""
    params = list(model.parameters())
    return TrainableParameters(
        trainable=sum(p.numel() for p in params if p.requires_grad),
        total=sum(p.numel() for p in params),
    )


# A backbone whose token inputs enter one of its submodules (LXMERT's language encoder)
# names that attribute here: prompt tuning wraps that submodule, not the whole backbone.
PROMPT_ATTRIBUTE = "peft_prompt_stream"

# A task model whose adapted network is not ``model.encoder`` names its attribute here
# (BART/T5's task models adapt the whole encoder-decoder, ``model.model``).
BACKBONE_ATTRIBUTE = "peft_backbone"


def backbone_name(model: nn.Module) -> str:
    """The attribute of ``model`` that holds the network an adapter goes on (``encoder``)."""
    return str(getattr(model, BACKBONE_ATTRIBUTE, "encoder"))


def backbone(model: nn.Module) -> nn.Module:
    """The network an adapter goes on: ``model.encoder``, or the attribute a task model
    names in ``peft_backbone`` (an encoder-decoder's ``model.model``)."""
    return cast(nn.Module, getattr(model, backbone_name(model)))


def attach_peft(model: nn.Module, config: PeftConfig) -> nn.Module:
    """Freeze the backbone and put ``config``'s method on it; the rest (the head) trains.

    Args:
        model: a task model whose encoder is ``model.encoder``
            (:class:`~ptm_core.finetune.model.TaskModel`), or that names its backbone in
            ``peft_backbone`` (:class:`~ptm_core.finetune.seq2seq.Seq2SeqClassifier` and
            the text-to-text model: an encoder-decoder).
        config: the method (``none`` returns ``model`` untouched).

    Returns:
        ``model``, changed in place: LoRA/IA3 wrap the encoder's linears (``peft``); prompt
        tuning wraps the encoder in :class:`SoftPromptEncoder` (the submodule a backbone
        names in ``peft_prompt_stream``, as LXMERT's language encoder); prefix tuning wraps each
        layer's attention in :class:`~ptm_core.peft.prompts.PrefixAttention` (the text
        encoder's layers, for a wrapper with a ``text_stack``). On an encoder-decoder
        backbone: :class:`~ptm_core.peft.seq2seq_prompts.SoftPromptSeq2Seq` in its place,
        or prefixes in all three attentions of every layer
        (:func:`~ptm_core.peft.seq2seq_prompts.add_seq2seq_prefixes`).
    """
    if not config.enabled:
        return model
    encoder = backbone(model)
    for param in encoder.parameters():
        param.requires_grad_(False)
    if config.method in LIBRARY_METHODS:
        from ptm_core.peft.library import inject

        inject(encoder, config)
    elif backbone_name(model) != "encoder":
        from ptm_core.peft.seq2seq_prompts import attach_seq2seq_prompts

        attach_seq2seq_prompts(
            model, backbone_name(model), config.method, config.num_virtual_tokens
        )
    elif config.method == "prefix":
        # A wrapper (ERNIE-THU, XLM...) holds its core text encoder as ``text_stack``.
        add_prefixes(getattr(encoder, "text_stack", encoder), config.num_virtual_tokens)
    else:
        keys = {
            "max_length_key": config.max_length_key,
            "virtual_tokens_key": config.virtual_tokens_key,
        }
        if hasattr(encoder, PROMPT_ATTRIBUTE):
            stream = getattr(encoder, PROMPT_ATTRIBUTE)
            prompted = SoftPromptEncoder(
                getattr(encoder, stream), config.num_virtual_tokens, **keys
            )
            setattr(encoder, stream, prompted)
        else:
            model.encoder = SoftPromptEncoder(encoder, config.num_virtual_tokens, **keys)
    return model


def adapter_state(model: nn.Module) -> dict[str, Tensor]:
    """The adapter's tensors under the backbone (names relative to ``model.encoder``, or
    to the attribute ``peft_backbone`` names), without the frozen base weights."""
    encoder = backbone(model)
    return {
        name: tensor.detach().contiguous()
        for name, tensor in encoder.state_dict().items()
        if is_adapter_tensor(name)
    }


def is_adapter_tensor(name: str) -> bool:
    """Whether a state-dict name under the encoder is an adapter's (LoRA, IA3, prompt, prefix;
    ``prefix_state_*``: a recurrent encoder's trained initial state)."""
    parts = name.split(".")
    if parts[-1] in (PROMPT_KEY, PREFIX_KEY, PREFIX_VALUE):
        return True
    return any(part.startswith(("lora_", "ia3_", "prefix_state_")) for part in parts)
