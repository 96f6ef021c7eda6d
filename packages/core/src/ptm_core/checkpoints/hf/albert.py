"""Hugging Face ALBERT (``AlbertModel`` / ``AlbertForPreTraining``) <-> ptm.

ptm's ALBERT is a :class:`~ptm_core.encoders.TransformerEncoder` with
``embedding_size=E`` and ``share_layers="all"``: its one shared layer maps onto
``albert.encoder.albert_layer_groups.0.albert_layers.0`` (one group, one inner layer,
the released ALBERT layout), ``embedding_projection`` onto
``encoder.embedding_hidden_mapping_in``. Heads: ``predictions.*`` <->
:class:`~ptm_core.heads.MaskedLMHead` (``embedding_size=E``), ``albert.pooler`` +
``sop_classifier.classifier`` <-> :class:`~ptm_core.heads.SentencePairHead`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ptm_core.checkpoints.hf.bert import HF_BERT_CONFIG_KEYS, hf_bert_to_ptm, ptm_to_hf_bert
from ptm_core.checkpoints.io import CheckpointError, check_state, read_weights
from ptm_core.encoders.config import EncoderConfig
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.heads.sentence_pair import SentencePairHead

_CONFIG_KEYS = {**HF_BERT_CONFIG_KEYS, "embedding_size": "embedding_size"}
_LAYER = "encoder.albert_layer_groups.0.albert_layers.0."
# ALBERT layer name -> BERT layer name (relative to the layer prefix).
_LAYER_TO_BERT = {
    "attention.query": "attention.self.query",
    "attention.key": "attention.self.key",
    "attention.value": "attention.self.value",
    "attention.dense": "attention.output.dense",
    "attention.LayerNorm": "attention.output.LayerNorm",
    "ffn": "intermediate.dense",
    "ffn_output": "output.dense",
    "full_layer_layer_norm": "output.LayerNorm",
}
_PROJECTION = "encoder.embedding_hidden_mapping_in"
_HEAD_PREFIXES = ("pooler.", "predictions.", "sop_classifier.")


def config_from_hf(config: dict[str, Any], *, source: str) -> EncoderConfig:
    """An :class:`EncoderConfig` for an ``AlbertConfig`` dict (one shared layer group)."""
    groups = (config.get("num_hidden_groups", 1), config.get("inner_group_num", 1))
    if groups != (1, 1):
        raise CheckpointError(
            f"{source}: num_hidden_groups={groups[0]}, inner_group_num={groups[1]}; ptm maps "
            "ALBERT checkpoints with one shared layer group of one layer (every released model)"
        )
    values = {ours: config[theirs] for theirs, ours in _CONFIG_KEYS.items() if theirs in config}
    values["pad_token_id"] = values.get("pad_token_id") or 0
    values["embedding_size"] = values.get("embedding_size", 128)
    if values["embedding_size"] == values.get("hidden_size", 768):
        raise CheckpointError(
            f"{source}: embedding_size equals hidden_size; ALBERT still has an E -> D "
            "projection there, which ptm only builds when the widths differ"
        )
    try:
        return EncoderConfig(**values, share_layers="all")
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from None


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """An ``AlbertConfig`` dict for ``config`` (post-LN, factorised, ``share_layers="all"``)."""
    if config.share_layers != "all" or not config.factorised or config.norm_position != "post":
        raise CheckpointError(
            "only post-LN encoders with share_layers='all' and embedding_size != hidden_size "
            f"can be exported as ALBERT (got share_layers={config.share_layers!r}, "
            f"embedding_size={config.embedding_size}, norm_position={config.norm_position!r}); "
            "save it with format='ptm'"
        )
    hf = {theirs: getattr(config, ours) for theirs, ours in _CONFIG_KEYS.items()}
    hf.update(
        architectures=["AlbertModel"],
        model_type="albert",
        num_hidden_groups=1,
        inner_group_num=1,
        position_embedding_type="absolute",
    )
    return hf


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map ALBERT tensors onto ptm names; same contract as :func:`hf_bert_to_ptm`.

    Only ``layers.0.*`` is returned for the shared layer; the loader fills the other
    layer names, which point at the same tensors.
    """
    as_bert: dict[str, Tensor] = {}
    extra: dict[str, Tensor] = {}
    heads: dict[str, Tensor] = {}
    for name, tensor in state.items():
        key = name.removeprefix("albert.")
        if key.startswith(_HEAD_PREFIXES):
            heads[key] = tensor
        elif key.startswith(_PROJECTION):
            extra["embedding_projection" + key[len(_PROJECTION) :]] = tensor
        elif key.startswith(_LAYER):
            rest = key[len(_LAYER) :]
            module, _, kind = rest.rpartition(".")
            bert_name = _LAYER_TO_BERT.get(module)
            target = f"encoder.layer.0.{bert_name}.{kind}" if bert_name else f"albert.{key}"
            as_bert[target] = tensor
        else:
            as_bert[key] = tensor
    encoder_state, _, missing, unknown = hf_bert_to_ptm(as_bert, num_layers=1)
    encoder_state.update(extra)
    for kind in ("weight", "bias"):
        if f"embedding_projection.{kind}" not in extra:
            missing.append(f"{_PROJECTION}.{kind}")
    missing = [_bert_to_albert_name(n) for n in missing]
    return encoder_state, heads, missing, unknown


