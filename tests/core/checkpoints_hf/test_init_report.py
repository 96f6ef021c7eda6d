"""The one init_from summary line: tensors loaded from a folder, the fresh ones by prefix."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from torch import nn

from ptm_core.checkpoints.init_report import check_folder_vocabulary, report_init


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.text = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
        self.fusion = nn.ModuleList([nn.Linear(3, 2), nn.Linear(2, 2)])
        self.scale = nn.Parameter(nn.init.ones_(nn.Linear(1, 1).weight))


def test_loaded_modules_and_names_are_counted_and_the_rest_grouped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _Model()
    caplog.set_level(logging.INFO)
    report = report_init(model, "models/x", [model.text, "fusion.1.weight"], what="a.init_from")
    assert report.loaded == (
        "text.0.weight",
        "text.0.bias",
        "text.1.weight",
        "text.1.bias",
        "fusion.1.weight",
    )
    assert report.fresh == ("scale", "fusion.0.weight", "fusion.0.bias", "fusion.1.bias")
    assert caplog.messages == [
        "a.init_from: 5 tensors loaded from models/x, 4 fresh: fusion.0.* (2), fusion.1.* (1), "
        "scale (1)"
    ]
    with pytest.raises(ValueError, match="not a submodule"):
        report_init(model, "models/x", [nn.Linear(1, 1)])


def test_a_tokenizer_that_does_not_index_the_table_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    check_folder_vocabulary(tmp_path, 50, 50)
    with pytest.raises(ValueError) as exc:
        check_folder_vocabulary(tmp_path, 50, 48)
    assert str(exc.value) == (
        f"{tmp_path / 'tokenizer.json'}: the tokenizer has 48 ids but "
        f"{tmp_path / 'model.safetensors'} has 50 rows in tensor "
        "'embeddings.word_embeddings.weight'; save the tokenizer the model was trained with "
        "in the folder (tokenizer.save_pretrained)"
    )
