"""Feature-based BiLSTM-CRF tagger over a frozen encoder (TagLM / ELMo)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.presets import bert_encoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.feature_based import (
    FeatureBasedTagger,
    TaggerOutput,
    first_piece_positions,
    load_feature_based_tagger,
    save_feature_based_tagger,
)
from ptm_core.training.protocols import ModelOutput

TAGS = ["O", "B-X", "I-X"]


def tiny_encoder() -> TransformerEncoder:
    torch.manual_seed(0)
    return bert_encoder(
        vocab_size=40,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=32,
    )


def toy_batch(seed: int = 0, batch_size: int = 8, length: int = 12) -> dict[str, torch.Tensor]:
    """Rows [CLS] w ... [SEP] pad; words of one or two pieces; the tag is a function of the
    first piece's id (ids 4..15: O, 16..27: B-X, 28..39: I-X), continuation pieces -100."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.zeros(batch_size, length, dtype=torch.long)
    labels = torch.full((batch_size, length), -100)
    attention = torch.zeros(batch_size, length, dtype=torch.long)
    for row in range(batch_size):
        real = int(torch.randint(5, length + 1, (1,), generator=generator))
        input_ids[row, 0], input_ids[row, real - 1] = 2, 3
        attention[row, :real] = 1
        position = 1
        while position < real - 1:
            token = int(torch.randint(4, 40, (1,), generator=generator))
            input_ids[row, position] = token
            labels[row, position] = (token - 4) // 12
            pieces = int(torch.randint(1, 3, (1,), generator=generator))
            for extra in range(1, pieces):
                if position + extra < real - 1:
                    input_ids[row, position + extra] = int(
                        torch.randint(4, 40, (1,), generator=generator)
                    )
            position += pieces
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "token_type_ids": torch.zeros_like(input_ids),
        "labels": labels,
    }


def test_first_piece_positions_gathers_exactly_the_first_pieces_in_order() -> None:
    first = torch.tensor(
        [
            [0, 1, 0, 1, 1, 0, 0],
            [0, 0, 0, 0, 0, 0, 0],
            [0, 1, 1, 1, 1, 1, 0],
        ],
        dtype=torch.bool,
    )
    positions, word_mask = first_piece_positions(first)
    assert positions.shape == word_mask.shape == (3, 5)
    assert word_mask.tolist() == [
        [True, True, True, False, False],
        [False] * 5,
        [True] * 5,
    ]
    assert positions[0, :3].tolist() == [1, 3, 4]
    assert positions[2].tolist() == [1, 2, 3, 4, 5]
    empty_positions, empty_mask = first_piece_positions(torch.zeros(2, 4, dtype=torch.bool))
    assert empty_positions.shape == (2, 1) and not empty_mask.any()


def test_the_lstm_reads_the_mixed_features_at_the_first_pieces() -> None:
    tagger = FeatureBasedTagger(tiny_encoder(), len(TAGS), label_names=TAGS, constraint="bio")
    tagger.eval()
    batch = toy_batch()
    seen: list[torch.Tensor] = []
    tagger.lstm.register_forward_hook(
        lambda _m, args, _o: seen.append(
            torch.nn.utils.rnn.pad_packed_sequence(args[0], batch_first=True)[0]
        )
    )
    out = tagger(batch)
    mixed = tagger.features(
        batch["input_ids"], batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    )
    for row in range(batch["input_ids"].shape[0]):
        first = (batch["labels"][row] != -100).nonzero().squeeze(1)
        torch.testing.assert_close(seen[0][row, : len(first)], mixed[row, first])
        # Emissions and Viterbi tags sit at exactly those positions, nothing elsewhere.
        assert out.predictions is not None
        assert ((out.predictions[row] != -100).nonzero().squeeze(1) == first).all()
        others = torch.ones(batch["input_ids"].shape[1], dtype=torch.bool)
        others[first] = False
        assert (out.logits[row, others] == 0).all()
    assert isinstance(out, ModelOutput)


