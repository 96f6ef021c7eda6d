"""VL-BERT: one Transformer whose every element carries a visual feature (Su et al., 2020)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders import EncoderOutput, TransformerEncoder, builders
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_multimodal.feature_spec import (
    FeatureMismatchError,
    FeatureSpec,
    check_feature_width,
    check_model_features,
)
from ptm_multimodal.single_stream_size import SingleStreamSize, flat_size_builder

#: The 5-d box encoding (:func:`~ptm_multimodal.boxes.encode_boxes`) of the whole image.
WHOLE_IMAGE_BOX = (0.0, 0.0, 1.0, 1.0, 1.0)


@dataclass
class VlbertOutput(EncoderOutput):
    """:class:`~ptm_core.encoders.EncoderOutput` over ``L + R + 2`` slots, plus the
    visual elements' states.

    Attributes:
        image_hidden_state: ``(B, 1 + R, D)``: the whole-image element, then the regions
            (the layout :class:`~ptm_multimodal.region_masking.MaskedRegionObjective` reads:
            a global element first).
    """

    image_hidden_state: Tensor | None = None

    @property
    def region_hidden_state(self) -> Tensor:
        """``(B, R, D_v)``: the regions' states (the global image element dropped), what
        :class:`~ptm_multimodal.region_masking.MaskedRegionObjective` reads."""
        assert self.image_hidden_state is not None
        return self.image_hidden_state[:, 1:]


class VlbertModel(WrapsTextEncoder):
    """VL-BERT (Su et al., 2020, "VL-BERT: Pre-training of Generic Visual-Linguistic
    Representations"), the embedding of jackroos/VL-BERT's ``VisualLinguisticBert``.

    The sequence is ``[text tokens] [whole image] [regions] [END]``; each element's input is

    * token embedding: the word (text), the learned ``[IMG]`` row (whole image and regions;
      a learned masked-RoI row instead for a region whose feature is all zeros, i.e.
      zeroed by masked RoI classification), the learned ``[END]`` row;
    * visual feature embedding: ``LN_t(o_img)`` on every text token, where ``o_img`` is
      the whole image's feature; ``LN_o(o_j)`` on visual element ``j``; none on ``[END]``.
      ``o = W_v f + W_b b`` (the stand-in for the reference's Fast R-CNN head over
      ``[box coordinates; RoI feature]``, as the regions here are pre-extracted);
    * segment: the text's own (``0..T-1``), ``T`` for every visual element and ``[END]``;
    * position: ``0..n-1`` over the ``n`` real text tokens, ``n`` for every visual
      element (they share one), ``n + 1`` for ``[END]``;

    summed, then the core encoder's LayerNorm and dropout. The whole image's feature is
    the mean of the real regions' features (padding excluded) with box ``[0, 0, 1, 1, 1]``;
    it is pooled from the features as given, so a region zeroed for masked RoI
    classification adds nothing to it (the reference zeroes the RoI's pixels before its
    whole-image RoI is pooled, for the same reason). ``LN_t``/``LN_o`` start with gain
    ``visual_scale_init`` (the reference's 0.0 leaves a pre-trained BERT's states
    unchanged at the start).

    Text-only rows (the paper's pre-training on text corpora): a row with no real region
    (``visual_mask`` all 0) is text only. As jackroos/VL-BERT's
    ``ResNetVLBERTForPretrainingMultitask`` feeds them, its text tokens get
    ``LN_t(e_text)``, a learned vector (``aux_text_visual_embedding``), instead of a
    whole-image feature, and no visual element is attended: the row is its text, then
    ``[END]`` (position ``n + 1``). ``text_only_rows=False`` (folders saved before it)
    has no such vector.

    Args:
        encoder: core encoder with ``max_positions = P + 2`` and ``type_vocab_size = T + 1``
            (build it with :func:`vlbert`).
        visual_embedding_dim: region feature width ``D_v``.
        text_positions: ``P``.
        text_type_vocab_size: ``T``.
        visual_scale_init: initial gain of the two visual LayerNorms.
        feature_spec: the visual features this model is built for.
        text_only_rows: learn the text-only rows' visual vector ``e_text``.

    Shapes:
        input_ids ``(B, L)``, visual_features ``(B, R, D_v)``, visual_boxes ``(B, R, 5)``,
        masks ``(B, L)``/``(B, R)`` -> ``last_hidden_state`` ``(B, L + R + 2, D)``.
    """

    text_encoder_attribute = "encoder"

    def __init__(
        self,
        encoder: TransformerEncoder,
        visual_embedding_dim: int,
        *,
        text_positions: int,
        text_type_vocab_size: int = 2,
        visual_scale_init: float = 0.0,
        feature_spec: FeatureSpec | None = None,
        text_only_rows: bool = True,
    ) -> None:
        super().__init__()
        config = encoder.config
        if config.max_positions != text_positions + 2:
            raise ValueError(
                f"the encoder has {config.max_positions} positions; VL-BERT needs "
                f"text_positions + 2 = {text_positions + 2} (build it with vlbert())"
            )
        if config.type_vocab_size != text_type_vocab_size + 1:
            raise ValueError(
                f"the encoder has {config.type_vocab_size} segment rows; VL-BERT needs "
                f"text_type_vocab_size + 1 = {text_type_vocab_size + 1}"
            )
        if feature_spec is not None and feature_spec.feature_size != visual_embedding_dim:
            raise FeatureMismatchError(
                f"feature_spec.feature_size={feature_spec.feature_size} but "
                f"visual_embedding_dim={visual_embedding_dim}; they must be equal"
            )
        self.encoder = encoder
        self.text_positions = text_positions
        self.text_type_vocab_size = text_type_vocab_size
        self.visual_embedding_dim = visual_embedding_dim
        self.visual_scale_init = visual_scale_init
        self.feature_spec = feature_spec
        hidden = config.hidden_size
        eps = config.layer_norm_eps
        self.visual_projection = nn.Linear(visual_embedding_dim, hidden)
        self.box_projection = nn.Linear(5, hidden)
        self.visual_norm_text = nn.LayerNorm(hidden, eps=eps)
        self.visual_norm_object = nn.LayerNorm(hidden, eps=eps)
        # [IMG], the masked-RoI word and [END]: rows 0, 1, 2.
        self.special_embeddings = nn.Embedding(3, hidden)
        std = config.initializer_range
        for linear in (self.visual_projection, self.box_projection):
            nn.init.normal_(linear.weight, std=std)
            nn.init.zeros_(linear.bias)
        nn.init.normal_(self.special_embeddings.weight, std=std)
        # e_text: the visual vector of text-only rows' tokens (before LN_t)
        self.text_only_embedding = nn.Parameter(torch.empty(hidden)) if text_only_rows else None
        if self.text_only_embedding is not None:
            nn.init.normal_(self.text_only_embedding, std=std)
        for norm in (self.visual_norm_text, self.visual_norm_object):
            nn.init.constant_(norm.weight, visual_scale_init)
            nn.init.zeros_(norm.bias)

    @property
    def image_hidden_size(self) -> int:
        """Width of the visual elements' states (one stream: the model width)."""
        return self.hidden_size

    @property
    def feature_size(self) -> int:
        """Region feature width ``D_v``."""
        return self.visual_embedding_dim

    def check_features(self, spec: FeatureSpec, *, source: str = "the dataset") -> None:
        """Raise :class:`FeatureMismatchError` when ``spec`` is not this model's features."""
        check_model_features(self.feature_spec, self.visual_embedding_dim, spec, source=source)

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "architecture": "vlbert",
            "encoder": self.encoder.config.to_dict(),
            "visual_embedding_dim": self.visual_embedding_dim,
            "text_positions": self.text_positions,
            "text_type_vocab_size": self.text_type_vocab_size,
            "visual_scale_init": self.visual_scale_init,
            "feature_spec": None if self.feature_spec is None else self.feature_spec.to_dict(),
            "text_only_rows": self.text_only_embedding is not None,
        }

    def visual_elements(
        self, visual_features: Tensor, visual_boxes: Tensor, visual_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The whole image prepended to the regions.

        Returns:
            ``(features (B, 1 + R, D_v), boxes (B, 1 + R, 5), zeroed (B, 1 + R) bool)``:
            ``zeroed`` marks real regions whose feature is all zeros (masked RoIs).
        """
        real = visual_mask.to(visual_features.dtype)[..., None]
        count = real.sum(1).clamp(min=1.0)
        whole = (visual_features * real).sum(1, keepdim=True) / count[:, None]
        box = visual_boxes.new_tensor(WHOLE_IMAGE_BOX).expand(visual_boxes.shape[0], 1, 5)
        zeroed = visual_mask.bool() & (visual_features == 0).all(-1)
        return (
            torch.cat([whole, visual_features], 1),
            torch.cat([box, visual_boxes.to(visual_features.dtype)], 1),
            torch.cat([zeroed.new_zeros(zeroed.shape[0], 1), zeroed], 1),
        )

    def forward(
        self,
        input_ids: Tensor,
        visual_features: Tensor,
        *,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        visual_boxes: Tensor | None = None,
        visual_mask: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> VlbertOutput:
        """Encode captions with their regions (see the class docstring for the layout).

        Args:
            input_ids: ``(B, L)``.
            visual_features: ``(B, R, D_v)``.
            attention_mask: ``(B, L)`` text padding (1 = real).
            token_type_ids: ``(B, L)`` text segments (default 0).
            visual_boxes: ``(B, R, 5)`` encoded boxes.
            visual_mask: ``(B, R)`` (1 = real region).
            output_hidden_states: also return every layer's states.
        """
        check_feature_width(visual_features, self.visual_embedding_dim, self.feature_spec)
        if visual_boxes is None:
            raise ValueError("VL-BERT embeds region boxes: pass visual_boxes (B, R, 5)")
        batch, length = input_ids.shape
        if length > self.text_positions:
            raise ValueError(
                f"caption of {length} tokens exceeds text_positions={self.text_positions}"
            )
        device = input_ids.device
        regions = visual_features.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(batch, length, dtype=torch.long, device=device)
        if visual_mask is None:
            visual_mask = torch.ones(batch, regions, dtype=torch.long, device=device)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        features, boxes, zeroed = self.visual_elements(visual_features, visual_boxes, visual_mask)
        objects = self.visual_projection(features) + self.box_projection(boxes)  # (B, 1+R, D)
        special = self.special_embeddings.weight
        words = self.encoder.word_embeddings(input_ids)
        whole_image = objects[:, :1]  # (B, 1, D)
        with_image = torch.ones(batch, 1, dtype=torch.long, device=device)
        if self.text_only_embedding is not None:
            text_only = ~visual_mask.bool().any(1)  # (B,) rows without a region
            whole_image = torch.where(
                text_only[:, None, None], self.text_only_embedding.to(objects.dtype), whole_image
            )
            with_image = (~text_only).long()[:, None]
        text = words + self.visual_norm_text(whole_image)
        image_words = torch.where(zeroed[..., None], special[1], special[0])
        visual = image_words + self.visual_norm_object(objects)
        end = special[2].expand(batch, 1, -1)
        inputs_embeds = torch.cat([text, visual, end], dim=1)
        n = attention_mask.long().sum(1, keepdim=True)  # real text tokens per row
        position_ids = torch.cat(
            [
                torch.arange(length, device=device).expand(batch, -1),
                n.expand(batch, 1 + regions),
                n + 1,
            ],
            dim=1,
        )
        visual_type = torch.full(
            (batch, regions + 2), self.text_type_vocab_size, dtype=torch.long, device=device
        )
        types = torch.cat([token_type_ids.long(), visual_type], dim=1)
        ones = torch.ones(batch, 1, dtype=torch.long, device=device)
        mask = torch.cat([attention_mask.long(), with_image, visual_mask.long(), ones], dim=1)
        output = self.encoder(
            inputs_embeds=inputs_embeds,
            attention_mask=mask,
            position_ids=position_ids,
            token_type_ids=types,
            output_hidden_states=output_hidden_states,
        )
        states = output.last_hidden_state
        return VlbertOutput(
            last_hidden_state=states,
            hidden_states=output.hidden_states,
            image_hidden_state=states[:, length : length + 1 + regions],
        )


def build_vlbert(
    size: SingleStreamSize,
    *,
    visual_scale_init: float = 0.0,
    feature_spec: dict[str, Any] | FeatureSpec | None = None,
    text_only_rows: bool = True,
) -> VlbertModel:
    """Build a VL-BERT of ``size`` (:class:`SingleStreamSize`).

    ``size.max_positions`` and ``size.type_vocab_size`` are the text's; the core encoder
    gets two extra position rows (the visual elements' and ``[END]``'s) and one segment row.
    """
    if isinstance(feature_spec, dict):
        feature_spec = FeatureSpec.from_dict(feature_spec)
    encoder = builders.bert(size.encoder_size(2), type_vocab_size=size.type_vocab_size + 1)
    return VlbertModel(
        encoder,
        size.visual_embedding_dim,
        text_positions=size.max_positions,
        text_type_vocab_size=size.type_vocab_size,
        visual_scale_init=visual_scale_init,
        feature_spec=feature_spec,
        text_only_rows=text_only_rows,
    )


# The Hydra ``_target_`` of ``model/vlbert_*``: the sizes as keyword arguments.
vlbert = flat_size_builder(build_vlbert)
