"""VisualBERT: one Transformer over caption tokens and image regions (Li et al., 2019)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders import EncoderOutput, TransformerEncoder, TransformerSize, builders
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_multimodal.feature_spec import (
    FeatureMismatchError,
    FeatureSpec,
    check_feature_width,
    check_model_features,
)
from ptm_multimodal.single_stream_size import SingleStreamSize, flat_size_builder


class VisualBertModel(WrapsTextEncoder):
    """Single-stream VisualBERT (Li et al., 2019, "VisualBERT: A Simple and Performant
    Baseline for Vision and Language").

    Text embeddings and visual embeddings are concatenated into one sequence and encoded
    by a core :class:`~ptm_core.encoders.TransformerEncoder` through ``inputs_embeds``:

    * text slot ``i``: ``E_tok(w_i) + E_pos(i) + E_seg(s_i)``;
    * region ``j``: ``W_v f_j + E_vpos + E_vseg(1) [+ W_box b_j]``,

    then one shared LayerNorm. The visual position and visual segment tables of VisualBERT
    are extra rows of the core encoder's tables: positions ``0..P-1`` are text positions,
    row ``P`` is the visual position; segment rows ``0..T-1`` are text segments, rows
    ``T..2T-1`` visual segments. So one unchanged core encoder runs the whole model.

    ``box_position=True`` adds the 5-d box encoding (:func:`~ptm_multimodal.boxes.encode_boxes`)
    projected to ``D``, as ViLBERT does; the original VisualBERT (and Hugging Face's
    ``VisualBertModel``) has no box term, so the parity test uses ``box_position=False``.

    Args:
        encoder: core encoder with ``max_positions = P + 1`` and ``type_vocab_size = 2T``
            (build it with :func:`visualbert`).
        visual_embedding_dim: region feature width ``D_v``.
        text_positions: ``P``.
        text_type_vocab_size: ``T``.
        box_position: add the projected box encoding to region embeddings.
        feature_spec: the visual features this model is built for (checked by
            :meth:`check_features` and saved in checkpoints).

    Shapes:
        input_ids ``(B, L)``, visual_features ``(B, R, D_v)``, visual_boxes ``(B, R, 5)``,
        masks ``(B, L)``/``(B, R)`` -> ``last_hidden_state`` ``(B, L + R, D)``.
    """

    text_encoder_attribute = "encoder"
    # a soft prompt (multimodal_finetune.peft=prompt) takes text positions, not the
    # visual position row after them (ptm_core.peft.prompts)
    prompt_text_positions = "text_positions"

    def __init__(
        self,
        encoder: TransformerEncoder,
        visual_embedding_dim: int,
        *,
        text_positions: int,
        text_type_vocab_size: int = 2,
        box_position: bool = True,
        feature_spec: FeatureSpec | None = None,
    ) -> None:
        super().__init__()
        config = encoder.config
        if config.max_positions != text_positions + 1:
            raise ValueError(
                f"the encoder has {config.max_positions} positions; VisualBERT needs "
                f"text_positions + 1 = {text_positions + 1} (build it with visualbert())"
            )
        if config.type_vocab_size != 2 * text_type_vocab_size:
            raise ValueError(
                f"the encoder has {config.type_vocab_size} segment rows; VisualBERT needs "
                f"2 * text_type_vocab_size = {2 * text_type_vocab_size}"
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
        self.feature_spec = feature_spec
        hidden = config.hidden_size
        self.visual_projection = nn.Linear(visual_embedding_dim, hidden)
        self.box_projection = nn.Linear(5, hidden) if box_position else None
        for module in (self.visual_projection, self.box_projection):
            if module is not None:
                nn.init.normal_(module.weight, std=config.initializer_range)
                nn.init.zeros_(module.bias)
        with torch.no_grad():  # special_visual_initialize: start from the text rows
            emb = encoder.embeddings
            assert emb.position is not None  # VisualBERT's text encoder has absolute positions
            emb.position.weight[text_positions] = emb.position.weight[0]
            if emb.token_type is not None:
                emb.token_type.weight[text_type_vocab_size:] = emb.token_type.weight[
                    :text_type_vocab_size
                ]

    def check_features(self, spec: FeatureSpec, *, source: str = "the dataset") -> None:
        """Raise :class:`FeatureMismatchError` when ``spec`` is not this model's features."""
        check_model_features(self.feature_spec, self.visual_embedding_dim, spec, source=source)

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "architecture": "visualbert",
            "encoder": self.encoder.config.to_dict(),
            "visual_embedding_dim": self.visual_embedding_dim,
            "text_positions": self.text_positions,
            "text_type_vocab_size": self.text_type_vocab_size,
            "box_position": self.box_projection is not None,
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
        visual_token_type_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """Encode captions with their regions.

        Args:
            input_ids: ``(B, L)``.
            visual_features: ``(B, R, D_v)``.
            attention_mask: ``(B, L)`` text padding (1 = real).
            token_type_ids: ``(B, L)`` text segments (default 0).
            visual_boxes: ``(B, R, 5)`` encoded boxes (needed with ``box_position``).
            visual_mask: ``(B, R)`` (1 = real region).
            visual_token_type_ids: ``(B, R)`` visual segments (default 1, as VisualBERT).
            inputs_embeds: ``(B, L, E)`` text vectors instead of ``input_ids``' token
                embeddings (a soft prompt's, :class:`~ptm_core.peft.SoftPromptEncoder`);
                they take text positions ``0..L-1`` like tokens.
            output_hidden_states: also return every layer's states.

        Returns:
            :class:`~ptm_core.encoders.EncoderOutput` over ``L + R`` slots (text first).
        """
        if visual_features is None:
            raise ValueError("VisualBERT encodes a caption with its regions: pass visual_features")
        check_feature_width(visual_features, self.visual_embedding_dim, self.feature_spec)
        text = text_vectors(self.encoder, input_ids, inputs_embeds)  # (B, L, E)
        batch, length = text.shape[:2]
        regions = visual_features.shape[1]
        if length > self.text_positions:
            raise ValueError(
                f"caption of {length} tokens exceeds text_positions={self.text_positions}"
            )
        device = text.device
        visual = self.visual_projection(visual_features)  # (B, R, D)
        if self.box_projection is not None:
            if visual_boxes is None:
                raise ValueError("this VisualBERT adds box positions: pass visual_boxes (B, R, 5)")
            visual = visual + self.box_projection(visual_boxes.to(visual.dtype))
        inputs_embeds = torch.cat([text, visual], dim=1)
        position_ids = torch.cat(
            [
                torch.arange(length, device=device).expand(batch, -1),
                torch.full((batch, regions), self.text_positions, device=device),
            ],
            dim=1,
        )
        if token_type_ids is None:
            token_type_ids = torch.zeros(batch, length, dtype=torch.long, device=device)
        if visual_token_type_ids is None:
            visual_token_type_ids = torch.ones(batch, regions, dtype=torch.long, device=device)
        types = torch.cat([token_type_ids, visual_token_type_ids + self.text_type_vocab_size], 1)
        if attention_mask is None:
            attention_mask = torch.ones(batch, length, dtype=torch.long, device=device)
        if visual_mask is None:
            visual_mask = torch.ones(batch, regions, dtype=torch.long, device=device)
        mask = torch.cat([attention_mask.long(), visual_mask.long()], dim=1)
        return self.encoder(
            inputs_embeds=inputs_embeds,
            attention_mask=mask,
            position_ids=position_ids,
            token_type_ids=types,
            output_hidden_states=output_hidden_states,
        )


def text_vectors(
    encoder: TransformerEncoder, input_ids: Tensor | None, inputs_embeds: Tensor | None
) -> Tensor:
    """The caption's vectors ``(B, L, E)``: ``inputs_embeds`` or ``input_ids``' token
    embeddings (exactly one is given)."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("pass exactly one of input_ids (B, L) and inputs_embeds (B, L, E)")
    if inputs_embeds is not None:
        return inputs_embeds
    return encoder.word_embeddings(input_ids)


def build_visualbert(
    size: SingleStreamSize,
    *,
    box_position: bool = True,
    feature_spec: dict[str, Any] | FeatureSpec | None = None,
) -> VisualBertModel:
    """Build a VisualBERT of ``size`` (:class:`SingleStreamSize`).

    ``size.max_positions`` and ``size.type_vocab_size`` are the text's; the core encoder
    gets one extra position row and ``type_vocab_size`` extra segment rows for the regions.
    """
    if isinstance(feature_spec, dict):
        feature_spec = FeatureSpec.from_dict(feature_spec)
    return VisualBertModel(
        visualbert_encoder(size.encoder_size(1), size.type_vocab_size),  # the regions' row
        size.visual_embedding_dim,
        text_positions=size.max_positions,
        text_type_vocab_size=size.type_vocab_size,
        box_position=box_position,
        feature_spec=feature_spec,
    )


# The Hydra ``_target_`` of ``model/visualbert_*``: the sizes as keyword arguments.
visualbert = flat_size_builder(build_visualbert)


def visualbert_encoder(size: TransformerSize, type_vocab_size: int) -> TransformerEncoder:
    """The core BERT encoder of a VisualBERT-layout stream: ``size`` (whose
    ``max_positions`` already holds the regions' position row) and ``type_vocab_size``
    extra segment rows for the regions."""
    return builders.bert(size, type_vocab_size=2 * type_vocab_size)