def test_only_the_mix_lstm_and_crf_learn_and_the_loss_falls() -> None:
    torch.manual_seed(0)
    # The toy tags are a function of the token, so they break BIO (I-X after O): no constraint.
    tagger = FeatureBasedTagger(
        tiny_encoder(), len(TAGS), label_names=TAGS, constraint=None, dropout=0.1
    )
    encoder_before = copy.deepcopy(tagger.features.encoder.state_dict())
    trainable_before = {
        n: p.detach().clone() for n, p in tagger.named_parameters() if p.requires_grad
    }
    assert {n.split(".")[0] for n in trainable_before} == {"features", "lstm", "emissions", "crf"}
    assert all(n.startswith("features.mix.") for n in trainable_before if n.startswith("features."))
    optimizer = torch.optim.AdamW([p for p in tagger.parameters() if p.requires_grad], lr=1e-2)
    batch = toy_batch()
    tagger.train()
    losses = []
    for _ in range(30):
        out = tagger(batch)
        assert out.loss is not None
        out.loss.backward()
        for name, param in tagger.features.encoder.named_parameters():
            assert param.grad is None, name
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(out.loss.detach()))
    assert losses[-1] < 0.2 * losses[0]
    assert float(out.metrics["accuracy"]) > 0.9
    for name, value in tagger.features.encoder.state_dict().items():
        assert torch.equal(value, encoder_before[name]), name
    changed = {
        n
        for n, p in tagger.named_parameters()
        if p.requires_grad and not torch.equal(p, trainable_before[n])
    }
    assert changed == set(trainable_before)  # mix scalars and gamma, LSTM, linear, CRF all moved
    assert not tagger.features.encoder.training  # frozen encoder stays in eval mode


def test_loss_is_the_mean_negative_crf_log_likelihood_over_words() -> None:
    tagger = FeatureBasedTagger(tiny_encoder(), len(TAGS))
    tagger.eval()
    batch = toy_batch(seed=3, batch_size=4)
    out = tagger(batch)
    positions, word_mask = first_piece_positions(batch["labels"] != -100)
    rows, slots = word_mask.nonzero(as_tuple=True)
    emissions = torch.zeros(*word_mask.shape, len(TAGS))
    emissions[rows, slots] = out.logits[rows, positions[rows, slots]]
    gold = batch["labels"].gather(1, positions).masked_fill(~word_mask, 0)
    expected = -tagger.crf.log_likelihood(emissions, gold, word_mask).mean()
    assert out.loss is not None
    torch.testing.assert_close(out.loss, expected)


def test_prediction_batches_need_the_first_pieces() -> None:
    tagger = FeatureBasedTagger(tiny_encoder(), len(TAGS), label_names=TAGS, constraint="bio")
    tagger.eval()
    batch = toy_batch(seed=1, batch_size=3)
    labelled = tagger(batch)
    first = batch.pop("labels") != -100
    with pytest.raises(ValueError, match="first_piece_mask"):
        tagger(batch)
    out = tagger({**batch, "first_piece_mask": first})
    assert isinstance(out, TaggerOutput) and out.loss is None and out.metrics == {}
    assert out.predictions is not None and labelled.predictions is not None
    assert torch.equal(out.predictions, labelled.predictions)
    with pytest.raises(ValueError, match="disagree"):
        tagger(
            {
                **batch,
                "first_piece_mask": first,
                "labels": torch.full_like(first, -100, dtype=torch.long),
            }
        )


def test_constraint_auto_follows_the_label_names() -> None:
    assert FeatureBasedTagger(tiny_encoder(), 3, label_names=TAGS).settings["constraint"] == "bio"
    assert (
        FeatureBasedTagger(tiny_encoder(), 2, label_names=["NN", "VB"]).settings["constraint"]
        is None
    )
    assert FeatureBasedTagger(tiny_encoder(), 3).settings["constraint"] is None
    tagger = FeatureBasedTagger(tiny_encoder(), 3, label_names=TAGS)
    assert not tagger.crf.allowed[0, 2]  # O -> I-X


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    tagger = FeatureBasedTagger(tiny_encoder(), 3, label_names=TAGS, lstm_hidden=8, lstm_layers=2)
    with torch.no_grad():
        tagger.features.mix.scalars.copy_(torch.tensor([0.3, -0.2, 1.0]))
        tagger.crf.transitions.add_(1.0)
    tagger.eval()
    batch = toy_batch(seed=2, batch_size=3)
    expected = tagger(batch)
    written = save_feature_based_tagger(
        tagger, tmp_path / "final", task_config={"task": "toy", "feature_based": True}
    )
    loaded, config = load_feature_based_tagger(written)
    loaded.eval()
    got = loaded(batch)
    torch.testing.assert_close(got.logits, expected.logits)
    assert got.predictions is not None and expected.predictions is not None
    assert torch.equal(got.predictions, expected.predictions)
    assert config["task"] == "toy" and config["label_names"] == TAGS
    assert config["feature_based"]["lstm_layers"] == 2
    assert not any(p.requires_grad for p in loaded.encoder.parameters())
    with pytest.raises(ValueError, match="num_labels"):
        save_feature_based_tagger(tagger, tmp_path / "bad", task_config={"num_labels": 5})
    (written / "task_head.safetensors").write_bytes(b"broken")
    with pytest.raises(CheckpointError, match=r"task_head\.safetensors"):
        load_feature_based_tagger(written)
