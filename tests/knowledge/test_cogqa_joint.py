"""CogQA joint training: System 2's answer loss fine-tunes System 1 only when asked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from flows.config import compose_config
from ptm_knowledge.cogqa import training
from ptm_knowledge.cogqa.data import generate_bridge_questions
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.graph import CognitiveGraph, ReadResult, Span, grow_cognitive_graph
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderConfig
from ptm_knowledge.cogqa.system2 import CogQAReasoner
from ptm_knowledge.cogqa.training import (
    CogQATrainConfig,
    build_vocab,
    fit_reasoner,
    gold_chain,
    reasoner_examples,
)

# Dropout 0 so loss curves are deterministic functions of the weights.
TINY = ReaderConfig(
    hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_length=64, dropout=0.0
)


@pytest.fixture
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


class GoldChainReader:
    """Extracts the gold chain's spans (plus a decoy answer), so graphs contain the gold
    answer without a trained reader. Graph growth is discrete, so which reader grows
    the graphs does not matter to the gradients under test."""

    def __init__(self, example: MultiHopExample) -> None:
        chain = gold_chain(example)
        assert chain is not None
        self.example = example
        self.t1, self.i1, self.t2, self.i2 = chain

    def read(self, question: str, clues: Sequence[str], paragraph: Sequence[str]) -> ReadResult:
        if list(paragraph) == self.example.paragraph(self.t1):
            return ReadResult(hop_spans=[Span(self.t2, self.i1, 3.0)])
        if list(paragraph) == self.example.paragraph(self.t2):
            return ReadResult(
                answer_spans=[
                    Span(self.example.answer, self.i2, 2.0),
                    Span(f"decoy of {self.t2}", 0, 1.0),
                ]
            )
        return ReadResult()


@pytest.fixture
def gold_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    def grow(example: MultiHopExample, reader: object, **limits: int) -> CognitiveGraph:
        return grow_cognitive_graph(example, GoldChainReader(example), **limits)

    monkeypatch.setattr(training, "grow_cognitive_graph", grow)


@pytest.fixture
def questions(sample_kg) -> list[MultiHopExample]:
    examples = generate_bridge_questions(sample_kg, num_questions=40, seed=0)
    return [ex for ex in examples if gold_chain(ex) is not None][:6]


def _models(questions: list[MultiHopExample]) -> tuple[CogQAReader, CogQAReasoner]:
    torch.manual_seed(0)
    reader = CogQAReader(build_vocab(questions), TINY)
    reader.eval()
    return reader, CogQAReasoner(reader.config.hidden_size, 16, 1)


def _snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _changed(module: torch.nn.Module, before: dict[str, torch.Tensor]) -> list[str]:
    after = module.state_dict()
    return [k for k, v in before.items() if not torch.equal(v, after[k])]


def test_embed_carries_gradients_only_when_asked(questions, one_thread):
    reader, _ = _models(questions)
    ex = questions[0]
    no_clues: list[str] = []
    items = [(ex.question, no_clues, paragraph) for _, paragraph in ex.context[:2]]
    frozen = reader.embed(items)
    assert frozen.shape == (2, 16) and not frozen.requires_grad
    live = reader.embed(items, grad=True)
    assert live.requires_grad
    torch.testing.assert_close(live.detach(), frozen)  # eval mode, dropout 0: same vectors
    live.sum().backward()
    assert all(p.grad is not None for p in reader.encoder.layers.parameters())


@pytest.mark.parametrize("joint", [False, True])
def test_reasoner_step_moves_system1_only_in_joint_mode(
    questions, gold_graphs, one_thread, joint: bool
):
    reader, reasoner = _models(questions)
    # Span weight 0: whatever reaches System 1 comes from System 2's answer loss.
    config = CogQATrainConfig(
        reader=TINY,
        reasoner_epochs=1,
        accumulation_steps=len(questions),
        joint=joint,
        joint_span_weight=0.0,
    )
    assert len(reasoner_examples(reader, questions, config)) == len(questions)
    encoder, gnn = _snapshot(reader.encoder), _snapshot(reasoner)
    # The Trainer clears .grad after each step: record the gradients as they arrive.
    grads: dict[str, torch.Tensor] = {}
    for name, param in reader.encoder.named_parameters():
        param.register_hook(lambda g, name=name: grads.__setitem__(name, g.detach().clone()))
    losses = fit_reasoner(reasoner, reader, questions, config)
    assert len(losses) == 1 and math.isfinite(losses[0]) and losses[0] > 0
    assert _changed(reasoner, gnn)
    layers = [n for n, _ in reader.encoder.named_parameters() if n.startswith("layers.")]
    if joint:
        # Gradients of the answer loss (not only AdamW's weight decay) reach every layer.
        assert all(n in grads and grads[n].abs().sum() > 0 for n in layers)
        assert "embeddings.word.weight" in grads
        assert any(k.startswith("layers.0") for k in _changed(reader.encoder, encoder))
    else:
        assert grads == {}
        assert _changed(reader.encoder, encoder) == []
    assert not reader.training and not reasoner.training


def test_joint_loss_is_finite_and_falls(questions, gold_graphs, one_thread):
    reader, reasoner = _models(questions)
    config = CogQATrainConfig(
        reader=TINY,
        reasoner_epochs=8,
        accumulation_steps=len(questions),
        joint=True,
        joint_reader_lr=3e-3,
    )
    losses = fit_reasoner(reasoner, reader, questions, config)
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < 0.8 * losses[0], losses


def test_joint_span_weight_adds_system1_span_loss(questions, gold_graphs, one_thread):
    losses = {}
    for weight in (0.0, 1.0):
        reader, reasoner = _models(questions)
        config = CogQATrainConfig(
            reader=TINY,
            reasoner_epochs=1,
            accumulation_steps=len(questions),
            joint=True,
            joint_span_weight=weight,
        )
        losses[weight] = fit_reasoner(reasoner, reader, questions, config)[0]
    # Same initial weights and graphs: the difference is the span loss (4 pointers, ~ln L).
    assert losses[1.0] - losses[0.0] > 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("joint", "yes"),
        ("joint_span_weight", -1.0),
        ("joint_span_weight", float("nan")),
        ("joint_reader_lr", 0.0),
    ],
)
def test_bad_joint_settings_name_the_field(field: str, value: object):
    with pytest.raises(ValueError, match=f"CogQATrainConfig.{field} must be"):
        CogQATrainConfig(**{field: value})  # type: ignore[arg-type]


def test_recipe_reads_the_joint_switch(tmp_path: Path):
    cfg = compose_config(["experiment=cogqa_tiny"])
    assert cfg.cogqa.joint is False and cfg.cogqa.joint_span_weight == 1.0
    # The typed settings' own check runs when the config is composed, before any run.
    with pytest.raises(ValueError, match=r"bad config at cogqa: .*joint_reader_lr must be"):
        compose_config(
            ["experiment=cogqa_tiny", "cogqa.joint_reader_lr=-1", f"trainer.output_dir={tmp_path}"]
        )
