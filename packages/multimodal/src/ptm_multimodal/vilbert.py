"""ViLBERT: a text stream and an image stream joined by co-attention (Lu et al., 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders import (
    EncoderOutput,
    TransformerEncoder,
    TransformerLayer,
    TransformerSize,
    builders,
)
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_core.modules import FeedForward, MultiHeadSelfAttention
from ptm_core.modules.attention_masks import to_sdpa_mask
from ptm_core.modules.dropout import Dropout
from ptm_multimodal.co_attention import CoAttentionLayer
from ptm_multimodal.feature_spec import (
    FeatureMismatchError,
    FeatureSpec,
    check_feature_width,
    check_model_features,
)


@dataclass
class VilbertOutput(EncoderOutput):
    """What :class:`VilbertModel` returns.

    Attributes:
        last_hidden_state: ``(B, L, D_t)`` text stream (so text heads work unchanged).
        image_hidden_state: ``(B, 1 + R, D_v)`` image stream; slot 0 is the global image
            token, slots ``1..R`` the regions.
        image_mask: ``(B, 1 + R)`` bool, True at real slots.
    """

    image_hidden_state: Tensor | None = None
    image_mask: Tensor | None = None

    @property
    def region_hidden_state(self) -> Tensor:
        """``(B, R, D_v)``: the regions' states (the global image element dropped), what
        :class:`~ptm_multimodal.region_masking.MaskedRegionObjective` reads."""
        assert self.image_hidden_state is not None
        return self.image_hidden_state[:, 1:]


class ImageEmbeddings(nn.Module):
    """Region embeddings ``LN(W_f f + W_b b)`` and ViLBERT's global image token.

    The global token's feature is the mean of the real regions' features and its box is
    the whole image ``[0, 0, 1, 1, 1]``; it is real when the image has any real region.

    Shapes:
        features ``(B, R, D_f)``, boxes ``(B, R, 5)``, mask ``(B, R)`` ->
        ``((B, 1 + R, D_v), (B, 1 + R) bool)``.
    """

    def __init__(
        self,
        feature_size: int,
        hidden_size: int,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
    ):
        super().__init__()
        self.feature_projection = nn.Linear(feature_size, hidden_size)
        self.box_projection = nn.Linear(5, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)

    def forward(self, features: Tensor, boxes: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        mask = mask.bool()
        weights = mask.to(features.dtype)[..., None]  # (B, R, 1)
        mean = (features * weights).sum(1, keepdim=True) / weights.sum(1, keepdim=True).clamp(min=1)
        whole = boxes.new_tensor([0.0, 0.0, 1.0, 1.0, 1.0]).expand(boxes.shape[0], 1, 5)
        features = torch.cat([mean, features], dim=1)  # (B, 1 + R, D_f)
        boxes = torch.cat([whole, boxes.to(features.dtype)], dim=1)
        mask = torch.cat([mask.any(dim=1, keepdim=True), mask], dim=1)
        embedded = self.feature_projection(features) + self.box_projection(boxes)
        return self.dropout(self.norm(embedded)), mask


class VilbertModel(WrapsTextEncoder):
    """Dual-stream ViLBERT (Lu et al., 2019, "ViLBERT: Pretraining Task-Agnostic
    Visiolinguistic Representations for Vision-and-Language Tasks").

    The text stream is a core :class:`~ptm_core.encoders.TransformerEncoder` (its
    embeddings and layers); the image stream is a smaller stack of core
    :class:`~ptm_core.encoders.TransformerLayer` over :class:`ImageEmbeddings`. Co-attention
    layers (:class:`~ptm_multimodal.co_attention.CoAttentionLayer`) join them on a
    schedule: ``co_attention_after[k] = (t, v)`` runs co-attention layer ``k`` once ``t``
    text layers and ``v`` image layers are done (ViLBERT's ``t_biattention_id`` and
    ``v_biattention_id``); remaining layers run after the last co-attention layer.

    Args:
        text_encoder: the text stream.
        image_embeddings: region embeddings with the global image token.
        image_layers: the image stream's self-attention layers.
        co_layers: the co-attention layers (one per schedule entry).
        co_attention_after: the schedule, non-decreasing pairs.
        feature_spec: the visual features this model is built for.

    Shapes:
        input_ids ``(B, L)``, visual_features ``(B, R, D_f)``, visual_boxes ``(B, R, 5)``,
        visual_mask ``(B, R)`` -> :class:`VilbertOutput`.
    """

    text_encoder_attribute = "text_encoder"

    def __init__(
        self,
        text_encoder: TransformerEncoder,
        image_embeddings: ImageEmbeddings,
        image_layers: Sequence[nn.Module],
        co_layers: Sequence[CoAttentionLayer],
        co_attention_after: Sequence[Sequence[int]],
        *,
        feature_spec: FeatureSpec | None = None,
        hyperparameters: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        schedule = [tuple(int(x) for x in pair) for pair in co_attention_after]
        if len(schedule) != len(co_layers):
            raise ValueError(
                f"co_attention_after has {len(schedule)} entries but there are "
                f"{len(co_layers)} co-attention layers; give one (text, image) pair per layer"
            )
        last = (0, 0)
        for t, v in schedule:
            if (
                t < last[0]
                or v < last[1]
                or t > text_encoder.config.num_layers
                or v > len(image_layers)
            ):
                raise ValueError(
                    f"co_attention_after {schedule} must be non-decreasing pairs with text <= "
                    f"{text_encoder.config.num_layers} and image <= {len(image_layers)}"
                )
            last = (t, v)
        self.text_encoder = text_encoder
        self.image_embeddings = image_embeddings
        self.image_layers = nn.ModuleList(image_layers)
        self.co_layers = nn.ModuleList(co_layers)
        self.co_attention_after = schedule
        self.feature_spec = feature_spec
        self.feature_size = image_embeddings.feature_projection.in_features
        self.image_hidden_size = image_embeddings.feature_projection.out_features
        self.hyperparameters = dict(hyperparameters or {})
        if feature_spec is not None and feature_spec.feature_size != self.feature_size:
            raise FeatureMismatchError(
                f"feature_spec.feature_size={feature_spec.feature_size} but the image stream "
                f"takes {self.feature_size}-d features"
            )

    def check_features(self, spec: FeatureSpec, *, source: str = "the dataset") -> None:
        """Raise :class:`FeatureMismatchError` when ``spec`` is not this model's features."""
        check_model_features(self.feature_spec, self.feature_size, spec, source=source)

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "architecture": "vilbert",
            **self.hyperparameters,
            "co_attention_after": [list(p) for p in self.co_attention_after],
            "feature_spec": None if self.feature_spec is None else self.feature_spec.to_dict(),
        }

    def forward(
        self,
        input_ids: Tensor | None = None,
        visual_features: Tensor | None = None,
        *,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        visual_boxes: Tensor | None = None,
        visual_mask: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
    ) -> VilbertOutput:
        """Encode both streams.

        Args:
            input_ids: ``(B, L)``.
            visual_features: ``(B, R, D_f)``.
            attention_mask: ``(B, L)`` text padding (1 = real).
            token_type_ids: ``(B, L)``.
            visual_boxes: ``(B, R, 5)`` encoded boxes (default: zeros).
            visual_mask: ``(B, R)`` (1 = real region); all zeros removes the image.
            inputs_embeds: ``(B, L, E)`` text vectors instead of ``input_ids``' token
                embeddings (a soft prompt's, :class:`~ptm_core.peft.SoftPromptEncoder`:
                the text stream only; the image stream is unchanged).
        """
        if visual_features is None:
            raise ValueError("ViLBERT encodes text with its regions: pass visual_features")
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids (B, L) and inputs_embeds (B, L, E)")
        check_feature_width(visual_features, self.feature_size, self.feature_spec)
        text_input = input_ids if input_ids is not None else inputs_embeds
        assert text_input is not None
        batch, length = text_input.shape[:2]
        device = text_input.device
        regions = visual_features.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(batch, length, dtype=torch.bool, device=device)
        if visual_mask is None:
            visual_mask = torch.ones(batch, regions, dtype=torch.bool, device=device)
        if visual_boxes is None:
            visual_boxes = visual_features.new_zeros(batch, regions, 5)
        # The text stream runs through the encoder's own seam (embeddings, projection,
        # masks, unpadding, attention backends); co-attention sits between its layers.
        state = self.text_encoder.start(
            input_ids, attention_mask, token_type_ids=token_type_ids, inputs_embeds=inputs_embeds
        )
        image, image_mask = self.image_embeddings(visual_features, visual_boxes, visual_mask)
        text_mask = attention_mask.bool()
        image_sdpa = to_sdpa_mask(image_mask, regions + 1)
        v_done = 0
        for (t_until, v_until), co_layer in zip(
            self.co_attention_after, self.co_layers, strict=True
        ):
            state = self.text_encoder.run_layers(state, t_until)
            for layer in self.image_layers[v_done:v_until]:
                image = layer(image, image_sdpa)
            v_done = v_until
            text, image = co_layer(state.padded(), image, text_mask, image_mask)
            state.set_padded(text)
        for layer in self.image_layers[v_done:]:
            image = layer(image, image_sdpa)
        text = self.text_encoder.finish(state).last_hidden_state
        return VilbertOutput(
            last_hidden_state=text, image_hidden_state=image, image_mask=image_mask
        )


