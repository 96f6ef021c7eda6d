"""A NaN or inf loss stops training at its step, names the loss, and leaves no final/ (#31)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.presets import bert_encoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.training.finite_loss import FiniteLossGuard, NonFiniteLossError
from ptm_core.training.run import train_and_save
from tests.core.training.conftest import ToyModel, ToyOutput


class TwoPartModel(ToyModel):
    """A toy "objective mix": the loss is ``mlm/loss + sop/loss``; sop turns NaN at a call."""

    def __init__(self, nan_from_call: int) -> None:
        super().__init__()
        self.calls = 0
        self.nan_from_call = nan_from_call

    def forward(self, batch: dict[str, torch.Tensor]) -> ToyOutput:
        self.calls += 1
        mlm = super().forward(batch).loss
        sop = mlm.detach() * 0 + 0.69
        if self.calls >= self.nan_from_call:
            sop = sop + float("nan")
        return ToyOutput(mlm + sop, {"mlm/loss": mlm.detach(), "sop/loss": sop})


def _save(directory: Path) -> None:
    directory.mkdir()
    (directory / "weights.txt").write_text("x")


def test_a_nan_part_stops_the_run_at_its_step_naming_the_part(make_source, make_config) -> None:
    torch.manual_seed(0)
    config = make_config("nan", max_steps=12, log_every=2, save_every=4)
    with pytest.raises(NonFiniteLossError) as err:
        train_and_save(TwoPartModel(nan_from_call=7), make_source(), config, save_final=_save)
    message = str(err.value)
    assert "step 7" in message and "sop/loss" in message and "mlm/loss" not in message, message
    assert "\n" not in message
    out = Path(config.output_dir)
    assert not (out / "final").exists()
    # The step-4 checkpoint (before the NaN) stays; none holds weights trained on NaN.
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == ["step-00000004"]


def test_nan_weights_stop_the_first_step(make_model, make_source, make_config) -> None:
    model = make_model(3)
    with torch.no_grad():
        model.hidden.weight[2, 5] = float("nan")
    config = make_config("weights")
    with pytest.raises(NonFiniteLossError, match=r"the total loss became NaN or inf at step 1;"):
        train_and_save(model, make_source(), config, save_final=_save)
    assert not (Path(config.output_dir) / "final").exists()


def test_the_deferred_guard_reports_the_first_bad_step_and_its_terms() -> None:
    guard = FiniteLossGuard(immediate=False)
    finite, nan = torch.tensor(1.5), torch.tensor(float("nan"))
    for step in (1, 2, 3):
        guard.observe(step, finite, {"a/loss": finite, "b/loss": finite, "accuracy": nan})
    guard.check()  # a NaN metric that is not a loss is no reason to stop
    guard.observe(
        4, torch.tensor(float("inf")), {"a/loss": torch.tensor(float("inf")), "b/loss": finite}
    )
    guard.observe(5, nan, {"a/loss": nan, "b/loss": nan})
    with pytest.raises(NonFiniteLossError) as err:
        guard.check()
    assert "a/loss became NaN or inf at step 4" in str(err.value)
    assert "b/loss" not in str(err.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_loading_weights_with_a_non_finite_value_names_the_file_and_tensor(
    tmp_path: Path, value: float
) -> None:
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=57, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=24
    )
    encoder.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    state = load_file(str(weights))
    name = sorted(k for k in state if k.endswith("weight") and state[k].dim() == 2)[0]
    state[name][0, 0] = value
    save_file(state, str(weights))
    with pytest.raises(CheckpointError) as err:
        TransformerEncoder.from_pretrained(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{weights}: tensor {name!r} holds 1 non-finite value(s)"), message


def test_ernie_thu_knowledge_weights_with_nan_are_refused(tmp_path: Path) -> None:
    from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_WEIGHTS, KnowledgeableEncoder

    torch.manual_seed(1)
    text = bert_encoder(
        vocab_size=41, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=24
    )
    saved = KnowledgeableEncoder(text, torch.randn(9, 4), 1, entity_heads=2).save_pretrained(
        tmp_path / "thu"
    )
    weights = saved / KNOWLEDGE_WEIGHTS
    state = load_file(str(weights))
    state["entity_table"][3, 1] = float("nan")
    save_file(state, str(weights))
    # A ValueError (the CLI's one-line user error); the model module imports no checkpoint code.
    with pytest.raises(ValueError, match=rf"^{weights}: tensor 'entity_table' holds 1 non-finite"):
        KnowledgeableEncoder.from_pretrained(saved)
