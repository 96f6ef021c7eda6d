"""``ptm extend-vocab``: the command line, its one-line refusals, ``ptm pretrain init_from=``
the extended folder (its tokenizer and its larger table), and the domain-adapt steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from flows.cli import main
from flows.domain_adaptation import domain_adapt, parse_settings
from ptm_core.encoders.builders import TransformerSize, bert
from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
from ptm_core.tokenization import WordPieceTokenizer

GENERAL = ["the film was good .", "the film was bad .", "a great movie ."] * 20
DOMAIN = ["acetylmorphine", "oxazolidine"]


def _final(folder: Path) -> Path:
    tokenizer = WordPieceTokenizer.train(GENERAL + DOMAIN, vocab_size=200, min_frequency=2)
    torch.manual_seed(0)
    encoder = bert(TransformerSize(tokenizer.vocab_size, 16, 1, 2, 32, 128))
    decoder_bias = {"objectives.mlm.head.decoder.bias": torch.zeros(tokenizer.vocab_size)}
    encoder.save_pretrained(folder, tokenizer=tokenizer, heads=decoder_bias)
    return folder


def _corpus(path: Path) -> Path:
    blocks = []
    for i in range(20):
        word = DOMAIN[i % 2]
        blocks.append(f"the film was {word} .\na great {word} movie .\nthe film was good .")
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def test_the_command_writes_the_extended_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    final, corpus = _final(tmp_path / "final"), _corpus(tmp_path / "domain.txt")
    code = main(
        ["extend-vocab", str(final), "--corpus", str(corpus), "--output", str(tmp_path / "o")]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "words added    2: acetylmorphine (40), oxazolidine (20)" in out or (
        "words added    2:" in out
    )
    assert "vocabulary" in out and str(tmp_path / "o") in out
    record = json.loads((tmp_path / "o" / "vocab_extension.json").read_text())
    assert sorted(w["word"] for w in record["words"]) == sorted(DOMAIN)


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int, text: str) -> None:
    assert code == 1
    # Progress lines may come before it; the refusal itself is one line.
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ptm")]
    assert len(err) == 1 and err[0].startswith("ptm: ") and text in err[0], err


def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    final, corpus = _final(tmp_path / "final"), _corpus(tmp_path / "domain.txt")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    args = ["extend-vocab", str(final), "--corpus", str(corpus), "--output"]
    _one_line_error(capsys, main([*args, str(taken)]), "ptm did not write it")
    assert (taken / "notes.txt").read_text() == "mine"

    plain = tmp_path / "plain.txt"
    plain.write_text("the film was good .\n" * 30)
    code = main(
        ["extend-vocab", str(final), "--corpus", str(plain), "--output", str(tmp_path / "x")]
    )
    _one_line_error(capsys, code, "splits into pieces; lower --min-count")

    missing = tmp_path / "missing.txt"
    code = main(
        ["extend-vocab", str(final), "--corpus", str(missing), "--output", str(tmp_path / "x")]
    )
    _one_line_error(capsys, code, "missing.txt")

    empty = tmp_path / "empty_model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    code = main(
        ["extend-vocab", str(empty), "--corpus", str(corpus), "--output", str(tmp_path / "x")]
    )
    _one_line_error(capsys, code, "no tokenizer.json or vocab.txt")
    assert not (tmp_path / "x").exists()

    with pytest.raises(SystemExit):
        main([*args, str(tmp_path / "y"), "--max-new", "0"])


def test_pretrain_init_from_the_extended_folder_uses_its_tokenizer(tmp_path: Path) -> None:
    final, corpus = _final(tmp_path / "final"), _corpus(tmp_path / "domain.txt")
    ext = tmp_path / "ext"
    assert main(["extend-vocab", str(final), "--corpus", str(corpus), "--output", str(ext)]) == 0
    run = tmp_path / "run"
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            f"init_from={ext}",
            f"data.corpus={corpus}",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
            "data.batch_size=4",
            "data.max_length=32",
        ]
    )
    assert code == 0
    written = load_task_tokenizer(run / "final")
    extended = load_task_tokenizer(ext)
    assert written.vocab_size == extended.vocab_size == 2 + load_task_tokenizer(final).vocab_size
    assert json.loads((run / "final" / "config.json").read_text())["vocab_size"] == (
        extended.vocab_size
    )
    for word in DOMAIN:
        assert written.tokenize_ids(word) == extended.tokenize_ids(word)
        assert len(written.tokenize_ids(word)) == 1


def test_domain_adapt_settings_are_checked_first() -> None:
    with pytest.raises(ValueError, match="missing base, corpus, task"):
        parse_settings([])
    with pytest.raises(ValueError, match="not a domain-adapt setting"):
        parse_settings(["base=a", "corpus=b", "task=c", "dapt=3"])
    with pytest.raises(ValueError, match="needs tapt_corpus"):
        parse_settings(["base=a", "corpus=b", "task=c", "tapt_steps=5"])
    settings, finetune = parse_settings(["base=a", "corpus=b", "task=c", "trainer.max_steps=3"])
    assert settings["dapt_steps"] == "1000" and finetune == ["trainer.max_steps=3"]


@pytest.mark.slow
def test_domain_adapt_chains_every_step(tmp_path: Path) -> None:
    final, corpus = _final(tmp_path / "final"), _corpus(tmp_path / "domain.txt")
    steps: list[str] = []

    def step(name: str, function: Any, *args: Any) -> Any:
        steps.append(name)
        return function(*args)

    result = domain_adapt(
        [
            f"base={final}",
            f"corpus={corpus}",
            "task=sentiment",
            f"output={tmp_path / 'adapt'}",
            "dapt_steps=2",
            "tapt_steps=1",
            f"tapt_corpus={corpus}",
            "min_count=5",
            "seeds=0",
            "trainer.max_steps=2",
            "task.batch_size=4",
        ],
        step=step,
    )
    assert steps == [
        "domain-corpus",
        "extend-vocab",
        "dapt",
        "tapt",
        "finetune-base",
        "finetune-adapted",
    ]
    assert [row["arm"] for row in result["rows"]] == ["base", "adapted"]
    assert "| adapted |" in result["table"]
    assert Path(result["adapted"]).name == "final"


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_flow_runs_the_steps_as_tasks_and_publishes_the_table(tmp_path: Path) -> None:
    import asyncio

    from prefect.client.orchestration import get_client

    from flows.domain_adapt_flow import domain_adapt_flow

    final, corpus = _final(tmp_path / "final"), _corpus(tmp_path / "domain.txt")
    result = domain_adapt_flow(
        [
            f"base={final}",
            f"corpus={corpus}",
            "task=sentiment",
            f"output={tmp_path / 'adapt'}",
            "dapt_steps=1",
            "seeds=0",
            "trainer.max_steps=1",
        ]
    )
    assert [row["arm"] for row in result["rows"]] == ["base", "adapted"]

    async def latest() -> tuple[dict[str, str], list[str]]:
        async with get_client() as client:
            artifacts = {str(a.key): str(a.data) for a in await client.read_latest_artifacts()}
            tasks = [str(t.name) for t in await client.read_task_runs()]
        return artifacts, tasks

    artifacts, tasks = asyncio.run(latest())
    assert "| adapted |" in artifacts["domain-adapt-report"]
    for name in ("domain-corpus", "extend-vocab", "dapt", "finetune-base", "finetune-adapted"):
        assert any(task.startswith(name) for task in tasks), (name, tasks)
