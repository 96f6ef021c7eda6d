"""KEPLER trained jointly (MLM + KE): both losses fall, true triples end up closer than
corrupted ones, link prediction beats random ranking; the preset runs from the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from knowledge_sample_paths import CORPUS, KG_DIR, VOCAB

from flows.cli import main
from flows.config import compose_config
from flows.runner import pretrain
from ptm_core.families import get
from ptm_knowledge.kepler import (
    KeplerResult,
    corrupt_triples,
    encode_entities,
    transe_distance,
)

STEPS = 60


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # A 32-wide model gains nothing from a second thread; on a busy machine it loses much.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> KeplerResult:
    out = tmp_path_factory.mktemp("kepler")
    cfg = compose_config(
        [
            "experiment=kepler_tiny",
            f"data.corpus={CORPUS}",
            f"data.kg={KG_DIR}",
            f"data.tokenizer={VOCAB}",
            "data.max_length=48",
            "data.batch_size=8",
            "model.hidden_size=32",
            "model.num_layers=1",
            "model.num_heads=2",
            "model.intermediate_size=64",
            "model.max_positions=64",
            f"trainer.max_steps={STEPS}",
            "trainer.learning_rate=2e-3",
            "trainer.warmup_ratio=0.05",
            "trainer.log_every=1",
            "trainer.save_every=1000",
            "trainer.progress=false",
            "trainer.device=cpu",
            f"trainer.output_dir={out}",
            "kepler.ke_batch_size=16",
            "kepler.num_negatives=4",
            "kepler.margin=4.0",
            "kepler.description_max_length=32",
            "seed=0",
        ]
    )
    result = pretrain(get("kepler"), cfg)
    assert isinstance(result, KeplerResult)
    return result


def _window_means(result: KeplerResult, key: str) -> tuple[float, float]:
    records = [json.loads(x) for x in result.metrics_path.read_text().splitlines() if x.strip()]
    assert len(records) == STEPS
    values = [r[key] for r in records]
    return float(np.mean(values[:10])), float(np.mean(values[-10:]))


def test_joint_training_keeps_mlm_falling_while_ke_falls(trained: KeplerResult) -> None:
    mlm_first, mlm_last = _window_means(trained, "mlm/loss")
    ke_first, ke_last = _window_means(trained, "ke/loss")
    assert mlm_last < mlm_first - 0.3  # from ~ln(4000) = 8.3
    assert ke_last < 0.8 * ke_first


def test_true_triples_end_closer_than_their_corruptions(trained: KeplerResult) -> None:
    objective = trained.ke_objective
    assert objective is not None
    entities = encode_entities(objective.text_encoder, objective.descriptions)
    relations = objective.relations.weight.detach()
    triples = objective.triples
    h, r, t = triples[:, 0], triples[:, 1], triples[:, 2]
    neg_h, neg_t = corrupt_triples(
        h, t, objective.num_entities, 8, torch.Generator().manual_seed(5)
    )
    with torch.no_grad():
        positive = transe_distance(entities[h], relations[r], entities[t])  # (T,)
        negative = transe_distance(entities[neg_h], relations[r][:, None], entities[neg_t])
    farther = (negative > positive[:, None]).float()
    # Untrained, a corruption is as likely closer as farther (1/2); trained, clearly farther.
    n = farther.numel()
    assert float(farther.mean()) > 0.5 + 4 * math.sqrt(0.25 / n)
    assert float(positive.mean()) < float(negative.mean())


def test_link_prediction_beats_random_ranking(trained: KeplerResult) -> None:
    metrics, random = trained.link_prediction, trained.random_baseline
    assert metrics["num_ranks"] == random["num_ranks"] == 2 * trained.num_test_triples
    # One random ranking of these ~40 queries has MRR 0.048 +- 0.017 (sampled SD);
    # demand more than four of those SDs.
    assert random["mrr"] == pytest.approx(0.0475, abs=0.01)
    assert metrics["mrr"] > random["mrr"] + 4 * 0.017
    assert metrics["hits_at_10"] > random["hits_at_10"]
    saved = json.loads((trained.output_dir / "link_prediction.json").read_text())
    assert saved["test"]["mrr"] == pytest.approx(metrics["mrr"])
    assert trained.final_metrics["link_prediction/mrr"] == pytest.approx(metrics["mrr"])
    assert (trained.encoder_dir / "heads.safetensors").is_file()


def test_kepler_tiny_runs_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "pretrain",
            "experiment=kepler_tiny",
            "trainer.max_steps=3",
            "trainer.log_every=1",
            "trainer.progress=false",
            "trainer.device=cpu",
            "model.hidden_size=32",
            "model.intermediate_size=64",
            "model.num_layers=1",
            "data.max_length=48",
            "data.batch_size=4",
            "kepler.ke_batch_size=4",
            f"trainer.output_dir={out}",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "link_prediction/mrr" in printed and "link_prediction/hits_at_10" in printed
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 3 and "mlm/loss" in last and "ke/loss" in last
