"""Every spec and command, fed generated bad inputs (issue #31, "What it must show").

Each case must end in a ptm error (a ``ValueError`` such as ``DataError`` or
``ConfigError``, or ``FileNotFoundError``; for the CLI, exit 1 or 2 with one ``ptm:`` line),
never in a traceback type (``TypeError``, ``KeyError``, ``RecursionError``, ...) and never
in silence; the message names the file (with the line, or the field or JSON path, where
there is one); and no output is left behind.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from bad_input_cases import Case, prepared_corpus_cases, text_corpus_cases
from bad_input_knowledge import (
    image_text_cases,
    kg_cases,
    linked_corpus_cases,
    parallel_corpus_cases,
)
from bad_input_tasks import (
    cli_flag_cases,
    conll_cases,
    glue_cases,
    kbert_cases,
    override_cases,
    squad_cases,
    swag_cases,
)

CASES: list[Case] = list(
    itertools.chain(
        text_corpus_cases(),
        prepared_corpus_cases(),
        kg_cases(),
        linked_corpus_cases(),
        parallel_corpus_cases(),
        image_text_cases(),
        glue_cases(),
        conll_cases(),
        squad_cases(),
        swag_cases(),
        kbert_cases(),
        override_cases(),
        cli_flag_cases(),
    )
)
# ValueError covers DataError (every spec reader's error) and ConfigError.
PTM_ERRORS = (ValueError, FileNotFoundError)


def test_there_are_at_least_300_cases() -> None:
    assert len(CASES) >= 300, len(CASES)
    assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_gets_one_ptm_error(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, data in case.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    with pytest.raises(BaseException) as caught:
        case.read(tmp_path)
    error = caught.value
    if isinstance(error, SystemExit):  # the CLI: an exit code and one line on stderr
        assert error.code in (1, 2), error.code
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines and lines[-1].startswith("ptm: "), lines
        assert "Traceback" not in "\n".join(lines)
        message = lines[-1]
    else:
        assert isinstance(error, PTM_ERRORS), f"{type(error).__name__}: {error}"
        message = str(error)
    assert "\n" not in message.strip(), message
    for text in (case.names, *case.also):
        assert text in message, f"{text!r} not in {message!r}"
    if case.output is not None:
        assert not (tmp_path / case.output).exists(), f"{case.output} was written"
    leftovers = [p for p in tmp_path.rglob("*.tmp") if p.is_file()]
    assert not leftovers, leftovers


def test_cases_write_only_in_their_folder() -> None:
    # A case whose reader wrote next to the repository would show up here.
    assert not any(name.endswith(".tmp") for name in os.listdir("."))
