"""Bad fine-tuning task files (GLUE, CoNLL, SQuAD, SWAG, K-BERT), Hydra overrides and CLI
flags."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bad_input_cases import DEEP, WORDS, Case, _file_mutations, _line_mutations, _lines


def glue_cases() -> Iterator[Case]:
    from ptm_core.finetune.data.glue import read_glue

    def tsv(d: Path) -> object:
        return read_glue(d / "pairs.tsv")

    def regression(d: Path) -> object:
        return read_glue(d / "scores.tsv", kind="regression", label_field="score")

    def jsonl(d: Path) -> object:
        return read_glue(d / "pairs.jsonl")

    header = b"premise\thypothesis\tlabel"
    rows = [
        f"A {w} hums.\tThe {w} sings.\t{'yes' if i % 2 else 'no'}".encode()
        for i, w in enumerate(WORDS[:8])
    ]
    bad = {
        "two-columns": b"A vorix hums.\tyes",
        "four-columns": b"A vorix.\tB.\tyes\textra",
        "empty-label": b"A vorix.\tB.\t",
        "nul-premise": b"A vo\x00rix.\tB.\tyes",
        "nul-hypothesis": b"A vorix.\tB\x00.\tyes",
        "control": b"A vo\x02rix.\tB.\tyes",
        "bad-utf8": b"A vor\xe9.\tB.\tyes",
    }
    yield from _line_mutations("glue-tsv", "pairs.tsv", [header], rows, bad, tsv)
    yield from _file_mutations("glue-tsv", "pairs.tsv", _lines([header, *rows]), tsv)
    yield Case("glue-tsv/header-only", {"pairs.tsv": _lines([header])}, tsv, "pairs.tsv")
    score_rows = [f"A {w}.\tB {w}.\t{i / 2}".encode() for i, w in enumerate(WORDS[:6])]
    score_bad = {"not-a-number": b"A.\tB.\thigh", "empty": b"A.\tB.\t"}
    yield from _line_mutations(
        "glue-regression",
        "scores.tsv",
        [b"sentence1\tsentence2\tscore"],
        score_rows,
        score_bad,
        regression,
    )
    json_rows = [
        json.dumps({"premise": f"A {w}.", "hypothesis": "B.", "label": "yes"}).encode()
        for w in WORDS[:6]
    ]
    json_bad = {
        "not-json": b"premise",
        "deep": DEEP,
        "array": b"[1]",
        "missing-key": b'{"premise": "A.", "label": "yes"}',
        "premise-int": b'{"premise": 3, "hypothesis": "B.", "label": "yes"}',
        "premise-null": b'{"premise": null, "hypothesis": "B.", "label": "yes"}',
        "label-null": b'{"premise": "A.", "hypothesis": "B.", "label": null}',
        "surrogate": b'{"premise": "A\\ud83d.", "hypothesis": "B.", "label": "yes"}',
        "nul": b'{"premise": "A\\u0000.", "hypothesis": "B.", "label": "yes"}',
    }
    yield from _line_mutations("glue-jsonl", "pairs.jsonl", [], json_rows, json_bad, jsonl)


def conll_cases() -> Iterator[Case]:
    from ptm_core.finetune.data.conll import read_conll

    def read(d: Path) -> object:
        return read_conll(d / "tags.txt")

    rows = []
    for i, w in enumerate(WORDS[:9]):
        rows.append(f"{w.title()} X X B-THING".encode())
        rows.append(b"hums X X O")
        if i % 3 == 2:
            rows.append(b"")
    bad = {
        "nul": b"Vo\x00rix X X O",
        "bad-utf8": b"Vor\xe9 X X O",
        "bad-tag": b"Vorix X X Q-THING",
        "empty-tag-type": b"Vorix X X B-",
    }
    yield from _line_mutations("conll", "tags.txt", [], rows, bad, read, at=(0, 5))
    yield from _file_mutations("conll", "tags.txt", _lines(rows), read)


def _squad(qas: list[dict[str, Any]], context: str = "Vorix sings at dawn by the drum.") -> bytes:
    return json.dumps(
        {
            "version": "v2.0",
            "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}],
        }
    ).encode()


def squad_cases() -> Iterator[Case]:
    from ptm_core.finetune.data.squad import read_squad

    def read(d: Path) -> object:
        return read_squad(d / "qa.json")

    good = {"id": "q1", "question": "Who sings?", "answers": [{"text": "Vorix", "answer_start": 0}]}

    def qa(**changes: Any) -> list[dict[str, Any]]:
        return [{**good, "id": "q0"}, {**good, **changes}]

    where = "data[0].paragraphs[0].qas[1]"
    cases: dict[str, tuple[bytes, str]] = {
        "question-empty": (_squad(qa(question="")), f"{where}.question"),
        "question-blank": (_squad(qa(question="  \t")), f"{where}.question"),
        "question-int": (_squad(qa(question=5)), "question"),
        "question-nul": (_squad(qa(question="Who\x00?")), f"{where}.question"),
        "question-surrogate": (_squad(qa(question="Who\ud800?")), f"{where}.question"),
        "id-missing": (_squad(qa(id=None)), f"{where}.id"),
        "id-duplicate": (_squad(qa(id="q0")), f"{where}.id"),
        "answers-missing": (_squad(qa(answers=[])), f"{where}.answers"),
        "answers-str": (_squad(qa(answers="Vorix")), f"{where}.answers"),
        "answer-start-neg": (_squad(qa(answers=[{"text": "Vorix", "answer_start": -1}])), where),
        "answer-start-huge": (
            _squad(qa(answers=[{"text": "Vorix", "answer_start": 10**30}])),
            where,
        ),
        "answer-text-differs": (_squad(qa(answers=[{"text": "Drum", "answer_start": 0}])), where),
        "answer-start-str": (_squad(qa(answers=[{"text": "Vorix", "answer_start": "0"}])), where),
        "impossible-str": (_squad(qa(is_impossible="yes")), f"{where}.is_impossible"),
        "impossible-with-answer": (_squad(qa(is_impossible=True)), f"{where}.answers"),
        "context-nul": (_squad(qa(), context="Vorix\x00 sings."), "context"),
        "context-int": (
            json.dumps({"data": [{"paragraphs": [{"context": 5, "qas": []}]}]}).encode(),
            "context",
        ),
        "no-data": (b'{"version": "1.1"}', "data"),
        "data-dict": (b'{"data": {}}', "data"),
        "paragraphs-missing": (b'{"data": [{"title": "t"}]}', "paragraphs"),
        "qas-str": (b'{"data": [{"paragraphs": [{"context": "a", "qas": "x"}]}]}', "qas"),
        "no-questions": (b'{"data": []}', "qa.json"),
        "not-json": (b"{data: []}", "qa.json:1"),
        "deep": (b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "qa.json"),
        "bad-utf8": (b'{"data": [], "v": "\xe9"}', "qa.json:1"),
    }
    for mutation, (data, also) in cases.items():
        yield Case(f"squad/{mutation}", {"qa.json": data}, read, "qa.json", also=(also,))


def swag_cases() -> Iterator[Case]:
    from ptm_core.finetune.data.swag import read_swag

    def read(d: Path) -> object:
        return read_swag(d / "choices.csv")

    header = b"sent1,sent2,ending0,ending1,ending2,ending3,label"
    rows = [
        f"The {w} hums.,It,sings.,sleeps.,runs.,falls.,{i % 4}".encode()
        for i, w in enumerate(WORDS[:8])
    ]
    bad = {
        "label-7": b"A.,It,a.,b.,c.,d.,7",
        "label-neg": b"A.,It,a.,b.,c.,d.,-1",
        "label-word": b"A.,It,a.,b.,c.,d.,first",
        "label-huge": b"A.,It,a.,b.,c.,d.,99999999999999999999999",
        "short-row": b"A.,It,a.,b.",
        "long-row": b"A.,It,a.,b.,c.,d.,1,extra",
        "nul": b"A\x00.,It,a.,b.,c.,d.,1",
        "bad-utf8": b"A\xe9.,It,a.,b.,c.,d.,1",
    }
    yield from _line_mutations("swag", "choices.csv", [header], rows, bad, read)
    yield from _file_mutations("swag", "choices.csv", _lines([header, *rows]), read)
    yield Case(
        "swag/no-label-column", {"choices.csv": _lines([header[:-6], *rows])}, read, "choices.csv"
    )


def kbert_cases() -> Iterator[Case]:
    from ptm_knowledge.kbert.tsv import read_labeled_tsv, read_tagged_tsv

    def labeled(d: Path) -> object:
        return read_labeled_tsv(d / "kb.tsv")

    def tagged(d: Path) -> object:
        return read_tagged_tsv(d / "kbtags.tsv")

    header = b"label\ttext_a"
    rows = [f"{'yes' if i % 2 else 'no'}\tThe {w} hums .".encode() for i, w in enumerate(WORDS[:8])]
    bad = {
        "three-fields": b"yes\tThe vorix hums .\tstray",
        "one-field": b"yes",
        "empty-label": b"\tThe vorix .",
        "empty-text": b"yes\t  ",
        "nul": b"yes\tThe vo\x00rix .",
        "bad-utf8": b"yes\tThe vor\xe9 .",
        "surrogate-bytes": b"yes\tThe \xed\xa0\x80 .",
    }
    yield from _line_mutations("kbert", "kb.tsv", [header], rows, bad, labeled)
    yield from _file_mutations("kbert", "kb.tsv", _lines([header, *rows]), labeled)
    tag_rows = [f"{w}\t{'B-X' if i % 2 else 'O'}".encode() for i, w in enumerate(WORDS[:8])]
    tag_bad = {
        "one-field": b"vorix",
        "three-fields": b"vorix\tO\tO",
        "empty-tag": b"vorix\t ",
        "bad-utf8": b"vor\xe9\tO",
    }
    yield from _line_mutations("kbert-tags", "kbtags.tsv", [], tag_rows, tag_bad, tagged)


def override_cases() -> Iterator[Case]:
    """Hydra overrides: each one line naming the key (no file involved)."""
    from flows.config import compose_config

    bad = [
        "trainer.max_steps=abc",
        "trainer.max_steps=2.5",
        "trainer.max_stepz=3",
        "+trainer.nothing=1",
        "model.hidden_size=abc",
        "objective.weights.mlm=-1",
        "objective.weights.mlm=-1e9",
        "objective.weights.mlm=inf",
        "objective.weights.mlm=nan",
        "data.batch_size=abc",
        "experiment=no_such_experiment",
        "model=bert-base-uncased",
        "objective=no_such_objective",
        "trainer.learning_rate=fast",
    ]
    for override in bad:
        key = override.lstrip("+").split("=")[0].split(".")[-1]
        yield Case(f"override/{override}", {}, lambda _d, o=override: compose_config([o]), key)
    yield Case(
        "override/all-weights-zero",
        {},
        lambda _d: compose_config(
            ["objective=mlm_nsp", "objective.weights.mlm=0", "objective.weights.nsp=0"]
        ),
        "objective.weights",
    )


def cli_flag_cases() -> Iterator[Case]:
    """``ptm`` flags checked before any work; the case passes ``main``'s exit code through."""
    corpus = {"in.txt": b"The vorix hums.\nIt sleeps.\n"}
    flags = {
        "prepare-vocab-0": ["prepare", "{d}/in.txt", "--output", "{d}/out", "--vocab-size", "0"],
        "prepare-vocab-neg": ["prepare", "{d}/in.txt", "--output", "{d}/out", "--vocab-size", "-5"],
        "prepare-vocab-3": ["prepare", "{d}/in.txt", "--output", "{d}/out", "--vocab-size", "3"],
        "prepare-workers-neg": ["prepare", "{d}/in.txt", "--output", "{d}/out", "--workers", "-3"],
        "prepare-missing-input": ["prepare", "{d}/none.txt", "--output", "{d}/out"],
        "prepare-fifo": ["prepare", "{d}/fifo.jsonl", "--output", "{d}/out"],
        "embed-dim-0": ["embed-kg", "--kg", "{d}/kg", "--output", "{d}/out", "--dim", "0"],
        "embed-dim-neg": ["embed-kg", "--kg", "{d}/kg", "--output", "{d}/out", "--dim", "-8"],
        "embed-epochs-neg": ["embed-kg", "--kg", "{d}/kg", "--output", "{d}/out", "--epochs", "-1"],
        "embed-epochs-0": ["embed-kg", "--kg", "{d}/kg", "--output", "{d}/out", "--epochs", "0"],
    }
    for name, argv in flags.items():
        yield Case(f"cli/{name}", corpus, _cli(argv), "", output="out")


def _cli(argv: list[str]) -> Any:
    def run(d: Path) -> None:
        import os

        from flows.cli import main

        if any("fifo" in a for a in argv) and not (d / "fifo.jsonl").exists():
            os.mkfifo(d / "fifo.jsonl")
        code = main([a.format(d=d) for a in argv])
        if code != 0:
            raise SystemExit(code)

    return run
