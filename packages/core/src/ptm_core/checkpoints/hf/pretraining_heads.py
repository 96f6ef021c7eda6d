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
xlnet       ``lm_loss.bias``                            permutation LM
==========  ==========================================  ==========================
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ptm_core.checkpoints.io import read_json_object, read_weights

if TYPE_CHECKING:
    from ptm_core.objectives.mix import ObjectiveMix


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
    from ptm_core.checkpoints.hf import albert, electra
    from ptm_core.checkpoints.hf.bert_heads import load_bert_pretraining_heads
    from ptm_core.checkpoints.io import CheckpointError
    from ptm_core.objectives.electra import ReplacedTokenDetectionObjective
    from ptm_core.objectives.mlm import MaskedLMObjective
    from ptm_core.objectives.nsp import NextSentenceObjective
    from ptm_core.objectives.permutation_lm import PermutationLMObjective
    from ptm_core.objectives.sop import SentenceOrderObjective

    directory = Path(directory)
    model_type = str(read_json_object(directory / "config.json").get("model_type", "bert"))
    weights, weights_path = read_weights(directory)
    prefix = {"bert": "bert.", "albert": "albert.", "electra": "electra.", "xlnet": "transformer."}
    heads = {k.removeprefix(prefix.get(model_type, "")): v for k, v in weights.items()}
    heads = {
        k.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        ): v
        for k, v in heads.items()
    }
    loaded: list[str] = []
    source = str(weights_path)

    def has(*names: str) -> bool:
        return all(name in heads for name in names)

    for name, objective in mix:
        try:
            if model_type == "bert" and isinstance(objective, MaskedLMObjective):
                if has("cls.predictions.bias", "cls.predictions.transform.dense.weight"):
                    load_bert_pretraining_heads(heads, mlm=objective)
                    loaded.append(name)
            elif model_type == "bert" and isinstance(objective, NextSentenceObjective):
                if has("cls.seq_relationship.weight", "pooler.dense.weight"):
                    load_bert_pretraining_heads(heads, nsp=objective)
                    loaded.append(name)
            elif model_type == "albert" and isinstance(objective, MaskedLMObjective):
                if has("predictions.bias", "predictions.dense.weight"):
                    albert.heads_from_hf(heads, mlm_head=objective.head, source=source)
                    loaded.append(name)
            elif model_type == "albert" and isinstance(objective, SentenceOrderObjective):
                if has("sop_classifier.classifier.weight", "pooler.weight"):
                    albert.heads_from_hf(heads, sop_head=objective.head, source=source)
                    loaded.append(name)
            elif model_type == "electra" and isinstance(objective, ReplacedTokenDetectionObjective):
                if has("discriminator_predictions.dense.weight"):
                    electra.discriminator_head_from_hf(
                        heads, objective.discriminator_head, source=source
                    )
                    loaded.append(name)
            elif (
                model_type == "xlnet"
                and isinstance(objective, PermutationLMObjective)
                and has("lm_loss.bias")
            ):
                from ptm_core.checkpoints.hf.xlnet import load_lm_head

                load_lm_head(directory, objective)
                loaded.append(name)
        except ValueError as exc:
            raise CheckpointError(f"{source}: the {name} head does not fit: {exc}") from None
    fresh = [name for name, _ in mix if name not in loaded]
    return loaded, fresh
