"""What a Transformer stack carries from one layer to the next (see
:meth:`~ptm_core.encoders.TransformerEncoder.start`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from torch import Tensor

from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.unpadding import UnpadLayout

#: One layer's mask: ``[B, L]`` padding, ``[B, L, L]`` visibility, a structure, or none.
LayerMask = Tensor | AttentionStructure | None
#: What a stack takes as ``attention_mask``: one mask for every layer, one per layer
#: (``num_layers`` items), or a function of the layer index (local/global alternation).
LayerMasks = LayerMask | Sequence[LayerMask] | Callable[[int], LayerMask]


def mask_of_layer(masks: LayerMasks, index: int, num_layers: int) -> LayerMask:
    """Layer ``index``'s mask out of ``masks`` (see :data:`LayerMasks`)."""
    if masks is None or isinstance(masks, Tensor | AttentionStructure):
        return masks
    if callable(masks):
        return masks(index)
    if len(masks) != num_layers:
        raise ValueError(
            f"a per-layer attention_mask needs one mask per layer: got {len(masks)} for "
            f"{num_layers} layers; pass a list of {num_layers} masks or a function of the "
            "layer index"
        )
    return masks[index]


def is_per_layer(masks: LayerMasks) -> bool:
    """Whether ``masks`` differs by layer (a sequence or a function)."""
    return not (masks is None or isinstance(masks, Tensor | AttentionStructure))


@dataclass
class StackState:
    """A batch between two layers of a stack.

    Build it with :meth:`~ptm_core.encoders.TransformerEncoder.start`, advance it with
    :meth:`~ptm_core.encoders.TransformerEncoder.run_layers`, end it with
    :meth:`~ptm_core.encoders.TransformerEncoder.finish`.

    Attributes:
        hidden: ``(B, L, D)``, or ``(T, D)`` real tokens only when ``layout`` is set
            (unpadding); read and replace it through :meth:`padded` / :meth:`set_padded`.
        attention_mask: the caller's mask(s), :data:`LayerMasks`.
        layout: the unpadding layout, or ``None`` on the padded path.
        length: ``L``.
        layers_done: how many layers ran (the next layer's index).
        hidden_states: when requested, the embedding output and each layer's output
            (packed when ``layout`` is set; the stack re-pads them at the end).
        attention_scores: when requested, each layer's ``(B, h, L, L)`` scores.
    """

    hidden: Tensor
    attention_mask: LayerMasks
    layout: UnpadLayout | None
    length: int
    layers_done: int = 0
    hidden_states: list[Tensor] | None = None
    attention_scores: list[Tensor] | None = None
    resolved_masks: dict[int, tuple[object, LayerMask]] = field(default_factory=dict)

    def padded(self) -> Tensor:
        """The hidden states ``(B, L, D)`` (zeros at padding positions when unpadded)."""
        return self.hidden if self.layout is None else self.layout.repad(self.hidden)

    def set_padded(self, hidden: Tensor) -> None:
        """Replace the hidden states with ``hidden`` ``(B, L, D)`` (a module's output)."""
        self.hidden = hidden if self.layout is None else self.layout.unpad(hidden)
