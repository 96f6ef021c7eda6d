"""The `prepare_corpus` flow and `ptm prepare`: same shards as the library, nothing rebuilt
on a re-run, a bad line fails with file:line without retries, one-line CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli import main
from ptm_core.data.corpus import CorpusError
from ptm_core.data.prepare import prepare_corpus as prepare_library
from ptm_core.data.prepared import PreparedCorpus

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_specs" / "text_corpus" / "sample"
TXT, JSONL = SAMPLE / "corpus.txt", SAMPLE / "corpus.jsonl"
VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"


def _times(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_flow_builds_the_librarys_shards_then_nothing(tmp_path: Path) -> None:
    from flows.prepare_corpus import prepare_corpus

    inputs = [str(TXT), str(JSONL)]
    out = tmp_path / "flow"
    result = prepare_corpus(inputs, str(out), tokenizer=str(VOCAB), workers=2, shard_bytes=5000)
    library = prepare_library(
        inputs, tmp_path / "library", tokenizer=VOCAB, workers=0, shard_bytes=5000, progress=False
    )
    store = PreparedCorpus.open(out)
    assert store.manifest["shards"] == library.manifest["shards"]
    assert result["built"] == result["shards"] == library.num_shards > 2
    assert result["tokens"] == library.num_tokens and result["documents"] == 37
    before = _times(out)
    again = prepare_corpus(inputs, str(out), tokenizer=str(VOCAB), workers=0, shard_bytes=5000)
    assert again["built"] == 0 and again["fingerprint"] == result["fingerprint"]
    assert _times(out) == before


def test_flow_bad_line_names_it_is_not_retried_and_keeps_other_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.prepare_corpus as module

    corpus = tmp_path / "big.jsonl"
    lines = [json.dumps({"text": f"Document {i} is here. It ends now."}) for i in range(300)]
    lines[150] = "[1, 2"  # line 151, in the middle shard
    corpus.write_text("\n".join(lines) + "\n")
    calls: list[str] = []
    real = module.prepare_shard

    def counting(shard):  # type: ignore[no-untyped-def]
        calls.append(shard.name)
        return real(shard)

    monkeypatch.setattr(module, "prepare_shard", counting)
    out = tmp_path / "out"
    with pytest.raises(CorpusError, match=rf"^{corpus}:151: invalid JSON"):
        module.prepare_corpus(
            [str(corpus)], str(out), tokenizer=str(VOCAB), workers=0, shard_bytes=3000
        )
    assert len(calls) == len(set(calls)) > 3  # each shard once: no retry of a data error
    records = list((out / "shards").glob("*.json"))
    assert len(records) == len(calls) - 1 and not (out / "manifest.json").exists()


def test_ptm_prepare_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prepared"
    args = ["prepare", str(SAMPLE), "--output", str(out), "--tokenizer", str(VOCAB)]
    assert main([*args, "--workers", "0"]) == 0
    store = PreparedCorpus.open(out)
    assert (store.num_documents, store.num_sentences) == (37, 475)
    assert store.manifest["tokenizer"]["source"] == "given"
    assert main([*args, "--workers", "0"]) == 0  # up to date
    capsys.readouterr()
    missing = tmp_path / "nope.txt"
    assert main(["prepare", str(missing), "--output", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ptm:")]
    assert err == [
        f"ptm: {missing}: input not found (field 'path'); pass an existing file, folder or "
        "glob pattern"
    ]
