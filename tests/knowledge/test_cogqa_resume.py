"""CogQA on the core Trainer: exact resume, the learning-rate schedule, rank-0 final/."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from ptm_core.training.optim import linear_warmup_decay
from ptm_knowledge.cogqa import training
from ptm_knowledge.cogqa.batches import ReaderSpanBatches
from ptm_knowledge.cogqa.data import generate_bridge_questions
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.graph import CognitiveGraph, ReadResult, Span, grow_cognitive_graph
from ptm_knowledge.cogqa.system import CogQASystem
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderConfig
from ptm_knowledge.cogqa.training import (
    CogQATrainConfig,
    build_vocab,
    fit_system,
    gold_chain,
)

# Dropout on: a resumed run only matches if the RNG state is restored too.
TINY = ReaderConfig(
    hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_length=64, dropout=0.1
)


@pytest.fixture
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


class GoldChainReader:
    """Extracts the gold chain's spans (plus a decoy answer), so every grown graph holds
    the gold answer and System 2 has data without a trained reader."""

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


@pytest.fixture(scope="module")
def questions(sample_kg) -> list[MultiHopExample]:
    examples = generate_bridge_questions(sample_kg, num_questions=40, seed=0)
    return [ex for ex in examples if gold_chain(ex) is not None][:6]


def _config(**changes: object) -> CogQATrainConfig:
    settings: dict[str, object] = {
        "reader": TINY,
        "gnn_hidden": 8,
        "gnn_layers": 1,
        "reader_epochs": 2,
        "reasoner_epochs": 2,
        "batch_size": 8,
        "accumulation_steps": 2,
        "save_every": 1,
        "joint": True,  # both systems learn in phase 2: the grouped optimiser is resumed too
    }
    settings.update(changes)
    return CogQATrainConfig(**settings)  # type: ignore[arg-type]


def _weights(system: CogQASystem) -> dict[str, torch.Tensor]:
    state = {f"reader.{k}": v for k, v in system.reader.state_dict().items()}
    return state | {f"reasoner.{k}": v for k, v in system.reasoner.state_dict().items()}


class Killed(Exception):
    pass


class KillAt:
    """Stops training right after the checkpoint of ``step`` in phase ``phase``."""

    def __init__(self, phase: str, step: int) -> None:
        self.phase, self.step = phase, step

    def on_save(self, step: int, path: Path) -> None:
        if step == self.step and path.parent.parent.name == self.phase:
            raise Killed(f"{self.phase} step {step}")


@pytest.mark.parametrize(("phase", "step"), [("system1", 2), ("system2", 3)])
def test_interrupted_then_resumed_equals_straight_run(
    questions, gold_graphs, one_thread, tmp_path: Path, phase: str, step: int
):
    config, vocab = _config(), build_vocab(questions)
    straight = fit_system(questions, config, vocab=vocab, output_dir=tmp_path / "straight")
    assert len(straight.losses["reader"]) == 4 and len(straight.losses["reasoner"]) == 6
    with pytest.raises(Killed):
        fit_system(
            questions,
            config,
            vocab=vocab,
            output_dir=tmp_path / "resumed",
            callbacks=[KillAt(phase, step)],
        )
    assert not (tmp_path / "resumed" / "final").exists()
    resumed = fit_system(questions, config, vocab=vocab, output_dir=tmp_path / "resumed")
    assert resumed.losses == straight.losses
    expected, got = _weights(straight), _weights(resumed)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected), [
        k for k in expected if not torch.equal(expected[k], got[k])
    ]
    for name in ("heads.safetensors", "encoder/model.safetensors"):
        a = (tmp_path / "straight" / "final" / name).read_bytes()
        assert a == (tmp_path / "resumed" / "final" / name).read_bytes()


def test_each_phase_follows_the_warmup_decay_schedule(questions, gold_graphs, one_thread, tmp_path):
    config = _config(warmup_ratio=0.5, reader_lr=1e-3, reasoner_lr=4e-3, joint_reader_lr=1e-4)
    system = fit_system(questions, config, output_dir=tmp_path)
    for phase, peak in (("system1", 1e-3), ("system2", 4e-3)):
        records = [
            json.loads(line)
            for line in (tmp_path / phase / "metrics.jsonl").read_text().splitlines()
        ]
        steps = len(records)
        assert [r["step"] for r in records] == list(range(1, steps + 1))
        # The rate each step used: LambdaLR's multiplier at steps 0 .. steps-1.
        probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=peak)
        schedule = linear_warmup_decay(probe, -(-steps // 2), steps)
        expected = []
        for _ in range(steps):
            expected.append(probe.param_groups[0]["lr"])
            probe.step()
            schedule.step()
        assert [r["lr"] for r in records] == pytest.approx(expected)
        assert records[0]["lr"] == 0.0 and max(r["lr"] for r in records) == pytest.approx(peak)
    assert len(system.losses["reasoner"]) == 6


def test_joint_phase_keeps_system1_at_its_own_learning_rate(questions, gold_graphs, one_thread):
    from ptm_knowledge.cogqa.phases import grouped_adamw, phase_config
    from ptm_knowledge.cogqa.system2 import CogQAReasoner
    from ptm_knowledge.cogqa.training import ReasonerModule

    reader = CogQAReader(build_vocab(questions), TINY)
    config = _config(reasoner_lr=3e-3, joint_reader_lr=2e-4)
    module = ReasonerModule(CogQAReasoner(16, 8, 1), reader, [], config)
    trainer_config = phase_config(
        Path("unused"),
        epochs=1,
        batches_per_epoch=1,
        accumulation_steps=1,
        learning_rate=config.reasoner_lr,
        max_grad_norm=1.0,
        warmup_ratio=0.0,
        save_every=1,
        seed=0,
        resume=False,
    )
    optimizer = grouped_adamw(module, trainer_config, {"reader": config.joint_reader_lr})
    rates = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    assert {rates[id(p)] for p in reader.parameters()} == {2e-4}
    assert {rates[id(p)] for p in module.reasoner.parameters()} == {3e-3}
    # Frozen System 1 (separate training) is not even registered with the optimiser.
    frozen = ReasonerModule(CogQAReasoner(16, 8, 1), reader, [], _config(joint=False))
    assert not any(n.startswith("reader.") for n, _ in frozen.named_parameters())


@pytest.mark.parametrize("main", [True, False])
def test_only_rank_zero_writes_final(
    questions, gold_graphs, one_thread, tmp_path, monkeypatch, main: bool
):
    barriers: list[int] = []
    monkeypatch.setattr(training, "is_main_process", lambda: main)
    monkeypatch.setattr(training, "barrier", lambda: barriers.append(1))
    config = _config(reader_epochs=1, reasoner_epochs=1)
    system = fit_system(questions, config, output_dir=tmp_path)
    assert system.final_dir == tmp_path / "final"
    assert (tmp_path / "final" / "cogqa.json").is_file() is main
    assert barriers == [1]  # every rank waits for rank 0's write


def test_reader_batches_are_built_per_index_and_resume_mid_epoch(questions):
    reader = CogQAReader(build_vocab(questions), TINY)
    data = ReaderSpanBatches(questions, reader, batch_size=5, num_distractors=1, seed=3)
    assert data.num_items == 4 * len(questions)  # 3 gold slots + 1 distractor each
    full = list(data.iter_batches(1))
    assert len(full) == data.batches_per_epoch == -(-data.num_items // 5)
    tail = list(data.iter_batches(1, start=2))
    for a, b in zip(full[2:], tail, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert sum(len(b["targets"]) for b in full) == data.num_items
    # Another epoch: another order (and fresh distractors), same items per epoch.
    other = list(data.iter_batches(2))
    assert not torch.equal(other[0]["input_ids"][:1], full[0]["input_ids"][:1]) or not (
        torch.equal(other[0]["targets"], full[0]["targets"])
    )
