"""LXMERT: a language, an object-relationship and a cross-modality encoder (Tan & Bansal, 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders import EncoderOutput, TransformerEncoder, TransformerLayer, bert_encoder
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_core.modules import FeedForward, MultiHeadSelfAttention
from ptm_core.modules.cross_attention import MultiHeadCrossAttention
from ptm_core.modules.dropout import Dropout
from ptm_multimodal.feature_spec import FeatureMismatchError, FeatureSpec, check_model_features


@dataclass
class LxmertOutput(EncoderOutput):
    """What :class:`LxmertModel` returns (Hugging Face's ``LxmertModelOutput``).

    Attributes:
        last_hidden_state: ``(B, L, D)`` language output (so text heads work unchanged).
        vision_hidden_state: ``(B, R, D)`` vision output, one state per region (no global
            image token: LXMERT has none).
        pooled_output: ``(B, D)`` ``tanh(W h_[CLS])`` of the language output.
        visual_mask: ``(B, R)`` bool, True at real regions.
    """

    vision_hidden_state: Tensor | None = None
    pooled_output: Tensor | None = None
    visual_mask: Tensor | None = None


def key_mask(mask: Tensor | None) -> Tensor | None:
    """A ``(B, L)`` padding mask (1 = real) as an SDPA key mask ``(B, 1, 1, L)`` bool.

    A row with no real key may attend everywhere (as an all-masked additive mask does in
    the reference implementation) instead of producing NaN.
    """
    if mask is None:
        return None
    keys = mask.bool()
    if bool(keys.all()):
        return None
    keys = keys | ~keys.any(dim=-1, keepdim=True)
    return keys[:, None, None, :]


class LxmertVisualEncoder(nn.Module):
    """LXMERT's object-level input: ``(LN(W_f f) + LN(W_p p)) / 2`` (§2.1, "Object-Level
    Image Embeddings"), then dropout.

    Args:
        feature_size: region feature width ``D_f`` (2048 for the Faster R-CNN features).
        box_size: box encoding width (4: normalised ``[x1, y1, x2, y2]``).
        hidden_size: model width ``D``.
        dropout: dropout on the sum.
        layer_norm_eps: LayerNorm epsilon.

    Shapes:
        features ``(B, R, D_f)``, boxes ``(B, R, box_size)`` -> ``(B, R, D)``.
    """

    def __init__(
        self,
        feature_size: int,
        box_size: int,
        hidden_size: int,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.feature_projection = nn.Linear(feature_size, hidden_size)
        self.feature_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.box_projection = nn.Linear(box_size, hidden_size)
        self.box_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)

    def forward(self, features: Tensor, boxes: Tensor) -> Tensor:
        x = self.feature_norm(self.feature_projection(features))
        y = self.box_norm(self.box_projection(boxes.to(features.dtype)))
        return self.dropout((x + y) / 2)


class LxmertCrossLayer(nn.Module):
    """One cross-modality layer (Tan & Bansal, 2019, §2.2, Fig. 1 right).

    One cross-attention sub-layer, shared by both directions (the same weights let
    language query vision and vision query language, as in the reference code), then each
    stream's own self-attention and feed-forward: ``l' = LN(l + CA(l, v))``,
    ``v' = LN(v + CA(v, l))`` (computed from the inputs of the layer, not from ``l'``),
    then ``l'' = TransformerLayer_l(l')``, ``v'' = TransformerLayer_v(v')`` (post-LN).

    Args:
        cross_attention: the shared core cross-attention.
        language_layer: the language stream's self-attention + FFN layer.
        vision_layer: the vision stream's self-attention + FFN layer.
        hidden_size: width ``D`` (of both streams).
        dropout: dropout on the cross-attention output.
        layer_norm_eps: LayerNorm epsilon.

    Shapes:
        language ``(B, L, D)``, vision ``(B, R, D)``, masks as :func:`key_mask` returns ->
        the two updated streams.
    """

    def __init__(
        self,
        cross_attention: MultiHeadCrossAttention,
        language_layer: TransformerLayer,
        vision_layer: TransformerLayer,
        hidden_size: int,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.cross_attention = cross_attention
        self.cross_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.language_layer = language_layer
        self.vision_layer = vision_layer
        self.dropout = Dropout(dropout)

    def forward(
        self,
        language: Tensor,
        vision: Tensor,
        language_mask: Tensor | None,
        vision_mask: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        attended_l = self.cross_attention(language, vision, vision_mask)
        attended_v = self.cross_attention(vision, language, language_mask)
        lang = self.cross_norm(language + self.dropout(attended_l))
        vis = self.cross_norm(vision + self.dropout(attended_v))
        return self.language_layer(lang, language_mask), self.vision_layer(vis, vision_mask)


class LxmertModel(WrapsTextEncoder):
    """LXMERT (Tan & Bansal, 2019, "LXMERT: Learning Cross-Modality Encoder
    Representations from Transformers").

    The language encoder is a core :class:`~ptm_core.encoders.TransformerEncoder`
    (BERT embeddings + ``l_layers`` post-LN layers); the object-relationship encoder is
    :class:`LxmertVisualEncoder` + ``r_layers`` core
    :class:`~ptm_core.encoders.TransformerLayer`; the cross-modality encoder is
    ``x_layers`` :class:`LxmertCrossLayer`; the pooler is ``tanh(W h_[CLS])`` on the
    language output. Outputs equal Hugging Face's ``LxmertModel`` with the same weights
    (:mod:`ptm_multimodal.lxmert_hf`).

    Args:
        language_encoder: the language stream (embeddings + ``l_layers``).
        visual_encoder: the region feature + box input.
        object_layers: the ``r_layers`` object-relationship layers.
        cross_layers: the ``x_layers`` cross-modality layers.
        feature_spec: the visual features this model is built for.
        hyperparameters: the builder's numbers (saved in ``config.json``).

    Shapes:
        input_ids ``(B, L)``, visual_features ``(B, R, D_f)``, visual_boxes
        ``(B, R, box_size)`` (or ptm's 5-d encoding, whose first four are LXMERT's box),
        visual_mask ``(B, R)`` -> :class:`LxmertOutput`.
    """

    text_encoder_attribute = "language_encoder"
    # multimodal_finetune.peft=prompt: the soft prompt goes before the language stream's
    # tokens (ptm_core.peft; LoRA/IA3 find every stream's linears by their names, the
    # cross-attention's query/key/value split as self-attention's are).
    peft_prompt_stream = "language_encoder"

    def __init__(
        self,
        language_encoder: TransformerEncoder,
        visual_encoder: LxmertVisualEncoder,
        object_layers: Sequence[nn.Module],
        cross_layers: Sequence[LxmertCrossLayer],
        *,
        feature_spec: FeatureSpec | None = None,
        hyperparameters: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        hidden = language_encoder.config.hidden_size
        self.language_encoder = language_encoder
        self.visual_encoder = visual_encoder
        self.object_layers = nn.ModuleList(object_layers)
        self.cross_layers = nn.ModuleList(cross_layers)
        self.pooler = nn.Linear(hidden, hidden)
        self.feature_spec = feature_spec
        self.feature_size = visual_encoder.feature_projection.in_features
        self.box_size = visual_encoder.box_projection.in_features
        self.image_hidden_size = hidden
        self.hyperparameters = dict(hyperparameters or {})
        if feature_spec is not None and feature_spec.feature_size != self.feature_size:
            raise FeatureMismatchError(
                f"feature_spec.feature_size={feature_spec.feature_size} but the model's "
                f"visual_embedding_dim is {self.feature_size}; build it with "
                f"visual_embedding_dim={feature_spec.feature_size}"
            )

    def check_features(self, spec: FeatureSpec, *, source: str = "the dataset") -> None:
        """Raise :class:`FeatureMismatchError` when ``spec`` is not this model's features."""
        check_model_features(self.feature_spec, self.feature_size, spec, source=source)

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "architecture": "lxmert",
            **self.hyperparameters,
            "feature_spec": None if self.feature_spec is None else self.feature_spec.to_dict(),
        }

    def _check_visual(self, features: Tensor, boxes: Tensor | None) -> Tensor:
        if features.dim() != 3 or features.shape[-1] != self.feature_size:
            raise FeatureMismatchError(
                f"visual_features has shape {tuple(features.shape)} but this LXMERT takes "
                f"(batch, regions, visual_embedding_dim={self.feature_size}) region features "
                f"({self.feature_spec or 'no feature spec'}); re-extract the features with the "
                "model's extractor, or build the model with visual_embedding_dim="
                f"{features.shape[-1]}"
            )
        if boxes is None:
            return features.new_zeros(*features.shape[:2], self.box_size)
        if boxes.shape[:2] != features.shape[:2] or boxes.shape[-1] < self.box_size:
            raise FeatureMismatchError(
                f"visual_boxes has shape {tuple(boxes.shape)} but this LXMERT takes "
                f"(batch, regions, box_size={self.box_size}) boxes for the "
                f"{tuple(features.shape[:2])} regions of visual_features; pass normalised "
                "[x1, y1, x2, y2] boxes (ptm_multimodal.encode_boxes gives them, plus the area)"
            )
        # ptm encodes boxes as [x1/W, y1/H, x2/W, y2/H, area]: LXMERT's box is the first four
        return boxes[..., : self.box_size]

    def forward(
        self,
        input_ids: Tensor,
        visual_features: Tensor,
        *,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        visual_boxes: Tensor | None = None,
        visual_mask: Tensor | None = None,
    ) -> LxmertOutput:
        """Encode both streams.

        Args:
            input_ids: ``(B, L)``.
            visual_features: ``(B, R, D_f)``.
            attention_mask: ``(B, L)`` text padding (1 = real).
            token_type_ids: ``(B, L)``.
            visual_boxes: ``(B, R, box_size)`` normalised boxes (default: zeros); a wider
                encoding (ptm's 5-d one) is cut to its first ``box_size`` values.
            visual_mask: ``(B, R)`` (1 = real region; default: all real).

        Raises:
            FeatureMismatchError: features or boxes of the wrong size (names the field).
        """
        boxes = self._check_visual(visual_features, visual_boxes)
        batch, regions = visual_features.shape[:2]
        if visual_mask is None:
            visual_mask = torch.ones(batch, regions, dtype=torch.bool, device=input_ids.device)
        language_keys = key_mask(attention_mask)
        vision_keys = key_mask(visual_mask)
        # The language stream is the plain encoder (its embeddings, masks, unpadding and
        # attention backends); the cross-modality layers come after its last layer.
        language = self.language_encoder(
            input_ids, attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state  # (B, L, D)
        vision = self.visual_encoder(visual_features, boxes)  # (B, R, D)
        for layer in self.object_layers:
            vision = layer(vision, vision_keys)
        for cross in self.cross_layers:
            language, vision = cross(language, vision, language_keys, vision_keys)
        pooled = torch.tanh(self.pooler(language[:, 0]))  # (B, D)
        return LxmertOutput(
            last_hidden_state=language,
            vision_hidden_state=vision,
            pooled_output=pooled,
            visual_mask=visual_mask.bool(),
        )


def _layer(
    hidden: int,
    heads: int,
    intermediate: int,
    dropout: float,
    attention_dropout: float,
    activation: str,
    layer_norm_eps: float,
) -> TransformerLayer:
    return TransformerLayer(
        attention=MultiHeadSelfAttention(hidden, heads, dropout=attention_dropout),
        feed_forward=FeedForward(hidden, intermediate, activation=activation),
        hidden_size=hidden,
        dropout=dropout,
        layer_norm_eps=layer_norm_eps,
    )


def lxmert(
    vocab_size: int = 30522,
    visual_embedding_dim: int = 2048,
    box_size: int = 4,
    hidden_size: int = 768,
    num_heads: int = 12,
    intermediate_size: int | None = None,
    l_layers: int = 9,
    r_layers: int = 5,
    x_layers: int = 5,
    max_positions: int = 512,
    type_vocab_size: int = 2,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-12,
    initializer_range: float = 0.02,
    feature_spec: dict[str, Any] | FeatureSpec | None = None,
    pad_token_id: int = 0,
) -> LxmertModel:
    """Build an LXMERT from numbers (Hydra ``_target_`` of ``model/lxmert_*``).

    Defaults are the paper's model: 9 language, 5 object-relationship and 5
    cross-modality layers of BERT-base width over 2048-d Faster R-CNN region features
    with 4-d boxes.
    """
    args = {k: v for k, v in locals().items() if k != "feature_spec"}
    if isinstance(feature_spec, dict):
        feature_spec = FeatureSpec.from_dict(feature_spec)
    language = bert_encoder(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_layers=l_layers,
        num_heads=num_heads,
        intermediate_size=intermediate_size,
        max_positions=max_positions,
        type_vocab_size=type_vocab_size,
        dropout=dropout,
        attention_dropout=attention_dropout,
        activation=activation,
        layer_norm_eps=layer_norm_eps,
        pad_token_id=pad_token_id,
        initializer_range=initializer_range,
    )
    numbers = (
        hidden_size,
        num_heads,
        language.config.intermediate_size,
        dropout,
        attention_dropout,
        activation,
        layer_norm_eps,
    )
    cross_layers = [
        LxmertCrossLayer(
            MultiHeadCrossAttention(hidden_size, num_heads, dropout=attention_dropout),
            _layer(*numbers),
            _layer(*numbers),
            hidden_size,
            dropout,
            layer_norm_eps,
        )
        for _ in range(x_layers)
    ]
    model = LxmertModel(
        language,
        LxmertVisualEncoder(visual_embedding_dim, box_size, hidden_size, dropout, layer_norm_eps),
        [_layer(*numbers) for _ in range(r_layers)],
        cross_layers,
        feature_spec=feature_spec,
        hyperparameters=args,
    )
    for name, module in model.named_modules():
        if name.startswith("language_encoder"):
            continue  # initialised by the core encoder
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=initializer_range)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    # A masked object's feature is zero, so its projection is the bias alone; from a zero
    # bias, LayerNorm would see a constant vector and its gradient would be 1/sqrt(eps).
    nn.init.normal_(model.visual_encoder.feature_projection.bias, std=initializer_range)
    return model
