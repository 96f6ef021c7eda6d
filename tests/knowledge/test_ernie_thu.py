"""ERNIE-THU: K-Encoder isolation, dEA corruption rates, BERT initialisation."""

from __future__ import annotations

import pytest
import torch

from ptm_core.encoders import bert_encoder
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective, corrupt_entities
from ptm_knowledge.ernie.thu_encoder import AggregatorLayer, KnowledgeableEncoder


def _encoder(layers: int = 2, **kwargs) -> KnowledgeableEncoder:
    text = bert_encoder(
        vocab_size=50,
        hidden_size=32,
        num_layers=layers,
        num_heads=2,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return KnowledgeableEncoder(text, torch.randn(20, 8), 1, entity_heads=2, **kwargs)


def test_token_without_entity_ignores_entity_embeddings() -> None:
    torch.manual_seed(0)
    model = _encoder().eval()
    ids = torch.randint(5, 50, (2, 9))
    entity_ids = torch.full((2, 9), -1)
    entity_ids[0, 2], entity_ids[0, 5], entity_ids[1, 1] = 3, 7, 11
    base = model(ids, entity_ids=entity_ids)
    model.entity_table.normal_()  # every entity embedding changes
    changed = model(ids, entity_ids=entity_ids)
    none = entity_ids < 0
    assert torch.allclose(base.last_hidden_state[none], changed.last_hidden_state[none], atol=1e-6)
    assert not torch.allclose(base.last_hidden_state[~none], changed.last_hidden_state[~none])
    assert (changed.entity_hidden_state[none] == 0).all()


def test_entity_bias_quirk_switch() -> None:
    layer = AggregatorLayer(
        16, 8, 2, 2, 32, dropout=0.0, attention_dropout=0.0, entity_bias_everywhere=True
    )
    tokens, entities = torch.randn(1, 4, 16), torch.zeros(1, 4, 8)
    has = torch.zeros(1, 4, dtype=torch.bool)
    before, _ = layer(tokens, entities, has)
    with torch.no_grad():
        layer.fuse_entity.bias.fill_(1.0)
    after, _ = layer(tokens, entities, has)
    assert not torch.allclose(before, after)  # released-code behaviour: b_e reaches every token
    paper = AggregatorLayer(16, 8, 2, 2, 32)
    assert paper.fuse_entity.bias is None


def test_dea_rates_over_10k_aligned_tokens() -> None:
    ids = torch.randint(-1, 30, (100, 300))  # ~29k aligned
    aligned = int((ids >= 0).sum())
    corrupted, decision = corrupt_entities(ids, 30, torch.Generator().manual_seed(0))
    assert aligned >= 10_000
    rates = [float((decision == code).sum()) / aligned for code in (0, 1, 2)]
    print(f"\ndEA kept/replaced/dropped over {aligned} aligned tokens: {rates}")
    assert abs(rates[0] - 0.80) <= 0.015
    assert abs(rates[1] - 0.05) <= 0.015
    assert abs(rates[2] - 0.15) <= 0.015
    assert (corrupted[decision == 2] == -1).all()
    assert torch.equal(corrupted[decision == 0], ids[decision == 0])
    assert (corrupted[ids < 0] == -1).all()


def test_dea_softmax_over_batch_entities() -> None:
    model = _encoder()
    objective = DenoisingEntityAutoencoderObjective(model)
    ids = torch.randint(5, 50, (2, 6))
    entity_ids = torch.tensor([[-1, 4, -1, 9, -1, -1], [4, -1, -1, -1, 15, -1]])
    batch = objective.collate(
        {"input_ids": ids, "entity_ids": entity_ids, "attention_mask": torch.ones(2, 6)},
        torch.Generator().manual_seed(0),
    )
    out = objective(model(ids, entity_ids=batch["entity_ids"]), batch)
    assert float(out.metrics["candidates"]) == 3.0  # {4, 9, 15}
    assert out.loss.requires_grad


def test_from_text_encoder_splits_layers() -> None:
    torch.manual_seed(0)
    text = bert_encoder(
        vocab_size=50, hidden_size=32, num_layers=3, num_heads=2, dropout=0.0, attention_dropout=0.0
    ).eval()
    ids = torch.randint(5, 50, (1, 7))
    reference = text(ids).last_hidden_state
    # The released code's output form (linear output sub-layer): then, without entities, a
    # BERT-initialised aggregator is exactly the BERT layer it came from.
    model = KnowledgeableEncoder.from_text_encoder(
        text, torch.randn(10, 8), 1, output_activation=False
    ).eval()
    assert model.text_config.num_layers == 2 and len(model.knowledge_layers) == 1
    out = model(ids, entity_ids=torch.full((1, 7), -1)).last_hidden_state
    torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="num_knowledge_layers"):
        KnowledgeableEncoder.from_text_encoder(
            bert_encoder(vocab_size=50, hidden_size=32, num_layers=1, num_heads=2),
            torch.randn(3, 8),
            1,
        )