def vilbert(
    vocab_size: int = 30522,
    visual_embedding_dim: int = 2048,
    hidden_size: int = 768,
    num_layers: int = 12,
    num_heads: int = 12,
    intermediate_size: int | None = None,
    image_hidden_size: int = 1024,
    image_num_layers: int = 6,
    image_num_heads: int = 8,
    image_intermediate_size: int | None = None,
    co_hidden_size: int = 1024,
    co_num_heads: int = 8,
    co_attention_after: Sequence[Sequence[int]] = ((6, 0), (8, 2), (10, 4), (12, 6)),
    max_positions: int = 512,
    type_vocab_size: int = 2,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-12,
    feature_spec: dict[str, Any] | FeatureSpec | None = None,
    pad_token_id: int = 0,
) -> VilbertModel:
    """Build a ViLBERT from numbers (Hydra ``_target_`` of ``model/vilbert_*``).

    Defaults are the paper's base model (BERT-base text stream, 1024-wide 6-layer image
    stream, co-attention after text layers 6/8/10/12 and image layers 0/2/4/6).
    """
    args = {k: v for k, v in locals().items() if k != "feature_spec"}
    args["co_attention_after"] = [list(p) for p in co_attention_after]
    if isinstance(feature_spec, dict):
        feature_spec = FeatureSpec.from_dict(feature_spec)
    text = builders.bert(TransformerSize.pick(args), type_vocab_size=type_vocab_size)
    image_intermediate = image_intermediate_size or 4 * image_hidden_size
    image_layers = [
        TransformerLayer(
            attention=MultiHeadSelfAttention(
                image_hidden_size, image_num_heads, dropout=attention_dropout
            ),
            feed_forward=FeedForward(image_hidden_size, image_intermediate, activation=activation),
            hidden_size=image_hidden_size,
            dropout=dropout,
            layer_norm_eps=layer_norm_eps,
        )
        for _ in range(image_num_layers)
    ]
    co_layers = [
        CoAttentionLayer(
            hidden_size,
            image_hidden_size,
            co_hidden_size,
            co_num_heads,
            text.config.intermediate_size,
            image_intermediate,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
        )
        for _ in co_attention_after
    ]
    model = VilbertModel(
        text,
        ImageEmbeddings(visual_embedding_dim, image_hidden_size, dropout, layer_norm_eps),
        image_layers,
        co_layers,
        co_attention_after,
        feature_spec=feature_spec,
        hyperparameters=args,
    )
    std = text.config.initializer_range
    for name, module in model.named_modules():
        if name.startswith("text_encoder"):
            continue  # initialised by the core encoder
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    return model