def _bert_to_albert_name(name: str) -> str:
    prefix = "encoder.layer.0."
    if not name.startswith(prefix):
        return name
    module, _, kind = name[len(prefix) :].rpartition(".")
    reverse = {v: k for k, v in _LAYER_TO_BERT.items()}
    return f"{_LAYER}{reverse.get(module, module)}.{kind}"


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """ptm encoder tensors -> ``AlbertModel`` names (no ``albert.`` prefix)."""
    bert = ptm_to_hf_bert(state, num_layers=1)
    out: dict[str, Tensor] = {}
    for name, tensor in bert.items():
        if name.startswith("encoder.layer.0."):
            out[_bert_to_albert_name(name)] = tensor
        else:
            out[name] = tensor
    for kind in ("weight", "bias"):
        out[f"{_PROJECTION}.{kind}"] = state[f"embedding_projection.{kind}"].detach().clone()
    return out


def heads_from_hf(
    heads: dict[str, Tensor],
    mlm_head: MaskedLMHead | None = None,
    sop_head: SentencePairHead | None = None,
    *,
    source: str = "checkpoint",
) -> None:
    """Load ``AlbertForPreTraining`` head tensors (prefix-free names) into ptm heads."""
    if mlm_head is not None:
        mlm = {
            "dense.weight": "predictions.dense.weight",
            "dense.bias": "predictions.dense.bias",
            "norm.weight": "predictions.LayerNorm.weight",
            "norm.bias": "predictions.LayerNorm.bias",
            "decoder.weight": "predictions.decoder.weight",
            "decoder.bias": "predictions.bias",
        }
        if "predictions.decoder.weight" not in heads:
            # transformers leaves the decoder weight out: it is tied to the token table,
            # which the encoder load already filled (the ptm head is tied to it too).
            heads = {**heads, "predictions.decoder.weight": mlm_head.decoder.weight.detach()}
        _load_mapped(mlm_head, heads, mlm, source)
    if sop_head is not None:
        sop = {
            "pooler.dense.weight": "pooler.weight",
            "pooler.dense.bias": "pooler.bias",
            "classifier.weight": "sop_classifier.classifier.weight",
            "classifier.bias": "sop_classifier.classifier.bias",
        }
        _load_mapped(sop_head, heads, sop, source)


def heads_to_hf(
    mlm_head: MaskedLMHead | None = None, sop_head: SentencePairHead | None = None
) -> dict[str, Tensor]:
    """ptm heads -> ``AlbertForPreTraining`` tensor names (without ``albert.`` on the pooler)."""
    out: dict[str, Tensor] = {}
    if mlm_head is not None:
        out.update(
            {
                "predictions.dense.weight": mlm_head.dense.weight,
                "predictions.dense.bias": mlm_head.dense.bias,
                "predictions.LayerNorm.weight": mlm_head.norm.weight,
                "predictions.LayerNorm.bias": mlm_head.norm.bias,
                "predictions.decoder.weight": mlm_head.decoder.weight,
                "predictions.decoder.bias": mlm_head.decoder.bias,
                "predictions.bias": mlm_head.decoder.bias,
            }
        )
    if sop_head is not None:
        out.update(
            {
                "pooler.weight": sop_head.pooler.dense.weight,
                "pooler.bias": sop_head.pooler.dense.bias,
                "sop_classifier.classifier.weight": sop_head.classifier.weight,
                "sop_classifier.classifier.bias": sop_head.classifier.bias,
            }
        )
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def _load_mapped(module: Any, heads: dict[str, Tensor], names: dict[str, str], source: str) -> None:
    absent = sorted(theirs for theirs in names.values() if theirs not in heads)
    if absent:
        raise CheckpointError(
            f"{source}: head tensors {absent} are missing; the checkpoint has no "
            "pre-training heads (an AlbertModel/ElectraModel export), load the encoder only"
        )
    check_state(module, {ours: heads[theirs] for ours, theirs in names.items()}, source=source)


def load_pretraining_heads(
    path: str | Path, mlm_head: MaskedLMHead | None, sop_head: SentencePairHead | None
) -> None:
    """Load the heads of an ``AlbertForPreTraining`` directory into ptm heads."""
    weights, weights_path = read_weights(Path(path))
    heads = {k.removeprefix("albert."): v for k, v in weights.items()}
    heads_from_hf(heads, mlm_head, sop_head, source=str(weights_path))


#: The encoder's weight prefix in an ``AlbertForPreTraining`` file.
HF_PREFIX = "albert."


def pretraining_heads() -> tuple[Any, ...]:
    """The heads an ``AlbertForPreTraining`` folder fills: MLM, SOP."""
    from ptm_core.checkpoints.hf.pretraining_heads import HFHead
    from ptm_core.objectives.mlm import MaskedLMObjective
    from ptm_core.objectives.sop import SentenceOrderObjective

    return (
        HFHead(
            MaskedLMObjective,
            ("predictions.bias", "predictions.dense.weight"),
            lambda heads, objective, _dir, source: heads_from_hf(
                heads, mlm_head=objective.head, source=source
            ),
        ),
        HFHead(
            SentenceOrderObjective,
            ("sop_classifier.classifier.weight", "pooler.weight"),
            lambda heads, objective, _dir, source: heads_from_hf(
                heads, sop_head=objective.head, source=source
            ),
        ),
    )


def task_heads(model_type: str = "albert") -> tuple[Any, ...]:
    """The ``AlbertFor...`` fine-tuning classes (:mod:`ptm_core.checkpoints.hf.task_heads`):
    BERT's heads, the pooler at ``albert.pooler``."""
    from ptm_core.checkpoints.hf.task_heads import bert_style_rows

    return bert_style_rows(
        "Albert",
        {"pooler.dense.weight": "albert.pooler.weight", "pooler.dense.bias": "albert.pooler.bias"},
        sequence_dropout=("classifier_dropout_prob",),
        token_dropout=("classifier_dropout_prob", "hidden_dropout_prob"),
    )
