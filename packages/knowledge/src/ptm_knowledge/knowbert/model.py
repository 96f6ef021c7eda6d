"""KnowBERT: a pre-trained text encoder with KARs inserted after chosen layers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_core.checkpoints import registry
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.finite_values import check_finite
from ptm_core.model_kinds import ENCODER
from ptm_knowledge.kinds import KNOWBERT
from ptm_knowledge.knowbert.kar import KnowledgeAttentionRecontextualization

KNOWBERT_WEIGHTS = "knowbert_layers.safetensors"
KNOWBERT_CONFIG = "knowbert_config.json"


@dataclass
class KarSpec:
    """Where one KG's KAR sits and how it is built (``knowbert_config.json``'s ``kgs``).

    Attributes:
        layer: the KAR runs after text layer ``layer`` (0-based; the paper's WordNet KAR
            sits after layer 10 of BERT-base, Wikipedia's after layer 9).
        num_heads: span attention heads.
        intermediate_size: span attention feed-forward width (``None``: 4 x the KG width).
        scorer_hidden: the linker MLP's width.
        threshold: the linker's weighting threshold (``None``: plain softmax weights).
        span_encoder_layers: BERT layers among the linker's spans (0: none).
        entity_ids: the KG entity of each table row from row 2 on (rows 0/1: padding/null).
        kg: the KG folder the candidates are generated from.
    """

    layer: int
    num_heads: int = 4
    intermediate_size: int | None = None
    scorer_hidden: int = 100
    threshold: float | None = None
    span_encoder_layers: int = 0
    entity_ids: list[str] = field(default_factory=list)
    kg: str | None = None

    def options(self) -> dict[str, Any]:
        """The KAR's constructor options."""
        return {
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "scorer_hidden": self.scorer_hidden,
            "threshold": self.threshold,
            "span_encoder_layers": self.span_encoder_layers,
        }


@dataclass
class KnowBertOutput(EncoderOutput):
    """:class:`EncoderOutput` plus, per KG in ``kg_names`` order, what its linker scored.

    Attributes:
        linking_scores: per KG, ``(B, S, C)`` candidate scores (``-10000`` at padding).
        kg_names: the KGs, in the order of ``linking_scores`` and of the batch's KG axis.
    """

    linking_scores: tuple[Tensor, ...] = ()
    kg_names: tuple[str, ...] = ()


class KnowBertEncoder(WrapsTextEncoder):
    """KnowBERT (Peters et al., 2019): KARs inserted between the layers of a text encoder.

    The text encoder runs through its own seams
    (:meth:`~ptm_core.encoders.TransformerEncoder.start`, ``run_layers``, ``finish``), so
    embeddings, masks, unpadding and attention backends are the encoder's own; after layer
    ``spec.layer`` the KG's KAR rewrites the states ``(B, L, D)``. Several KGs stack
    (KnowBERT-W+W): each has its own KAR, entity table and candidates.

    Batch inputs (besides the text encoder's), with ``K`` = number of KGs in
    :attr:`kg_names` order, ``S`` spans and ``C`` candidates (padded):

    - ``candidate_spans`` ``(B, K, S, 2)`` long: inclusive word-piece spans, ``-1`` padding;
    - ``candidate_entities`` ``(B, K, S, C)`` long: entity table rows, ``0`` padding;
    - ``candidate_priors`` ``(B, K, S, C)`` float: the alias priors.

    Without them (``candidate_spans=None``) the KARs still run with no spans (the released
    code's behaviour on a sentence without candidates).

    Args:
        text_encoder: a post- or pre-LN core encoder (e.g. a pre-trained BERT).
        entity_tables: KG name -> ``(N, E)`` frozen table (row 0 padding, row 1 null).
        specs: KG name -> :class:`KarSpec`.
    """

    text_encoder_attribute = "text_encoder"

    def __init__(
        self,
        text_encoder: TransformerEncoder,
        entity_tables: Mapping[str, Tensor],
        specs: Mapping[str, KarSpec],
    ) -> None:
        super().__init__()
        if set(entity_tables) != set(specs):
            raise ValueError(
                f"entity tables for {sorted(entity_tables)} but KAR specs for {sorted(specs)}"
            )
        if not specs:
            raise ValueError("KnowBERT needs at least one KG (knowbert.kgs)")
        config = text_encoder.config
        self.text_encoder = text_encoder
        self.specs = {
            name: specs[name] for name in sorted(specs, key=lambda n: (specs[n].layer, n))
        }
        for name, spec in self.specs.items():
            if not 0 <= spec.layer < config.num_layers:
                raise ValueError(
                    f"knowbert.kgs.{name}.layer={spec.layer}: a KAR sits after a text layer, "
                    f"0..{config.num_layers - 1} for this {config.num_layers}-layer encoder"
                )
        self.kars = nn.ModuleDict(
            {
                name: KnowledgeAttentionRecontextualization(
                    config.hidden_size,
                    entity_tables[name],
                    dropout=config.dropout,
                    attention_dropout=config.attention_dropout,
                    initializer_range=config.initializer_range,
                    **spec.options(),
                )
                for name, spec in self.specs.items()
            }
        )

    @property
    def kg_names(self) -> tuple[str, ...]:
        """The KGs, in the order of the batch's KG axis (by layer, then name)."""
        return tuple(self.specs)

    def checkpoint_config(self) -> dict[str, Any]:
        """What a training checkpoint's ``config.json`` records beside the text config."""
        return {"knowbert": {n: s.layer for n, s in self.specs.items()}}

    # ------------------------------------------------------------------ training stages

    def freeze_for_linking(self) -> None:
        """Stage 1 of the paper: only the entity linkers train (the text encoder and the
        rest of each KAR are frozen), as the released code's ``mode='entity_linking'``."""
        for parameter in self.parameters():
            parameter.requires_grad_(False)
        for kar in self.kars.values():
            for parameter in kar.linker_parameters():  # type: ignore[operator]
                parameter.requires_grad_(True)

    def unfreeze(self) -> None:
        """Stage 2: everything trains (the KG tables are buffers and never do)."""
        for parameter in self.parameters():
            parameter.requires_grad_(True)

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        candidate_spans: Tensor | None = None,
        candidate_entities: Tensor | None = None,
        candidate_priors: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> KnowBertOutput:
        """Encode a batch; see the class docstring for the candidate inputs.

        Returns:
            :class:`KnowBertOutput` (``hidden_states``: the text encoder's, each taken after
            its layer, before the KAR that follows it).
        """
        text = self.text_encoder
        state = text.start(
            input_ids,
            attention_mask,
            position_ids,
            token_type_ids,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
        )
        source = input_ids if input_ids is not None else inputs_embeds
        assert source is not None  # start() refused neither/both
        batch, device = source.shape[0], state.hidden.device
        scores: list[Tensor] = []
        for k, (name, spec) in enumerate(self.specs.items()):
            text.run_layers(state, spec.layer + 1)
            if candidate_spans is None:
                spans = torch.full((batch, 1, 2), -1, dtype=torch.long, device=device)
                entities = torch.zeros((batch, 1, 1), dtype=torch.long, device=device)
                priors = torch.zeros((batch, 1, 1), device=device)
            else:
                if candidate_entities is None or candidate_priors is None:
                    raise ValueError(
                        "candidate_spans needs candidate_entities and candidate_priors"
                    )
                self._check_kg_axis(candidate_spans)
                spans = candidate_spans[:, k]
                entities, priors = candidate_entities[:, k], candidate_priors[:, k]
            out = self.kars[name](state.padded(), spans, entities, priors)
            state.set_padded(out.hidden)
            scores.append(out.linker.linking_scores)
        encoded = text.finish(state)
        return KnowBertOutput(
            last_hidden_state=encoded.last_hidden_state,
            hidden_states=encoded.hidden_states,
            attention_scores=encoded.attention_scores,
            linking_scores=tuple(scores),
            kg_names=self.kg_names,
        )

    def _check_kg_axis(self, candidate_spans: Tensor) -> None:
        if candidate_spans.dim() != 4 or candidate_spans.shape[1] != len(self.specs):
            raise ValueError(
                f"candidate_spans must be (B, K={len(self.specs)}, S, 2) for the KGs "
                f"{list(self.kg_names)}, got {tuple(candidate_spans.shape)}"
            )

    # ------------------------------------------------------------------ save / load

    def save_pretrained(
        self,
        path: str | Path,
        *,
        extra_writers: Sequence[Callable[[Path], object]] = (),
    ) -> Path:
        """Write the text encoder (``config.json`` + ``model.safetensors``, loadable alone
        by ``TransformerEncoder.from_pretrained``), ``knowbert_layers.safetensors`` (the
        KARs with their entity tables) and ``knowbert_config.json``, atomically."""

        def write(directory: Path) -> None:
            state = {
                k: v.detach().cpu().contiguous()
                for k, v in self.state_dict().items()
                if not k.startswith("text_encoder.")
            }
            save_file(state, str(Path(directory) / KNOWBERT_WEIGHTS))
            config = {"kgs": {name: vars(spec) for name, spec in self.specs.items()}}
            (Path(directory) / KNOWBERT_CONFIG).write_text(json.dumps(config, indent=2) + "\n")

        saved = registry.save(
            ENCODER, self.text_encoder, path, extra_writers=[write, *extra_writers], kind=KNOWBERT
        )
        return Path(saved)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> KnowBertEncoder:
        """Load what :meth:`save_pretrained` wrote."""
        path = Path(path)
        config_path = path / KNOWBERT_CONFIG
        if not config_path.is_file():
            raise FileNotFoundError(
                f"{config_path}: not a KnowBERT folder (no {KNOWBERT_CONFIG}); a plain text "
                "encoder loads with TransformerEncoder.from_pretrained"
            )
        specs = {
            name: KarSpec(**values)
            for name, values in json.loads(config_path.read_text())["kgs"].items()
        }
        state = check_finite(load_file(str(path / KNOWBERT_WEIGHTS)), path / KNOWBERT_WEIGHTS)
        tables = {name: state[f"kars.{name}.linker.entity_table"] for name in specs}
        model = cls(TransformerEncoder.from_pretrained(path), tables, specs)
        missing = sorted(set(model.state_dict()) - set(state) - _text_keys(model))
        if missing:
            raise ValueError(f"{path / KNOWBERT_WEIGHTS}: missing tensors {missing[:5]}")
        model.load_state_dict({**model.state_dict(), **state})
        return model


def _text_keys(model: KnowBertEncoder) -> set[str]:
    return {k for k in model.state_dict() if k.startswith("text_encoder.")}


def recognizes(path: str | Path) -> bool:
    """Whether ``path`` is a KnowBERT folder (its ``knowbert_config.json``)."""
    return (Path(path) / KNOWBERT_CONFIG).is_file()


__all__ = [
    "KNOWBERT_CONFIG",
    "KNOWBERT_WEIGHTS",
    "KarSpec",
    "KnowBertEncoder",
    "KnowBertOutput",
    "recognizes",
]