def test_text_layers_from_a_hugging_face_bert_checkpoint(tmp_path) -> None:
    torch.manual_seed(0)
    bert = bert_encoder(
        vocab_size=50, hidden_size=32, num_layers=2, num_heads=2, dropout=0.0, attention_dropout=0.0
    ).eval()
    hf_dir = bert.save_pretrained(tmp_path / "hf", format="hf")
    from ptm_core import TransformerEncoder

    loaded = TransformerEncoder.from_pretrained(hf_dir)
    model = KnowledgeableEncoder.from_text_encoder(
        loaded, torch.randn(5, 8), 1, output_activation=False
    ).eval()
    ids = torch.randint(5, 50, (1, 6))
    torch.testing.assert_close(model(ids).last_hidden_state, bert(ids).last_hidden_state)


def test_save_and_load_round_trip(tmp_path) -> None:
    torch.manual_seed(0)
    model = _encoder(entity_bias_everywhere=True).eval()
    ids = torch.randint(5, 50, (1, 6))
    entity_ids = torch.tensor([[-1, 3, -1, -1, 12, -1]])
    out = model.save_pretrained(tmp_path / "thu", entity_ids=[f"e{i}" for i in range(20)])
    loaded = KnowledgeableEncoder.from_pretrained(out).eval()
    assert loaded.options == model.options
    torch.testing.assert_close(
        loaded(ids, entity_ids=entity_ids).last_hidden_state,
        model(ids, entity_ids=entity_ids).last_hidden_state,
    )


class _CopyingHead(torch.nn.Module):
    """Predicts the entity the token carries in its (corrupted) input: the copying shortcut.

    The token state's first feature holds the input entity id (-1: dropped), its second
    the true one; a dropped entity is answered with another entity (always wrong).
    """

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        ids = hidden[:, 0].long()
        wrong = (hidden[:, 1].long() + 1) % self.table.shape[0]
        return self.table[torch.where(ids < 0, wrong, ids)]


def test_dea_corrupted_accuracy_scores_exactly_the_corrupted_tokens() -> None:
    num_entities = 40
    text = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2)
    # One-hot entity rows: an entity's score is 1 for itself and 0 for every other.
    model = KnowledgeableEncoder(text, torch.eye(num_entities), 1, entity_heads=2)
    objective = DenoisingEntityAutoencoderObjective(model)
    objective.head = _CopyingHead(model.entity_table)
    ids = torch.randint(-1, num_entities, (60, 200), generator=torch.Generator().manual_seed(3))
    batch = objective.collate(
        {"entity_ids": ids, "attention_mask": torch.ones_like(ids)},
        torch.Generator().manual_seed(7),
    )
    _, decision = corrupt_entities(ids, num_entities, torch.Generator().manual_seed(7))
    assert torch.equal(batch["dea_corrupted"], decision > 0)
    hidden = torch.zeros(*ids.shape, 32)
    hidden[..., 0] = batch["entity_ids"].float()
    hidden[..., 1] = ids.float()
    from ptm_core.encoders.transformer import EncoderOutput

    metrics = objective(EncoderOutput(last_hidden_state=hidden), batch).metrics
    aligned = ids >= 0
    noisy = aligned & (decision > 0)
    right = batch["entity_ids"] == ids  # copying is right where the input kept the entity
    assert float(metrics["corrupted"]) == float(noisy.sum())
    expected = float(right[noisy].float().mean())
    assert float(metrics["corrupted_accuracy"]) == pytest.approx(expected, abs=1e-6)
    # Copying scores near 0.8 on all tokens and near chance on the corrupted ones.
    assert 0.78 <= float(metrics["accuracy"]) <= 0.83
    assert float(metrics["corrupted_accuracy"]) <= 0.05
