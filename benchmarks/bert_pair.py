"""A ptm model and a transformers model with the same weights, and batches for both."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Any

import torch

SIZES: dict[str, dict[str, Any]] = {
    "mini": dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    ),
    "base": dict(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    ),
    "large": dict(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
    ),
}
VOCAB_SIZE = 30522


@dataclass
class BertPair:
    """``ours`` (ptm PretrainingModel: MLM + NSP) and ``theirs`` (BertForPreTraining)."""

    ours: Any
    theirs: Any
    encoder: Any


def build_pair(size: str, *, dropout: float = 0.1, seed: int = 0) -> BertPair:
    """Random-init ``BertForPreTraining`` and the same weights loaded into ptm."""
    from transformers import BertConfig, BertForPreTraining

    from ptm_core import TransformerEncoder
    from ptm_core.checkpoints.hf.bert_heads import hf_head_state, load_bert_pretraining_heads

    torch.manual_seed(seed)
    settings: dict[str, Any] = {
        "vocab_size": VOCAB_SIZE,
        "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": dropout,
        "attn_implementation": "sdpa",
        **SIZES[size],
    }
    config = BertConfig(**settings)
    theirs = BertForPreTraining(config)
    with tempfile.TemporaryDirectory() as directory:
        theirs.save_pretrained(directory)
        encoder = TransformerEncoder.from_pretrained(directory)
        ours = _ptm_pretraining(encoder)
        heads = ours.objectives.objectives
        load_bert_pretraining_heads(hf_head_state(directory), heads["mlm"], heads["nsp"])
    return BertPair(ours=ours, theirs=theirs, encoder=encoder)


def _ptm_pretraining(encoder: Any) -> Any:
    """ptm's MLM + NSP pre-training model on ``encoder``."""
    from ptm_core.models import PretrainingModel
    from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.tokenization import VocabInfo

    vocab = VocabInfo(VOCAB_SIZE, 0, 100, 101, 102, 103)
    mlm = build_objective(MaskedLMObjective, encoder, vocab)
    nsp = build_objective(NextSentenceObjective, encoder, vocab)
    return PretrainingModel(encoder, ObjectiveMix({"mlm": mlm, "nsp": nsp}))


def build_alone(impl: str, size: str, *, dropout: float = 0.1, seed: int = 0) -> Any:
    """One side's pre-training model, built as its own users build it, importing only its
    own library (``"ptm"``: ``bert_encoder`` + MLM + NSP; ``"transformers"``:
    ``BertForPreTraining``). The same architecture as :func:`build_pair`'s, other random
    weights: for whole-process memory, where the other library and a second copy of the
    weights would count against the side being measured."""
    torch.manual_seed(seed)
    shape = SIZES[size]
    if impl == "transformers":
        from transformers import BertConfig, BertForPreTraining

        config = BertConfig(
            vocab_size=VOCAB_SIZE,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
            attn_implementation="sdpa",
            **shape,
        )
        return BertForPreTraining(config)
    from ptm_core.encoders.presets import bert_encoder

    encoder = bert_encoder(
        vocab_size=VOCAB_SIZE,
        hidden_size=shape["hidden_size"],
        num_layers=shape["num_hidden_layers"],
        num_heads=shape["num_attention_heads"],
        intermediate_size=shape["intermediate_size"],
        dropout=dropout,
        attention_dropout=dropout,
    )
    return _ptm_pretraining(encoder)


def make_batch(batch_size: int, length: int, *, seed: int = 0) -> dict[str, torch.Tensor]:
    """A BERT batch with 15% masked positions (labels) and NSP labels; no padding."""
    from ptm_core.objectives import mask_tokens
    from ptm_core.tokenization import VocabInfo

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, VOCAB_SIZE, (batch_size, length), generator=gen)
    ids[:, 0], ids[:, length // 2], ids[:, -1] = 101, 102, 102
    special = torch.zeros_like(ids)
    special[:, [0, length // 2, length - 1]] = 1
    vocab = VocabInfo(VOCAB_SIZE, 0, 100, 101, 102, 103)
    corrupted, labels = mask_tokens(ids, special, vocab, gen)
    types = torch.zeros_like(ids)
    types[:, length // 2 + 1 :] = 1
    return {
        "input_ids": corrupted,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": types,
        "mlm_labels": labels,
        "next_sentence_label": torch.randint(0, 2, (batch_size,), generator=gen),
    }


def hf_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same batch in ``BertForPreTraining``'s argument names."""
    return {
        "input_ids": batch["input_ids"],
        "attention_mask": batch["attention_mask"],
        "token_type_ids": batch["token_type_ids"],
        "labels": batch["mlm_labels"],
        "next_sentence_label": batch["next_sentence_label"],
    }


def ptm_optimizer(
    model: torch.nn.Module, lr: float, *, lookups: bool = True
) -> torch.optim.Optimizer:
    """What ptm's Trainer sets up on defaults: :func:`ptm_core.training.build_optimizer`
    and, unless ``lookups`` is false (the Trainer's choice under ``torch.compile``), the
    tied token table's lookups that add their gradient rows in place
    (:class:`~ptm_core.training.sparse_lookups.TiedLookupRows`; BERT's MLM decoder gives
    the table a gradient every step, so no ``flush`` is needed in these loops)."""
    from ptm_core.training import build_optimizer
    from ptm_core.training.config import TrainerConfig
    from ptm_core.training.sparse_lookups import TiedLookupRows

    if lookups:
        TiedLookupRows(model)
    return build_optimizer(model, TrainerConfig(output_dir="unused", learning_rate=lr))


def hf_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    """What ``transformers.Trainer`` builds by default: its ``TrainingArguments.optim``.

    ``adamw_torch_fused`` (the default on torch >= 2.8) is ``torch.optim.AdamW(fused=True)``,
    ``adamw_torch`` the same without ``fused``; weight decay 0 on every group (its default).
    """
    from transformers import TrainingArguments

    def default(field: str) -> Any:
        return TrainingArguments.__dataclass_fields__[field].default

    name = str(default("optim"))
    if name not in ("adamw_torch_fused", "adamw_torch"):
        raise RuntimeError(f"transformers' default optimizer is {name!r}; update hf_optimizer")
    return torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        betas=(default("adam_beta1"), default("adam_beta2")),
        eps=default("adam_epsilon"),
        weight_decay=default("weight_decay"),
        fused=name == "adamw_torch_fused" or None,
    )


def describe_optimizer(optimizer: torch.optim.Optimizer) -> str:
    """``"AdamW fused"`` / ``"AdamW foreach"``: which implementation steps."""
    fused = optimizer.defaults.get("fused")
    return f"{type(optimizer).__name__} {'fused' if fused else 'foreach'}"
