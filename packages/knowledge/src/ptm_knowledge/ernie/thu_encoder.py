"""ERNIE (Tsinghua): a text encoder (T-Encoder) followed by knowledgeable aggregators (K-Encoder)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_core.checkpoints import registry
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.finite_values import check_finite
from ptm_core.model_kinds import ENCODER
from ptm_core.modules import MultiHeadSelfAttention, get_activation, to_sdpa_mask
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.initialization import init_bert_weights
from ptm_knowledge.kinds import ERNIE_THU

KNOWLEDGE_WEIGHTS = "knowledge_layers.safetensors"
KNOWLEDGE_CONFIG = "knowledge_config.json"


@dataclass
class KnowledgeEncoderOutput(EncoderOutput):
    """:class:`EncoderOutput` plus the entity stream of the last aggregator.

    Attributes:
        entity_hidden_state: ``(B, L, De)`` entity states at token positions (zeros where
            no entity is aligned).
    """

    entity_hidden_state: Tensor | None = None


class AggregatorLayer(nn.Module):
    """One K-Encoder layer of ERNIE (Zhang et al., 2019, "ERNIE: Enhanced Language
    Representation with Informative Entities").

    Token and entity streams first attend within themselves (multi-head self-attention,
    residual, LayerNorm), giving ``w~`` and ``e~``. Then, per position::

        h  = act(W_t w~ + W_e e~ + b)     if an entity is aligned to the token
        h  = act(W_t w~ + b)              otherwise
        w' = LN(w~ + out(W_t' h + b_t'))
        e' = LN(e~ + out(W_e' h + b_e'))  (only at aligned positions; zeros elsewhere)

    with ``out = act`` if ``output_activation`` (the paper's equations; the default) or the
    identity (``output_activation=False``: the released code, where this is BERT's output
    sub-layer, so a BERT layer's weights reproduce that layer exactly).

    **Entity bias.** The released code computes ``W_e e~ + b_e`` for *every* token, with
    ``e~ = 0`` where no entity is aligned, so ``b_e`` is added to tokens without an entity
    too. We follow the paper instead: ``W_e`` has no bias of its own and tokens without an
    entity get ``act(W_t w~ + b)``. ``entity_bias_everywhere=True`` reproduces the code.
    Either way a token without an entity receives no entity *embedding* in this layer;
    with several layers, entity information still reaches it through token attention.

    Args:
        hidden_size: token width ``D``.
        entity_size: entity width ``De``.
        num_heads: token attention heads.
        entity_heads: entity attention heads.
        intermediate_size: width of ``h``.
        dropout: dropout on sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        activation: activation name (``gelu``).
        layer_norm_eps: LayerNorm epsilon.
        entity_bias_everywhere: reproduce the released code's entity bias (see above).
        output_activation: apply ``act`` to ``W_t' h + b_t'`` and ``W_e' h + b_e'``.

    Shapes:
        tokens ``(B, L, D)``, entities ``(B, L, De)``, ``has_entity`` ``(B, L)`` bool,
        ``mask`` as :func:`to_sdpa_mask` returns.
    """

    def __init__(
        self,
        hidden_size: int,
        entity_size: int,
        num_heads: int,
        entity_heads: int,
        intermediate_size: int,
        *,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        entity_bias_everywhere: bool = False,
        output_activation: bool = True,
    ) -> None:
        super().__init__()
        self.token_attention = MultiHeadSelfAttention(hidden_size, num_heads, attention_dropout)
        self.token_attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.entity_attention = MultiHeadSelfAttention(entity_size, entity_heads, attention_dropout)
        self.entity_attention_norm = nn.LayerNorm(entity_size, eps=layer_norm_eps)
        self.fuse_token = nn.Linear(hidden_size, intermediate_size)  # W_t, b
        self.fuse_entity = nn.Linear(entity_size, intermediate_size, bias=entity_bias_everywhere)
        self.token_out = nn.Linear(intermediate_size, hidden_size)  # W_t', b_t'
        self.entity_out = nn.Linear(intermediate_size, entity_size)  # W_e', b_e'
        self.token_output_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.entity_output_norm = nn.LayerNorm(entity_size, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)
        self.activation = get_activation(activation)
        self.entity_bias_everywhere = entity_bias_everywhere
        self.output_activation = output_activation

    def forward(
        self, tokens: Tensor, entities: Tensor, has_entity: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        w = self.token_attention_norm(tokens + self.dropout(self.token_attention(tokens, mask)))
        # Entities attend to aligned positions only; a row with no entity attends to all
        # (its outputs are zeroed below) so that attention has no empty rows (NaN).
        keys = has_entity | ~has_entity.any(dim=1, keepdim=True)  # (B, L)
        e = entities + self.dropout(self.entity_attention(entities, keys[:, None, None, :]))
        e = self.entity_attention_norm(e) * has_entity[..., None]  # (B, L, De)
        fused = self.fuse_token(w)  # (B, L, F)
        from_entity = self.fuse_entity(e)
        if not self.entity_bias_everywhere:
            from_entity = from_entity * has_entity[..., None]
        h = self.activation(fused + from_entity)
        out_w, out_e = self.token_out(h), self.entity_out(h)
        if self.output_activation:
            out_w, out_e = self.activation(out_w), self.activation(out_e)
        tokens_out = self.token_output_norm(w + self.dropout(out_w))
        entities_out = self.entity_output_norm(e + self.dropout(out_e)) * has_entity[..., None]
        return tokens_out, entities_out


class KnowledgeableEncoder(WrapsTextEncoder):
    """ERNIE-THU encoder: T-Encoder (a core :class:`TransformerEncoder`) + M aggregators.

    Entity inputs are one entity index per token (``-1`` = none), looked up in a frozen
    table of KG embeddings (TransE from :func:`ptm_knowledge.kg.train_kg_embeddings`; a
    buffer, never trained) and, when the table's width differs from ``entity_size``,
    projected by a trained linear map.

    It declares what text objectives read (a
    :class:`~ptm_core.objectives.inputs.TextBackbone`): its width, its token table and the
    T-Encoder's config (``text_config``), so an MLM head ties to the T-Encoder's table.

    Args:
        text_encoder: the T-Encoder (``N`` layers).
        entity_embeddings: ``(num_entities, k)`` KG embeddings, row = entity index.
        num_knowledge_layers: ``M`` aggregators.
        entity_size: entity width ``De`` (default ``k``).
        entity_heads: entity attention heads (must divide ``De``).
        intermediate_size: fusion width (default the text encoder's FFN width).
        entity_bias_everywhere, output_activation: see :class:`AggregatorLayer`.
    """

    text_encoder_attribute = "text_encoder"
    # finetune.peft=lora/ia3 adapt the fusion's linears too (ptm_core.peft.library); the
    # entity table and its projection stay frozen.
    peft_lora_targets = ("fuse_token", "fuse_entity", "token_out", "entity_out")
    peft_ia3_feedforward = ("token_out", "entity_out")
    # finetune.peft=prompt (ptm_core.peft.prompts): prompt positions are aligned to no
    # entity, and the entity stream's output loses them as the token stream's does.
    prompt_position_inputs: ClassVar[dict[str, int | str]] = {"entity_ids": -1}
    prompt_position_outputs: ClassVar[tuple[str, ...]] = ("entity_hidden_state",)

    entity_table: Tensor

    def __init__(
        self,
        text_encoder: TransformerEncoder,
        entity_embeddings: Tensor,
        num_knowledge_layers: int = 1,
        *,
        entity_size: int | None = None,
        entity_heads: int = 1,
        intermediate_size: int | None = None,
        entity_bias_everywhere: bool = False,
        output_activation: bool = True,
    ) -> None:
        super().__init__()
        if entity_embeddings.dim() != 2:
            raise ValueError(
                f"entity_embeddings must be (num_entities, dim), got {tuple(entity_embeddings.shape)}"
            )
        config = text_encoder.config
        k = entity_embeddings.shape[1]
        entity_size = entity_size or k
        self.text_encoder = text_encoder
        self.register_buffer("entity_table", entity_embeddings.detach().float().clone())
        self.entity_projection: nn.Module = (
            nn.Identity() if entity_size == k else nn.Linear(k, entity_size)
        )
        self.knowledge_layers = nn.ModuleList(
            AggregatorLayer(
                config.hidden_size,
                entity_size,
                config.num_heads,
                entity_heads,
                intermediate_size or config.intermediate_size,
                dropout=config.dropout,
                attention_dropout=config.attention_dropout,
                activation=config.activation,
                layer_norm_eps=config.layer_norm_eps,
                entity_bias_everywhere=entity_bias_everywhere,
                output_activation=output_activation,
            )
            for _ in range(num_knowledge_layers)
        )
        init_bert_weights(self.knowledge_layers, text_encoder.config.initializer_range)
        self.options = {
            "num_knowledge_layers": num_knowledge_layers,
            "entity_size": entity_size,
            "entity_heads": entity_heads,
            "intermediate_size": intermediate_size or config.intermediate_size,
            "entity_bias_everywhere": entity_bias_everywhere,
            "output_activation": output_activation,
        }

    def save_pretrained(
        self,
        path: str | Path,
        *,
        entity_ids: Sequence[str] | None = None,
        kg: str | Path | None = None,
        linker: Mapping[str, Any] | None = None,
        extra_writers: Sequence[Callable[[Path], object]] = (),
    ) -> Path:
        """Write the T-Encoder (``config.json`` + ``model.safetensors``, loadable alone by
        ``TransformerEncoder.from_pretrained``) plus ``knowledge_layers.safetensors``
        (aggregators, projection, entity table) and ``knowledge_config.json``, atomically.

        ``kg`` (the KG folder the entity table was embedded from) is recorded as
        ``knowledge_config.json``'s ``"kg"``: fine-tuning links task text against it;
        ``linker`` (the linker settings that linked the pre-training corpus; ``None`` when
        it was linked elsewhere) as ``"linker"``: fine-tuning links with them unless told
        otherwise.
        """

        def write(directory: Path) -> None:
            state = {
                k: v.detach().cpu().contiguous()
                for k, v in self.state_dict().items()
                if not k.startswith("text_encoder.")
            }
            save_file(state, str(Path(directory) / KNOWLEDGE_WEIGHTS))
            config = {
                **self.options,
                "entity_ids": list(entity_ids) if entity_ids else None,
                "kg": str(Path(kg).resolve()) if kg is not None else None,
                "linker": dict(linker) if linker is not None else None,
            }
            (Path(directory) / KNOWLEDGE_CONFIG).write_text(json.dumps(config, indent=2) + "\n")

        # The T-Encoder's config.json says "ptm_model": "ernie_thu" (it still loads alone).
        saved = registry.save(
            ENCODER,
            self.text_encoder,
            path,
            extra_writers=[write, *extra_writers],
            kind=ERNIE_THU,
        )
        return Path(saved)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> KnowledgeableEncoder:
        """Load what :meth:`save_pretrained` wrote (entity ids: ``knowledge_config.json``)."""
        path = Path(path)
        config_path = path / KNOWLEDGE_CONFIG
        if not config_path.is_file():
            raise FileNotFoundError(
                f"{config_path}: not an ERNIE-THU checkpoint (no {KNOWLEDGE_CONFIG}); a plain "
                "text encoder loads with TransformerEncoder.from_pretrained"
            )
        options = json.loads(config_path.read_text())
        options.pop("entity_ids", None)
        options.pop("kg", None)
        options.pop("linker", None)
        state = check_finite(load_file(str(path / KNOWLEDGE_WEIGHTS)), path / KNOWLEDGE_WEIGHTS)
        text = TransformerEncoder.from_pretrained(path)
        layers = options.pop("num_knowledge_layers")
        model = cls(text, state["entity_table"], layers, **options)
        model.load_state_dict({**model.state_dict(), **state})
        return model

    @classmethod
    def from_text_encoder(
        cls,
        encoder: TransformerEncoder,
        entity_embeddings: Tensor,
        num_knowledge_layers: int,
        **kwargs: Any,
    ) -> KnowledgeableEncoder:
        """Split a (pre-trained) encoder: first ``L - M`` layers = T-Encoder, last ``M``
        layers initialise the aggregators' token streams, as ERNIE initialises from BERT.

        Any checkpoint ``TransformerEncoder.from_pretrained`` loads (ptm or Hugging Face
        BERT) works: ``from_text_encoder(TransformerEncoder.from_pretrained(path), E, M)``.
        Requires a post-LN encoder (the aggregator is post-LN).
        """
        config = encoder.config
        if not 0 < num_knowledge_layers < config.num_layers:
            raise ValueError(
                f"num_knowledge_layers={num_knowledge_layers} must be between 1 and the "
                f"encoder's num_layers - 1 = {config.num_layers - 1}"
            )
        if config.norm_position != "post":
            raise ValueError("from_text_encoder needs a post-LN (BERT) encoder")
        donors: list[Any] = list(encoder.layers[config.num_layers - num_knowledge_layers :])
        encoder.layers = nn.ModuleList(encoder.layers[: config.num_layers - num_knowledge_layers])
        encoder.config = dataclasses.replace(
            config, num_layers=config.num_layers - num_knowledge_layers
        )
        model = cls(encoder, entity_embeddings, num_knowledge_layers, **kwargs)
        with torch.no_grad():
            layers: list[Any] = list(model.knowledge_layers)
            for layer, donor in zip(layers, donors, strict=True):
                layer.token_attention.load_state_dict(donor.attention.state_dict())
                layer.token_attention_norm.load_state_dict(donor.attention_norm.state_dict())
                layer.fuse_token.load_state_dict(donor.feed_forward.w_in.state_dict())
                layer.token_out.load_state_dict(donor.feed_forward.w_out.state_dict())
                layer.token_output_norm.load_state_dict(donor.ffn_norm.state_dict())
        return model

    @property
    def num_entities(self) -> int:
        return int(self.entity_table.shape[0])

    def checkpoint_config(self) -> dict[str, Any]:
        """What a training checkpoint's ``config.json`` records beside the T-Encoder's
        config (read by the generic ``PretrainingModel``)."""
        return {"knowledge_layers": len(self.knowledge_layers), "num_entities": self.num_entities}

    def embed_entities(self, entity_ids: Tensor) -> Tensor:
        """``(B, L)`` ids (-1 none) -> ``(B, L, De)`` projected embeddings (zeros for none)."""
        has_entity = entity_ids >= 0
        vectors = self.entity_table[entity_ids.clamp(min=0)]  # (B, L, k)
        return self.entity_projection(vectors) * has_entity[..., None]

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        entity_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> KnowledgeEncoderOutput:
        """Encode tokens and their aligned entities.

        Args:
            input_ids, attention_mask, position_ids, token_type_ids, inputs_embeds: as
                :meth:`TransformerEncoder.forward`.
            entity_ids: ``(B, L)`` entity index per token, ``-1`` = none (default: none).
            output_hidden_states: also return the embedding output and every layer's
                token states (T-Encoder layers, then aggregators).

        Returns:
            :class:`KnowledgeEncoderOutput`.
        """
        text = self.text_encoder(
            input_ids,
            attention_mask,
            position_ids,
            token_type_ids,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
        )
        tokens = text.last_hidden_state  # (B, L, D)
        batch, length = tokens.shape[:2]
        if entity_ids is None:
            entity_ids = torch.full((batch, length), -1, dtype=torch.long, device=tokens.device)
        if attention_mask is not None and attention_mask.dim() == 2:
            entity_ids = entity_ids.masked_fill(~attention_mask.bool(), -1)
        has_entity = entity_ids >= 0
        entities = self.embed_entities(entity_ids)
        mask = to_sdpa_mask(attention_mask, length)
        hidden = list(text.hidden_states) if text.hidden_states is not None else None
        for layer in self.knowledge_layers:
            tokens, entities = layer(tokens, entities, has_entity, mask)
            if hidden is not None:
                hidden.append(tokens)
        return KnowledgeEncoderOutput(
            last_hidden_state=tokens,
            hidden_states=tuple(hidden) if hidden is not None else None,
            entity_hidden_state=entities,
        )
