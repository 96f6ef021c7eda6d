"""XLM from prepared data: same batches as the in-memory path, cache reuse, damage, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.data import CorpusError, PreparedCorpus, PreparedDataError
from ptm_multilingual import (
    PreparedXLM,
    SharedBPETokenizer,
    XLMBatches,
    build_mlm_streams,
    build_tlm_examples,
    prepare_xlm,
    read_monolingual_corpora,
    read_parallel_corpora,
)
from ptm_multilingual.tokenizer import sample_plan, smoothed_sample

DATA = Path(__file__).resolve().parents[2] / "data_specs"
MONO = DATA / "monolingual_corpus" / "sample"
PARALLEL = DATA / "parallel_corpus" / "sample"
DIRECTIONS = ["en-fr", "fr-en", "en-de", "de-en", "de-fr", "fr-de"]
# Tiny shards: streams and parallel corpora span several, rows cross shard boundaries.
SHARD_TOKENS = 700


def _in_memory(
    tok: SharedBPETokenizer,
    mono_path: Path | None,
    directions: list[str] | None,
    stream_length: int,
    max_length: int,
) -> tuple[dict[str, list[Any]], dict[str, list[Any]], dict[str, int], torch.Tensor]:
    """The in-memory path of XLM pre-training before prepared data (lists of every row)."""
    vocab = tok.vocab_info
    mono = read_monolingual_corpora(mono_path) if mono_path is not None else {}
    par = read_parallel_corpora(PARALLEL)
    texts: dict[str, list[str]] = {lang: list(s) for lang, s in mono.items()}
    for corpus in par:
        texts.setdefault(corpus.source_lang, []).extend(s for s, _ in corpus.pairs)
        texts.setdefault(corpus.target_lang, []).extend(t for _, t in corpus.pairs)
    stream_texts = mono if mono else texts
    mlm = {
        lang: build_mlm_streams(tok.encode_batch(s), tok.lang_id(lang), vocab, stream_length)
        for lang, s in stream_texts.items()
    }
    mlm_counts = {lang: len(s) for lang, s in stream_texts.items()}
    tlm: dict[str, list[Any]] = {}
    for corpus in par:
        oriented = [(corpus.source_lang, corpus.target_lang, corpus.pairs)]
        if directions is not None:
            backward = (corpus.target_lang, corpus.source_lang, [(t, s) for s, t in corpus.pairs])
            oriented = [o for o in [*oriented, backward] if f"{o[0]}-{o[1]}" in directions]
        for src, tgt, pairs in oriented:
            ids = zip(
                tok.encode_batch([s for s, _ in pairs]),
                tok.encode_batch([t for _, t in pairs]),
                strict=True,
            )
            rows = build_tlm_examples(
                list(ids), tok.lang_id(src), tok.lang_id(tgt), vocab, max_length
            )
            tlm[f"{src}-{tgt}"] = tlm.get(f"{src}-{tgt}", []) + rows
    counts = torch.zeros(vocab.vocab_size, dtype=torch.long)
    for rows in mlm.values():
        for row in rows:
            counts += torch.bincount(torch.tensor(row["input_ids"]), minlength=vocab.vocab_size)
    return mlm, tlm, mlm_counts, counts


@pytest.mark.parametrize(
    ("mono_path", "directions"), [(MONO, DIRECTIONS), (None, None)], ids=["mono", "parallel-only"]
)
def test_prepared_and_in_memory_paths_give_identical_batches(
    tmp_path: Path, mono_path: Path | None, directions: list[str] | None
) -> None:
    folder = prepare_xlm(
        mono_path, PARALLEL, vocab_size=400, cache_dir=tmp_path, shard_tokens=SHARD_TOKENS
    )
    data = PreparedXLM.open(folder)
    assert all(store.num_shards > 1 for store in data.mono.values())
    tok = data.tokenizer
    mlm, tlm, mlm_counts, counts = _in_memory(tok, mono_path, directions, 32, 48)
    lazy_mlm, lazy_tlm = data.mlm_rows(32), data.tlm_rows(48, directions)
    assert list(lazy_mlm) == list(mlm)
    assert list(lazy_tlm) == list(tlm)
    for lang in mlm:
        assert list(lazy_mlm[lang]) == mlm[lang]
    for name in tlm:
        assert list(lazy_tlm[name]) == tlm[name]
    assert data.mlm_counts() == mlm_counts
    assert torch.equal(data.token_counts(32), counts)

    def batches(m: Any, t: Any, mc: Any) -> XLMBatches:
        return XLMBatches(
            m,
            t,
            batch_size=8,
            pad_id=tok.vocab_info.pad_id,
            seed=3,
            mlm_counts=mc,
            tlm_counts={k: len(v) for k, v in t.items()},
            mlm_steps=1,
            tlm_steps=1,
        )

    raw, prepared = batches(mlm, tlm, mlm_counts), batches(lazy_mlm, lazy_tlm, data.mlm_counts())
    for epoch, index in [(0, 0), (0, 1), (0, 2), (0, 7), (1, 4), (3, 99)]:
        a, b = raw.batch(epoch, index), prepared.batch(epoch, index)
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (epoch, index, key)
    assert raw.kind(0, 0) == "mlm" and raw.kind(0, 1) == "tlm"


def test_the_bpe_sample_is_drawn_from_counts_as_from_lists() -> None:
    texts = {"en": [f"e{i}" for i in range(300)], "fr": [f"f{i}" for i in range(40)]}
    plan = sample_plan({k: len(v) for k, v in texts.items()}, 0.5, 500, seed=4)
    drawn = sorted(texts[lang][i] for lang, indices in plan.items() for i in indices)
    assert drawn == sorted(smoothed_sample(texts, 0.5, 500, seed=4))


def test_second_prepare_reuses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = prepare_xlm(MONO, PARALLEL, vocab_size=300, cache_dir=tmp_path)
    stamp = (first / "manifest.json").stat().st_mtime_ns

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(SharedBPETokenizer, "train_from_streams", no_training)
    monkeypatch.setattr("ptm_multilingual.prepared_data._write_stream", no_training)
    monkeypatch.setattr("ptm_multilingual.prepared_data._write_parallel", no_training)
    assert prepare_xlm(MONO, PARALLEL, vocab_size=300, cache_dir=tmp_path) == first
    assert (first / "manifest.json").stat().st_mtime_ns == stamp


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("store", ["mono/fr", "parallel/000-en-de/target"])
def test_a_corrupted_shard_is_caught_by_its_checksum(tmp_path: Path, store: str) -> None:
    folder = prepare_xlm(MONO, PARALLEL, vocab_size=300, cache_dir=tmp_path, shard_tokens=500)
    shard = sorted((folder / store / "shards").glob("*.tokens"))[1]
    _damage(shard)
    with pytest.raises(PreparedDataError) as err:
        PreparedXLM.open(folder)
    message = str(err.value)
    assert str(shard) in message
    assert "checksum" in message
    assert f"delete {folder / store}" in message
    # The fix works: the deleted store is prepared again, alone, and reads as before.
    manifest = json.loads((folder / store / "manifest.json").read_text(encoding="utf-8"))
    shutil.rmtree(folder / store)
    assert prepare_xlm(MONO, PARALLEL, vocab_size=300, cache_dir=tmp_path, shard_tokens=500) == (
        folder
    )
    PreparedXLM.open(folder)
    rebuilt = json.loads((folder / store / "manifest.json").read_text(encoding="utf-8"))
    assert rebuilt["shards"] == manifest["shards"]


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


@pytest.mark.parametrize("given_tokenizer", [False, True], ids=["trained", "given"])
def test_bad_input_fails_with_file_and_line(tmp_path: Path, given_tokenizer: bool) -> None:
    # A given tokenizer skips the counting pass: the writer meets the bad line mid-stream.
    tokenizer = None
    if given_tokenizer:
        tokenizer = SharedBPETokenizer.train(
            {"en": ["a b c"] * 5, "de": ["d e f"] * 5, "fr": ["g h"] * 5}, vocab_size=60
        ).save(tmp_path / "tok")
    cache = tmp_path / "cache"
    mono = tmp_path / "mono"
    _write(mono / "en.txt", "one\ntwo\n")
    _write(mono / "fr.txt", "un\ndeux\n\xff trois\n".encode("latin-1"))
    par = tmp_path / "par"
    _write(par / "en-de.tsv", "hello\thallo\n")
    with pytest.raises(CorpusError, match=r"fr\.txt:3: not valid UTF-8"):
        prepare_xlm(mono, par, tokenizer=tokenizer, vocab_size=60, cache_dir=cache)
    _write(mono / "fr.txt", "un\ndeux\n")

    _write(par / "en-de.tsv", "hello\thallo\nworld welt\n")
    with pytest.raises(CorpusError, match=r"en-de\.tsv:2: expected 2 tab-separated columns"):
        prepare_xlm(mono, par, tokenizer=tokenizer, vocab_size=60, cache_dir=cache)
    (par / "en-de.tsv").unlink()

    _write(par / "en-de.en", "one\ntwo\nthree\n")
    _write(par / "en-de.de", "eins\nzwei\n")
    with pytest.raises(
        CorpusError, match=r"en-de\.en:3: en-de\.en has 3 lines but en-de\.de has 2"
    ):
        prepare_xlm(mono, par, tokenizer=tokenizer, vocab_size=60, cache_dir=cache)
    # Nothing half-written is left: no prepared folder is complete, no temporary folder
    # remains, and the stores finished before the bad line stay valid (kept for the re-run).
    assert not list(cache.glob("xlm/*/manifest.json"))
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")]
    for store in cache.glob("xlm/*/mono/*"):
        PreparedCorpus.open(store)


def test_xlm_pretraining_prepares_once_and_a_resume_reads_the_same_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functools import partial

    from ptm_core.families.runner import PretrainRun, run_pretraining
    from ptm_core.training import TrainerConfig
    from ptm_multilingual import XLMMaskedLMObjective, xlm_text_encoder
    from ptm_multilingual.families import XLM
    from ptm_multilingual.settings import XLMData, XLMSettings

    def run(steps: int, resume: bool | str = True) -> Path:
        data = XLMData(
            corpus=str(MONO),
            parallel=str(PARALLEL),
            vocab_size=300,
            stream_length=16,
            max_length=16,
            batch_size=4,
            cache_dir=str(tmp_path / "cache"),
        )
        result = run_pretraining(
            XLM,
            PretrainRun(
                settings=XLMSettings(data=data),
                model=partial(
                    xlm_text_encoder, hidden_size=16, num_layers=1, num_heads=2, max_positions=32
                ),
                objectives={"xlm_mlm": XLMMaskedLMObjective},
                weights={},
                trainer=TrainerConfig(
                    output_dir=str(tmp_path / "run"),
                    max_steps=steps,
                    save_every=2,
                    log_every=1,
                    progress=False,
                    device="cpu",
                    resume=resume,
                ),
                seed=0,
            ),
        )
        assert result.final_metrics["step"] == steps
        return result.tokenizer_dir

    run(2)
    prepared = list((tmp_path / "cache").glob("xlm/*/manifest.json"))
    assert len(prepared) == 1

    def no_preparing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the corpora were prepared again")

    monkeypatch.setattr("ptm_multilingual.prepared_data._write_stream", no_preparing)
    monkeypatch.setattr("ptm_multilingual.prepared_data._write_parallel", no_preparing)
    monkeypatch.setattr(SharedBPETokenizer, "train_from_streams", no_preparing)
    # Extends the finished 2-step run (another budget: an explicit resume) from step 2 with
    # the run's own tokenizer: the same prepared folder.
    run(4, resume="force")
    assert list((tmp_path / "cache").glob("xlm/*/manifest.json")) == prepared
