"""ONNX export: ONNX Runtime matches eager within 1e-4 on shapes other than the traced one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from compress_fixtures import tiny_classifier, tiny_encoder

from ptm_core.compress.onnx_export import export_onnx, onnx_max_abs_diff, onnx_session

SHAPES = ((1, 11), (4, 5))  # traced at (2, 8): both axes move


def test_task_model_torchscript_exporter(tmp_path: Path) -> None:
    model = tiny_classifier()
    result = export_onnx(model, tmp_path / "m.onnx", exporter="torchscript", check_shapes=SHAPES)
    assert set(result.max_abs_diff) == {"1x11", "4x5"}
    assert result.worst_diff <= 1e-4
    assert result.input_names == ["input_ids", "attention_mask", "token_type_ids"]


@pytest.mark.slow  # the dynamo exporter: about 10 s of CPU for a 1-layer model
def test_encoder_dynamo_exporter_with_padding_mask(tmp_path: Path) -> None:
    encoder = tiny_encoder(num_layers=1)
    result = export_onnx(encoder, tmp_path / "e.onnx", exporter="dynamo", check_shapes=SHAPES)
    assert result.output_name == "last_hidden_state"
    assert result.worst_diff <= 1e-4
    session = onnx_session(result.path, threads=1)
    # The mask is a real input: padding changes the real tokens' outputs.
    ids = torch.randint(1, 60, (1, 6))
    types = torch.zeros_like(ids)
    full = session.run(
        None,
        {
            "input_ids": ids.numpy(),
            "attention_mask": torch.ones_like(ids).numpy(),
            "token_type_ids": types.numpy(),
        },
    )[0]
    mask = torch.ones_like(ids)
    mask[0, 3:] = 0
    padded = session.run(
        None,
        {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()},
    )[0]
    assert abs(full[0, :3] - padded[0, :3]).max() > 1e-3
    assert onnx_max_abs_diff(encoder, result.path, 3, 7, session=session) <= 1e-4
