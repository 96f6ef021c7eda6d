"""K-BERT's contract case: entity typing on generated TSVs with branches from a generated
KG (K-BERT has no pre-training: its ``final/`` is a fine-tuned classifier)."""

from __future__ import annotations

from pathlib import Path

from family_contract import FAST, FamilyContract
from knowledge_data import generate
from safetensors.torch import load_file

FAMILY = "kbert"


def _overrides(tmp_path: Path, out: Path) -> list[str]:
    data = generate(tmp_path / "data")
    return [
        "experiment=kbert_tiny_cls",
        "model.hidden_size=32",
        "model.num_heads=2",
        "model.intermediate_size=64",
        f"data.corpus={data.train}",
        f"data.dev={data.dev}",
        f"data.kg={data.kg}",
        "data.max_length=32",
        "data.batch_size=8",
        "trainer.max_steps=2",
        "trainer.device=cpu",
        f"trainer.output_dir={out}",
    ]


def _run(overrides: list[str]) -> Path:
    from flows.config import compose_config
    from flows.runner import run_composed, select

    cfg = compose_config([*FAST, *overrides])
    spec, stage = select(cfg)
    assert (spec.name, stage) == (FAMILY, "finetune")
    return Path(run_composed(cfg).encoder_dir)


class TestKBertContract(FamilyContract):
    family = FAMILY
    finetune_config = "config"

    def saved_folder(self, tmp_path: Path) -> Path:
        return _run(_overrides(tmp_path.parent, tmp_path / "run"))

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        # A K-BERT classifier's encoder fine-tunes again (kbert.init_from).
        return [*_overrides(tmp_path.parent, tmp_path / "run"), f"kbert.init_from={final_dir}"]


def test_the_same_seed_gives_the_same_classifier(tmp_path: Path) -> None:
    """A random-init K-BERT encoder is drawn from the run's seed."""
    first = _run(_overrides(tmp_path, tmp_path / "a"))
    second = _run(_overrides(tmp_path, tmp_path / "b"))
    for name in ("model.safetensors", "task_head.safetensors"):
        a, b = load_file(str(first / name)), load_file(str(second / name))
        assert a.keys() == b.keys()
        assert all(a[k].equal(b[k]) for k in a), name
