"""ImageBERT: one Transformer over caption tokens and located image regions (Qi et al., 2020)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from ptm_core.encoders import EncoderOutput, TransformerEncoder
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.single_stream_size import SingleStreamSize, flat_size_builder
from ptm_multimodal.visualbert import VisualBertModel, visualbert_encoder


@dataclass
class ImageBertOutput(EncoderOutput):
    """:class:`~ptm_core.encoders.EncoderOutput` over ``L + R`` slots (text first), plus
    the regions' states.

    Attributes:
        region_hidden_state: ``(B, R, D)``, the last ``R`` slots (what masked object
            classification and masked region feature regression read).
    """

    region_hidden_state: Tensor | None = None


class ImageBertModel(VisualBertModel):
    """ImageBERT (Qi et al., 2020, "ImageBERT: Cross-modal Pre-training with Large-scale
    Weak-supervised Image-Text Data"), §3.2's embedding.

    One stream of ``[CLS] caption [SEP]`` followed by the ``R`` detected regions; each
    slot's input is the sum, then LayerNorm, of

    * linguistic or image embedding: the word piece's row for text; for region ``j``
      ``W_v f_j + W_b c_j``, its detector feature and its 5-d location
      ``c = (x1/W, y1/H, x2/W, y2/H, (x2-x1)(y2-y1)/(WH))``
      (:func:`~ptm_multimodal.boxes.encode_boxes`), both projected to the model width;
    * segment embedding: one row for the text, one for the image (the modality);
    * sequence position embedding: ``0..L-1`` over the text and one dummy position for
      every region (the regions have no order; where each one is, is in ``c``).

    That is VisualBERT's single stream with box positions, so the class reuses
    :class:`~ptm_multimodal.visualbert.VisualBertModel`'s forward (text segment row 0,
    image segment row ``T + 1``, dummy position row ``P``) and adds the regions' states to
    its output. The paper has no public code; the text-first order (the paper's figure
    does not fix one) keeps the masked-LM labels where ptm's single-stream families put
    them.

    Args:
        encoder: core encoder with ``max_positions = P + 1`` and ``type_vocab_size = 2T``
            (build it with :func:`imagebert`).
        visual_embedding_dim: region feature width ``D_v``.
        text_positions: ``P``.
        text_type_vocab_size: ``T``.
        feature_spec: the visual features this model is built for.

    Shapes:
        input_ids ``(B, L)``, visual_features ``(B, R, D_v)``, visual_boxes ``(B, R, 5)``,
        masks ``(B, L)``/``(B, R)`` -> ``last_hidden_state`` ``(B, L + R, D)``,
        ``region_hidden_state`` ``(B, R, D)``.
    """

    def __init__(
        self,
        encoder: TransformerEncoder,
        visual_embedding_dim: int,
        *,
        text_positions: int,
        text_type_vocab_size: int = 2,
        feature_spec: FeatureSpec | None = None,
    ) -> None:
        super().__init__(
            encoder,
            visual_embedding_dim,
            text_positions=text_positions,
            text_type_vocab_size=text_type_vocab_size,
            box_position=True,
            feature_spec=feature_spec,
        )

    @property
    def image_hidden_size(self) -> int:
        """Width of the regions' states (one stream: the model width)."""
        return self.hidden_size

    @property
    def feature_size(self) -> int:
        """Region feature width ``D_v``."""
        return self.visual_embedding_dim

    def checkpoint_config(self) -> dict[str, Any]:
        config = super().checkpoint_config()
        del config["box_position"]
        return {**config, "architecture": "imagebert"}

    def forward(  # type: ignore[override]
        self,
        input_ids: Tensor,
        visual_features: Tensor,
        *,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        visual_boxes: Tensor | None = None,
        visual_mask: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> ImageBertOutput:
        """Encode captions with their located regions (layout in the class docstring)."""
        if visual_boxes is None:
            raise ValueError("ImageBERT embeds each region's location: pass visual_boxes (B, R, 5)")
        output = super().forward(
            input_ids,
            visual_features,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            visual_boxes=visual_boxes,
            visual_mask=visual_mask,
            output_hidden_states=output_hidden_states,
        )
        states = output.last_hidden_state
        return ImageBertOutput(
            last_hidden_state=states,
            hidden_states=output.hidden_states,
            region_hidden_state=states[:, input_ids.shape[1] :],
        )


def build_imagebert(
    size: SingleStreamSize, *, feature_spec: dict[str, Any] | FeatureSpec | None = None
) -> ImageBertModel:
    """Build an ImageBERT of ``size`` (:class:`SingleStreamSize`).

    ``size.max_positions`` and ``size.type_vocab_size`` are the text's; the core encoder
    gets the regions' dummy position row and their segment rows (as :func:`visualbert`).
    """
    if isinstance(feature_spec, dict):
        feature_spec = FeatureSpec.from_dict(feature_spec)
    return ImageBertModel(
        visualbert_encoder(size.encoder_size(1), size.type_vocab_size),
        size.visual_embedding_dim,
        text_positions=size.max_positions,
        text_type_vocab_size=size.type_vocab_size,
        feature_spec=feature_spec,
    )


# The Hydra ``_target_`` of ``model/imagebert_*``: the sizes as keyword arguments.
imagebert = flat_size_builder(build_imagebert)
