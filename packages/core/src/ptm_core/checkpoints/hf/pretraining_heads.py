"""Continue pre-training a Hugging Face checkpoint with its own pre-training heads.

``ptm pretrain init_from=<folder>`` reads ptm's ``heads.safetensors`` when the folder is a
ptm ``final/``. A Hugging Face folder keeps its heads in the model file instead, under the
names of its ``...ForPreTraining`` class; :func:`load_hf_pretraining_heads` puts them into
the run's objectives:

==========  ==========================================  ==========================
model_type  Hugging Face heads                          ptm objectives
==========  ==========================================  ==========================
bert        ``cls.predictions.*``, ``bert.pooler``,      MLM (and its subclasses:
            ``cls.seq_relationship``                     WWM, span masking), NSP
albert      ``predictions.*``, ``albert.pooler``,        MLM, SOP
            ``sop_classifier``
electra     ``discriminator_predictions.*``             replaced token detection
                                                        (the discriminator)
electra     ``generator_predictions.*``,                MLM (``ElectraForMaskedLM``,
            ``generator_lm_head.bias``                  the generator)
xlnet       ``lm_loss.bias``                            permutation LM
==========  ==========================================  ==========================

Each converter module (``ptm_core.checkpoints.hf.<model_type>``, named by its family spec's
``hf_model_types``) says which heads it can fill: ``HF_PREFIX`` (its encoder's weight
prefix) and ``pretraining_heads()``, a table of :class:`HFHead` rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptm_core.checkpoints.io import read_json_object, read_weights

if TYPE_CHECKING:
    from torch import Tensor

    from ptm_core.objectives.mix import ObjectiveMix


@dataclass(frozen=True)
class HFHead:
    """One pre-training head a Hugging Face ``...ForPreTraining`` folder can fill.

    Attributes:
        objective: the ptm objective class it fills (subclasses too: WWM is an MLM).
        needs: the head tensors (names without the encoder prefix) that must be in the file.
        load: ``load(heads, objective, directory, source)`` copies them into the objective.
    """

    objective: type
    needs: tuple[str, ...]
    load: Callable[[dict[str, Tensor], Any, Path, str], object]


def load_hf_pretraining_heads(
    mix: ObjectiveMix, directory: str | Path
) -> tuple[list[str], list[str]]:
    """Fill the heads of ``mix``'s objectives from a Hugging Face folder's weights.

    Args:
        mix: the run's objectives (built on the encoder loaded from ``directory``).
        directory: a Hugging Face ``BertForPreTraining`` / ``AlbertForPreTraining`` /
            ``ElectraForPreTraining`` / ``XLNetLMHeadModel`` folder (a bare ``...Model``
            holds no heads: every objective then starts from random init).

    Returns:
        ``(loaded, fresh)``: the names of the objectives whose heads came from the folder,
        and of those that start from random init (no such head in the file, or no
        Hugging Face counterpart).

    Raises:
        CheckpointError: a head tensor's shape does not fit (the message names the file).
    """
    from ptm_core.checkpoints import registry
    from ptm_core.checkpoints.io import CheckpointError

    directory = Path(directory)
    model_type = str(read_json_object(directory / "config.json").get("model_type", "bert"))
    converter = registry.hf_encoder_family(model_type)
    rows = getattr(converter, "pretraining_heads", None)
    table: tuple[HFHead, ...] = rows() if rows is not None else ()
    weights, weights_path = read_weights(directory)
    prefix = str(getattr(converter, "HF_PREFIX", ""))
    heads = {k.removeprefix(prefix): v for k, v in weights.items()}
    heads = {
        k.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        ): v
        for k, v in heads.items()
    }
    loaded: list[str] = []
    source = str(weights_path)
    for name, objective in mix:
        row = next((r for r in table if isinstance(objective, r.objective)), None)
        if row is None or not all(key in heads for key in row.needs):
            continue
        try:
            row.load(heads, objective, directory, source)
        except ValueError as exc:
            raise CheckpointError(f"{source}: the {name} head does not fit: {exc}") from None
        loaded.append(name)
    fresh = [name for name, _ in mix if name not in loaded]
    return loaded, fresh


def copy_head(heads: dict[str, Tensor], objective: Any, names: dict[str, str]) -> None:
    """Copy ``heads[theirs]`` into ``objective``'s parameter ``ours`` for each name pair.

    Raises:
        ValueError: a tensor's shape differs from the parameter's (names both shapes).
    """
    import torch

    params = dict(objective.named_parameters())
    with torch.no_grad():
        for ours, theirs in names.items():
            if theirs not in heads:
                raise ValueError(f"{theirs} is absent (the head needs {', '.join(names.values())})")
            if params[ours].shape != heads[theirs].shape:
                raise ValueError(
                    f"{theirs}: checkpoint {tuple(heads[theirs].shape)} vs model "
                    f"{tuple(params[ours].shape)}"
                )
            params[ours].copy_(heads[theirs])


def masked_lm_head(names: dict[str, str]) -> HFHead:
    """The MLM row (MLM and its subclasses) of a ``...ForMaskedLM`` folder whose head
    tensors are ``names`` (ptm name relative to the objective -> the file's name; the
    decoder is tied to the token table, so its bias and the dense weight tell the head is
    there)."""
    from ptm_core.objectives.mlm import MaskedLMObjective

    return HFHead(
        MaskedLMObjective,
        (names["head.decoder.bias"], names["head.dense.weight"]),
        lambda heads, objective, _dir, _src: copy_head(heads, objective, names),
    )


def take_head_group(
    groups: dict[str, dict[str, Tensor]],
    names: dict[str, str],
    used: list[str],
    rows: dict[str, int] | None = None,
) -> dict[str, Tensor]:
    """For export: the first objective not in ``used`` whose tensors are exactly ``names``'
    keys, renamed to the file's names (its name is appended to ``used``); else ``{}``.

    Args:
        groups: the objectives' own tensors by objective name (``heads.safetensors``).
        names: ptm name -> the file's name of one head.
        used: objective names already exported.
        rows: the file's tensors whose first dimension the Hugging Face class fixes (BERT's
            NSP classifier: 2); a head of the same names and another size (StructBERT's
            3-way sentence head) is not that head and is left out.
    """
    sizes = rows or {}
    fixed = {ours: sizes[theirs] for ours, theirs in names.items() if theirs in sizes}
    for objective, tensors in groups.items():
        if any(ours in tensors and tensors[ours].shape[0] != n for ours, n in fixed.items()):
            continue
        if objective not in used and set(tensors) == set(names):
            used.append(objective)
            return {theirs: tensors[ours].contiguous() for ours, theirs in names.items()}
    return {}
