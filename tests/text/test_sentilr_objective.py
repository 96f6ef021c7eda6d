"""SentiLARE's network and label-aware MLM: the knowledge embeddings enter the embedding sum,
the heads tie to their tables, the loss is the reference's sum of four parts, the folder
round-trips; plus the objective contract."""

from __future__ import annotations

from pathlib import Path

import torch
from cases import TINY, VOCAB, ObjectiveTestCase
from torch import nn

from ptm_core import bert_encoder
from ptm_core.families import get
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_text.sentilr.checkpoint import load_sentilr, save_sentilr
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER
from ptm_text.sentilr.model import SentiLRKnowledgeEmbeddings, SentiLRModel
from ptm_text.sentilr.objective import LabelAwareMLMObjective

NUM_LABELS = 3


def _network(seed: int = 0) -> SentiLRModel:
    torch.manual_seed(seed)
    encoder = bert_encoder(vocab_size=VOCAB.vocab_size, **TINY)
    return SentiLRModel(encoder, SentiLRKnowledgeEmbeddings(TINY["hidden_size"], NUM_LABELS))


def _objective(network: SentiLRModel, **kwargs) -> LabelAwareMLMObjective:
    return build_objective(LabelAwareMLMObjective, network, VOCAB, **kwargs)


def _input(rows: int = 6, words: int = 10, seed: int = 0) -> dict[str, torch.Tensor]:
    """[CLS] w1 .. wn [SEP] with one piece per word, a few words polar."""
    gen = torch.Generator().manual_seed(seed)
    low = len(VOCAB.special_ids) + 1
    ids = torch.randint(low, VOCAB.vocab_size, (rows, words + 2), generator=gen)
    ids[:, 0], ids[:, -1] = VOCAB.cls_id, VOCAB.sep_id
    word = torch.arange(words + 2).repeat(rows, 1)
    word[:, -1] = 0  # 1-based words, 0 at [CLS]/[SEP]
    pos = torch.randint(0, 5, (rows, words + 2), generator=gen)
    polarity = torch.where(torch.rand(rows, words + 2, generator=gen) < 0.4,
                           torch.randint(0, 2, (rows, words + 2), generator=gen), NEUTRAL)  # fmt: skip
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "sentilr_word": word,
        "sentilr_pos": pos,
        "sentilr_polarity": polarity,
        "sentilr_label": torch.randint(0, NUM_LABELS, (rows,), generator=gen),
    }


def test_knowledge_embeddings_are_added_before_the_layer_norm() -> None:
    network = _network().eval()
    batch = _input()
    pos, polarity = batch["sentilr_pos"], batch["sentilr_polarity"]
    labels = torch.full_like(pos, 1)
    got = network(batch["input_ids"], pos, polarity, sentilr_label_ids=labels).last_hidden_state
    extra = (network.knowledge.pos(pos) + network.knowledge.polarity(polarity)
             + network.knowledge.label(labels))  # fmt: skip
    want = network.encoder(batch["input_ids"], extra_embeds=extra).last_hidden_state
    assert torch.allclose(got, want)
    # no label ids: every position reads "unknown" (row num_labels), as in fine-tuning
    unknown = torch.full_like(pos, NUM_LABELS)
    assert torch.allclose(
        network(batch["input_ids"], pos, polarity).last_hidden_state,
        network(batch["input_ids"], pos, polarity, sentilr_label_ids=unknown).last_hidden_state,
    )


def test_padding_rows_follow_the_reference() -> None:
    knowledge = SentiLRKnowledgeEmbeddings(8, NUM_LABELS)
    assert knowledge.pos.padding_idx == OTHER and knowledge.polarity.padding_idx == NEUTRAL
    assert knowledge.label.padding_idx == NUM_LABELS and knowledge.label.num_embeddings == 4
    # drawn from N(0, 0.02) like every row (BERT's init_weights overwrites the zero row)
    assert knowledge.pos.weight[OTHER].abs().sum() > 0


def test_heads_tie_to_the_token_and_knowledge_tables() -> None:
    network = _network()
    objective = _objective(network)
    pairs = (
        (objective.token_head, network.encoder.word_embeddings),
        (objective.pos_head, network.knowledge.pos),
        (objective.polarity_head, network.knowledge.polarity),
        (objective.label_head, network.knowledge.label),
    )
    for head, table in pairs:
        assert head.decoder.weight is table.weight


