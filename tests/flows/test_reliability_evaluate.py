"""Evaluate reliability: XLM means over several pairs, one-line errors naming the file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ptm_evaluate(model_dir: Path | str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "prefect-home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", str(model_dir)],
        cwd=ROOT,
        env={**os.environ, "PREFECT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )


# The CLI may start a temporary Prefect server around every flow command; its start and
# stop notices are the only other stderr lines allowed.
SERVER_NOTICE = re.compile(
    r"^(INFO prefect: (Starting|Stopping) temporary server on \S+|See https://docs\.prefect\.io/\S+"
    r" for more information on running a dedicated Prefect server\.)$"
)


def _one_line_error(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode != 0
    assert "Traceback" not in completed.stderr, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if not SERVER_NOTICE.match(line)]
    assert len(lines) == 1 and lines[0].startswith("ptm: "), completed.stderr
    return lines[0]


def _text_model_dir(directory: Path) -> Path:
    """A real tiny encoder directory with the files that mark a masked-LM run's final/."""
    from ptm_core.encoders.config import EncoderConfig
    from ptm_core.encoders.transformer import TransformerEncoder

    config = EncoderConfig(
        vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32
    )
    TransformerEncoder(config).save_pretrained(directory)
    (directory / "heads.safetensors").write_bytes(b"")
    return directory


def test_average_retrieval_means_every_pair_and_direction() -> None:
    from ptm_multilingual.evaluation import average_retrieval

    results = {
        "en-de": {"en->de": 0.04, "de->en": 0.06, "mean": 0.05},
        "en-fr": {"en->fr": 0.08, "fr->en": 0.10, "mean": 0.09},
    }
    assert average_retrieval(results) == pytest.approx(0.07)
    # A pair whose score is missing (NaN) is left out, not counted as zero.
    results["de-fr"] = {"de->fr": float("nan"), "fr->de": float("nan"), "mean": float("nan")}
    assert average_retrieval(results) == pytest.approx(0.07)
    with pytest.raises(ValueError, match="no retrieval scores"):
        average_retrieval({})


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_xlm_report_over_two_pairs_averages_the_pairs(tmp_path: Path) -> None:
    from flows.config import compose_config
    from flows.evaluate import evaluate
    from flows.runner import run_composed

    cfg = compose_config(
        [
            "experiment=xlm_tlm_tiny",
            f"trainer.output_dir={tmp_path / 'xlm'}",
            "trainer.progress=false",
            "trainer.max_steps=30",
        ]
    )
    model_dir = str(run_composed(cfg).encoder_dir)
    held_out = ROOT / "data_specs" / "parallel_corpus" / "heldout"  # en-de and en-fr
    result = evaluate(model_dir, corpus=str(held_out), report_path=str(tmp_path / "r.md"))

    for side in ("model", "baseline"):
        scores = result[side]
        pair_means = [scores["retrieval/en-de/mean"], scores["retrieval/en-fr/mean"]]
        assert scores["retrieval/mean"] == pytest.approx(sum(pair_means) / 2), side
    assert result["model"]["retrieval/mean"] > 0.0
    model, base = result["model"]["retrieval/mean"], result["baseline"]["retrieval/mean"]
    report = Path(result["report"]).read_text()
    assert f"**retrieval/mean: {model:.4f} vs {base:.4f} for random init" in report
    assert f"({model - base:+.4f}, " in report


@pytest.mark.integration
def test_cli_reports_a_missing_model_directory_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    line = _one_line_error(_ptm_evaluate(missing, tmp_path))
    assert str(missing) in line and "does not exist" in line
    assert "cannot tell which evaluation fits" not in line


@pytest.mark.integration
def test_cli_names_config_json_and_the_line_of_invalid_json(tmp_path: Path) -> None:
    model_dir = _text_model_dir(tmp_path / "final")
    (model_dir / "config.json").write_text('{\n  "vocab_size": 50,\n  "hidden_size": }\n')
    line = _one_line_error(_ptm_evaluate(model_dir, tmp_path))
    assert str(model_dir / "config.json") in line
    assert "invalid JSON at line 3" in line


@pytest.mark.integration
def test_cli_names_config_json_and_the_missing_key(tmp_path: Path) -> None:
    model_dir = _text_model_dir(tmp_path / "final")
    config = json.loads((model_dir / "config.json").read_text())
    del config["hidden_size"]
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    line = _one_line_error(_ptm_evaluate(model_dir, tmp_path))
    assert str(model_dir / "config.json") in line
    assert "missing key 'hidden_size'" in line


def test_model_family_names_the_broken_file_without_the_cli(tmp_path: Path) -> None:
    from flows.evaluation import model_family

    with pytest.raises(FileNotFoundError, match="does not exist"):
        model_family(tmp_path / "nope")
    xlm = tmp_path / "xlm"
    xlm.mkdir()
    (xlm / "languages.json").write_text('{"languages": ["en", "fr"]}')
    (xlm / "config.json").write_text("{\n\n  oops\n}")
    with pytest.raises(ValueError, match=r"config\.json: invalid JSON at line 3"):
        model_family(xlm)
