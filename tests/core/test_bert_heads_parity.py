"""BERT pre-training heads: HF BertForPreTraining logits and loss equal ptm's MLM + NSP."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertForPreTraining

from ptm_core import TransformerEncoder
from ptm_core.checkpoints.hf.bert_heads import (
    bert_pretraining_heads_to_hf,
    hf_head_state,
    load_bert_pretraining_heads,
)
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo


def test_hf_pretraining_heads_give_the_same_loss(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=90,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    hf = BertForPreTraining(config).eval()
    with torch.no_grad():
        hf.cls.predictions.bias.normal_()  # non-zero, so a missed copy shows
    hf.save_pretrained(tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path).eval()
    vocab = VocabInfo(90, 0, 1, 2, 3, 4)
    mlm, nsp = (
        build_objective(MaskedLMObjective, encoder, vocab),
        build_objective(NextSentenceObjective, encoder, vocab),
    )
    assert load_bert_pretraining_heads(hf_head_state(str(tmp_path)), mlm, nsp) == []
    model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm, "nsp": nsp})).eval()

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 90, (3, 10), generator=gen)
    labels = torch.full_like(ids, -100)
    labels[:, 2], labels[:, 6] = ids[:, 2], ids[:, 6]
    nsp_labels = torch.tensor([0, 1, 0])
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "mlm_labels": labels,
        "next_sentence_label": nsp_labels,
    }
    with torch.no_grad():
        ours = model(batch)
        theirs = hf(
            input_ids=ids,
            labels=labels,
            next_sentence_label=nsp_labels,
            token_type_ids=torch.zeros_like(ids),
        )
    assert abs(ours.loss.item() - theirs.loss.item()) <= 1e-5
    exported = bert_pretraining_heads_to_hf(mlm, nsp)
    assert torch.equal(exported["cls.predictions.bias"], hf.cls.predictions.bias)
    assert torch.equal(exported["pooler.dense.weight"], hf.bert.pooler.dense.weight)
