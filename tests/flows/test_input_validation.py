"""Settings and files that were accepted silently get one line naming the key and its range
(issue #31 item 10): loss weights, an empty entity table, an export without a tokenizer,
``embed-kg``/``prepare`` numbers, a NUL in a GLUE TSV, an empty SQuAD question, a K-BERT row
with more fields than its header."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from flows.cli import main
from flows.config import ConfigError, compose_config
from ptm_core.data.errors import DataError
from ptm_core.data.prepare import prepare_corpus
from ptm_core.finetune.data.glue import read_glue
from ptm_core.finetune.data.squad import read_squad
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import SPECIAL_TOKENS, WordPieceTokenizer
from ptm_knowledge.kbert.tsv import read_labeled_tsv
from ptm_knowledge.kg import KGError, load_knowledge_graph


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["objective.weights.mlm=-1"], r"objective\.weights\.mlm=-1: .* >= 0"),
        (["objective.weights.mlm=-0.5"], r"objective\.weights\.mlm=-0\.5"),
        (["objective=mlm_nsp", "objective.weights.mlm=0", "objective.weights.nsp=0"], "all 0"),
        (["objective=sop_mlm", "objective.weights.sop=-2"], r"objective\.weights\.sop=-2"),
    ],
)
def test_loss_weights_are_finite_non_negative_and_not_all_zero(
    overrides: list[str], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        compose_config(overrides)


def test_objective_mix_refuses_a_negative_or_all_zero_weight() -> None:
    objectives = {"a": torch.nn.Identity(), "b": torch.nn.Identity()}
    with pytest.raises(ValueError, match=r"weight of objective 'a' is -1\.0"):
        ObjectiveMix(objectives, {"a": -1.0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="all objective weights are 0"):
        ObjectiveMix(objectives, {"a": 0.0, "b": 0})  # type: ignore[arg-type]


def test_header_only_entity_table_is_refused(tmp_path: Path) -> None:
    entities = tmp_path / "entities.tsv"
    entities.write_text("# my graph\nid\tname\ttype\taliases\tdescription\n\n", encoding="utf-8")
    (tmp_path / "triples.tsv").write_text("", encoding="utf-8")
    with pytest.raises(KGError, match=r"entities\.tsv: the table has its header but no entity"):
        load_knowledge_graph(entities, cache_dir=tmp_path / "cache")


def _words_vocab(path: Path, words: list[str]) -> Path:
    path.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n", encoding="utf-8")
    return path


def test_export_of_a_final_without_tokenizer_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hydra.utils import instantiate

    cfg = compose_config(["experiment=bert_tiny"])
    encoder = instantiate(cfg.model)(vocab_size=40)
    encoder.save_pretrained(tmp_path / "final")  # no tokenizer writer
    assert main(["export", str(tmp_path / "final"), str(tmp_path / "hf")]) == 0
    printed = capsys.readouterr().out
    assert "AutoTokenizer.from_pretrained" not in printed
    assert "tokenizer      none:" in printed and "holds no tokenizer" in printed


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--epochs", "-1"], r"num_epochs \(--epochs\) is -1; it must be .* at least 1"),
        (["--epochs", "0"], r"num_epochs \(--epochs\) is 0"),
        (["--dim", "0"], r"embedding_dim \(--dim\) is 0; it must be .* at least 1"),
        (["--negatives", "0"], r"num_negatives \(--negatives\) is 0"),
        (["--patience", "-1"], r"patience \(--patience\) is -1; .* at least 0"),
        (["--lr", "0"], r"learning_rate \(--lr\) is 0\.0"),
        (["--threads", "0"], r"threads \(--threads\) is 0"),
    ],
)
def test_embed_kg_numbers_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: str
) -> None:
    out = tmp_path / "emb"
    code = main(["embed-kg", "--kg", str(tmp_path / "no-kg"), "--output", str(out), *flags])
    assert code == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("ptm: ")
    assert re.search(expected, err), err
    assert not out.exists()


def test_embedding_settings_name_the_setting() -> None:
    from ptm_knowledge.kg import check_embedding_settings

    with pytest.raises(ValueError, match=r"learning_rate \(--lr\) is nan"):
        check_embedding_settings(learning_rate=float("nan"))
    with pytest.raises(ValueError, match=r"batch_size \(--batch-size\) is 0"):
        check_embedding_settings(batch_size=0)
    with pytest.raises(ValueError, match=r"num_negatives \(--negatives\) is 0"):
        check_embedding_settings(num_negatives=0)
    with pytest.raises(ValueError, match=r"preset \(--preset\) is 'huge'"):
        check_embedding_settings(preset="huge")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--vocab-size", "0"], r"vocab_size \(--vocab-size\) is 0; .* at least 6"),
        (["--vocab-size", "-5"], r"vocab_size \(--vocab-size\) is -5"),
        (["--workers", "-3"], r"workers \(--workers\) is -3; it must be 0"),
    ],
)
def test_prepare_numbers_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: str
) -> None:
    corpus = tmp_path / "log.txt"
    corpus.write_text("Vex qua lorn.\nPim tash.\n", encoding="utf-8")
    out = tmp_path / "prepared"
    assert main(["prepare", str(corpus), "--output", str(out), *flags]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert re.search(expected, err), err
    assert not out.exists()


def test_vocab_below_specials_and_alphabet_states_the_minimum(tmp_path: Path) -> None:
    corpus = tmp_path / "glyphs.txt"
    corpus.write_text("Ωmega ψi χi φi ζeta ηta θeta.\nAbc xyz qrs tuv.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab_size is 12, below .*; use at least \d+"):
        prepare_corpus([corpus], tmp_path / "p", vocab_size=12, workers=0, progress=False)
    assert not (tmp_path / "p" / "tokenizer").exists()
    with pytest.raises(ValueError, match="at least 6"):
        WordPieceTokenizer.train(["abc"], vocab_size=0)


def test_nul_inside_a_glue_tsv_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "reviews.tsv"
    path.write_text("sentence\tlabel\nfine film\tpos\nbad\x00 film\tneg\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"reviews\.tsv:3: control character U\+0000") as caught:
        read_glue(path)
    assert caught.value.field == "sentence"


def test_empty_squad_question_names_file_and_id(tmp_path: Path) -> None:
    context = "Moths circle the lamp at dusk."
    qas = [
        {
            "id": "m1",
            "question": "What circles?",
            "answers": [{"text": "Moths", "answer_start": 0}],
        },
        {"id": "m2", "question": "  ", "answers": [{"text": "dusk", "answer_start": 25}]},
    ]
    path = tmp_path / "moths.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}))
    with pytest.raises(DataError, match=r"moths\.json: question 'm2' is empty") as caught:
        read_squad(path)
    assert caught.value.field == "data[0].paragraphs[0].qas[1].question"


def test_kbert_row_with_more_fields_than_its_header(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("label\ttext_a\nyes\tOne line .\nno\tTwo line .\tstray third\n")
    with pytest.raises(DataError, match=r"pairs\.tsv:3: 3 tab-separated fields, but the header"):
        read_labeled_tsv(path)
