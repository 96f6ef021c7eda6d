"""The contract every registered model family passes (pytest collects ``Test*`` subclasses).

One case per family (``tests/families/test_contract_<family>.py``), a few lines each: the
config overrides of a tiny run on GENERATED data (never the bundled samples) and, when the
family fine-tunes, of a tiny fine-tune. The contract then checks, through the family's spec
and the one runner only:

1. **build + train**: the config selects this family, one short run trains (finite losses
   logged);
2. **save**: ``final/`` names one of the family's kinds;
3. **load**: the family's ``load`` hook reads it back, and a save/load round trip keeps
   every tensor;
4. **evaluate**: ``ptm evaluate`` picks the family's evaluation and its headline metric is a
   finite number;
5. **fine-tune** (when the spec has a task adapter): the ``init_from`` folder's kind chooses
   this family and the fine-tune writes its ``final/``.

``test_contract_meta.py`` fails, naming the family, when a registered spec has no case.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file

FAST = ["trainer.progress=false", "trainer.log_every=1"]


class FamilyContract:
    """Base of a family's contract case.

    Subclasses set ``family`` and implement :meth:`pretrain_overrides` (families that
    pre-train), :meth:`finetune_overrides` (families that fine-tune), and may override
    :meth:`evaluation_corpus` and :meth:`saved_folder` (a family that does not pre-train
    through the runner, e.g. KG embeddings, makes its folder there).
    """

    family: ClassVar[str]
    pretrain_config: ClassVar[str] = "config"
    finetune_config: ClassVar[str] = "finetune"

    # -- hooks ------------------------------------------------------------------------------
    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        """Overrides of a tiny pre-training run on generated data (``trainer.output_dir``
        under ``tmp_path``)."""
        raise NotImplementedError(f"{type(self).__name__}: give pretrain_overrides")

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        """Overrides of a tiny fine-tune of ``final_dir`` on a generated task."""
        raise NotImplementedError(f"{type(self).__name__}: give finetune_overrides")

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        """The corpus ``ptm evaluate`` scores on (``None``: the evaluation's default)."""
        return None

    def saved_folder(self, tmp_path: Path) -> Path:
        """Pre-train through the runner; the ``final/`` folder."""
        from flows.config import compose_config
        from flows.runner import run_composed, select

        cfg = compose_config([*FAST, *self.pretrain_overrides(tmp_path)])
        spec, stage = select(cfg)
        assert (spec.name, stage) == (self.family, "pretrain")
        result = run_composed(cfg)
        losses = [
            value
            for record in _records(Path(result.metrics_path))
            for key, value in record.items()
            if key == "loss" or key.endswith("/loss")
        ]
        assert losses, f"{result.metrics_path}: no loss logged"
        assert all(math.isfinite(float(v)) for v in losses), losses
        return Path(result.encoder_dir)

    # -- the contract -----------------------------------------------------------------------
    def test_contract(self, tmp_path: Path) -> None:
        from ptm_core.checkpoints import registry as checkpoints
        from ptm_core.families import get
        from ptm_core.model_kinds import read_model_kind

        spec = get(self.family)
        final = self.saved_folder(tmp_path / "pretrain")
        kind = read_model_kind(final)
        if spec.kinds:
            assert kind in spec.kinds, (
                f"{final}: kind {kind!r}, family {spec.name} saves {spec.kinds}"
            )
            model = checkpoints.load(kind, final)
            _round_trip(kind, model, tmp_path / "resaved")
        if spec.has("evaluation"):
            self._evaluate(spec, final, tmp_path)
        if spec.has("finetune"):
            self._finetune(final, tmp_path / "finetune")

    def _evaluate(self, spec: Any, final: Path, tmp_path: Path) -> None:
        from flows.evaluation import load_evaluations, model_family

        named = spec.hook("evaluation")
        names = {e.name for e in (named if isinstance(named, (tuple, list)) else (named,))}
        family = model_family(final)
        assert family in names, f"{final} is scored by {family!r}, the spec names {names}"
        evaluation = load_evaluations()[family]
        scores = evaluation.score(str(final), self.evaluation_corpus(tmp_path), 0, False)
        metric = evaluation.metric or scores["_metric"]
        assert math.isfinite(float(scores[metric])), scores

    def _finetune(self, final: Path, out: Path) -> None:
        from flows.config import compose_config
        from flows.runner import run_composed, select

        cfg = compose_config(
            [*FAST, *self.finetune_overrides(out, final)], config_name=self.finetune_config
        )
        spec, stage = select(cfg)
        assert (spec.name, stage) == (self.family, "finetune")
        result = run_composed(cfg)
        assert (Path(result.encoder_dir) / "config.json").is_file()


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _round_trip(kind: str, model: Any, directory: Path) -> None:
    from ptm_core.checkpoints import registry as checkpoints

    checkpoints.save(kind, model, directory)
    again = checkpoints.load(kind, directory)
    before, after = model.state_dict(), again.state_dict()
    assert before.keys() == after.keys()
    for name, tensor in before.items():
        assert torch.equal(tensor, after[name]), f"{name} changed in a save/load round trip"
    weights = sorted(directory.glob("*.safetensors"))
    assert weights, f"{directory}: no weights written"
    assert all(load_file(str(w)) is not None for w in weights)