def test_loss_is_the_sum_of_the_four_parts_and_the_label_is_read_at_cls_of_late_rows() -> None:
    network = _network()
    objective = _objective(network, late_supervision_prob=0.5)
    batch = objective.collate(_input(rows=12), torch.Generator().manual_seed(1))
    late = batch["sentilr_late"]
    assert 0 < int(late.sum()) < 12
    assert (batch["sentilr_label_targets"][~late] == IGNORE_INDEX).all()
    # early-fusion rows carry their label at the words, late rows "unknown" everywhere
    assert (batch["sentilr_label_ids"][late] == NUM_LABELS).all()
    model = PretrainingModel(network, ObjectiveMix({"sentilr": objective}),
                             input_keys=get("sentilr").input_keys).eval()  # fmt: skip
    out = model(batch)
    parts = sum(out.metrics[f"sentilr/{p}_loss"] for p in ("token", "pos", "polarity", "label"))
    assert torch.allclose(out.loss, parts)
    hidden = network(batch["input_ids"], batch["sentilr_pos"], batch["sentilr_polarity"],
                     sentilr_label_ids=batch["sentilr_label_ids"]).last_hidden_state  # fmt: skip
    logits = objective.label_head(hidden[late, 0])
    want = nn.functional.cross_entropy(logits, batch["sentilr_label_targets"][late])
    assert torch.allclose(out.metrics["sentilr/label_loss"], want, atol=1e-5)


def test_no_late_rows_adds_a_zero_label_loss_that_keeps_the_graph() -> None:
    network = _network()
    objective = _objective(network, late_supervision_prob=0.0)
    batch = objective.collate(_input(), torch.Generator().manual_seed(2))
    model = PretrainingModel(network, ObjectiveMix({"sentilr": objective}),
                             input_keys=get("sentilr").input_keys)  # fmt: skip
    out = model(batch)
    assert float(out.metrics["sentilr/label_loss"]) == 0.0
    out.loss.backward()
    assert torch.isfinite(out.loss)


def test_a_batch_without_knowledge_keys_names_them() -> None:
    objective = _objective(_network())
    batch = _input()
    del batch["sentilr_label"]
    try:
        objective.collate(batch, torch.Generator())
    except KeyError as error:
        assert "sentilr_label" in str(error) and "labelled corpus" in str(error)
    else:
        raise AssertionError("no error")


def test_the_folder_round_trips(tmp_path: Path) -> None:
    network = _network(seed=3)
    network.record = {"labels": ["a", "b", "c"], "polarity_threshold": 0.0}
    save_sentilr(network, tmp_path / "f")
    again = load_sentilr(tmp_path / "f")
    assert again.record["labels"] == ["a", "b", "c"] and again.record["num_labels"] == 3
    for (name, a), (_, b) in zip(network.state_dict().items(), again.state_dict().items(),
                                 strict=True):  # fmt: skip
        assert torch.equal(a, b), name


class TestLabelAwareMLMContract(ObjectiveTestCase):
    objective_cls = LabelAwareMLMObjective

    def make_encoder(self) -> nn.Module:
        return _network()

    def make_objective(self, encoder: nn.Module) -> LabelAwareMLMObjective:
        assert isinstance(encoder, SentiLRModel)
        return _objective(encoder)

    def make_input(self) -> dict[str, torch.Tensor]:
        return _input()

    def loss(self, encoder: nn.Module, objective, batch) -> torch.Tensor:
        mix = ObjectiveMix({objective.name: objective})
        return PretrainingModel(encoder, mix, input_keys=get("sentilr").input_keys)(batch).loss


def test_the_label_free_ablation_never_shows_or_asks_for_the_label() -> None:
    network = _network()
    objective = _objective(network, use_labels=False)
    batch = objective.collate(_input(rows=12), torch.Generator().manual_seed(1))
    assert (batch["sentilr_label_ids"] == NUM_LABELS).all()
    assert (batch["sentilr_label_targets"] == IGNORE_INDEX).all()
    assert (batch["sentilr_token_labels"] != IGNORE_INDEX).any()  # masking unchanged


def test_a_plain_encoder_is_refused_by_name() -> None:
    encoder = bert_encoder(vocab_size=VOCAB.vocab_size, **TINY)
    try:
        build_objective(LabelAwareMLMObjective, encoder, VOCAB)
    except TypeError as error:
        assert "SentiLRModel" in str(error) and "TransformerEncoder" in str(error)
    else:
        raise AssertionError("no error")
