"""``ptm prepare`` (library side): the prepared store holds exactly the raw path's token ids,
for every input format, however the input is cut; re-runs, new files, kill -9, damaged
shards and bad lines; the dtype."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ptm_core.atomic import OUTPUT_MARKER
from ptm_core.data.corpus import CorpusError, Document, read_text_corpus, split_sentences
from ptm_core.data.prepare import prepare_corpus, prepared_cache_dir
from ptm_core.data.prepared import PreparedCorpus, PreparedDataError, token_dtype
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.pretraining import tokenize_documents
from ptm_core.tokenization import SPECIAL_TOKENS, WordPieceTokenizer

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "data_specs" / "text_corpus" / "sample"
TXT = SAMPLE / "corpus.txt"
JSONL = SAMPLE / "corpus.jsonl"
VOCAB = REPO / "data_specs" / "text_corpus" / "sample-vocab.txt"


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB)


def reference(documents: list[Document], tokenizer: WordPieceTokenizer) -> InMemoryTokenStore:
    return InMemoryTokenStore(tokenize_documents(documents, tokenizer))


def assert_same_store(store: TokenStore, expected: TokenStore) -> None:
    """Document by document: sentence offsets and token ids; then the document chunks."""
    assert store.num_documents == expected.num_documents
    assert store.num_tokens == expected.num_tokens
    for document in range(expected.num_documents):
        got, want = store.sentence_offsets(document), expected.sentence_offsets(document)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            store.tokens(int(got[0]), int(got[-1])), expected.tokens(int(want[0]), int(want[-1]))
        )
    got_bounds = np.concatenate([c[:-1] for c in store.document_offsets()])
    np.testing.assert_array_equal(got_bounds, next(expected.document_offsets())[:-1])


def prepare(inputs: object, out: Path, **settings: object) -> PreparedCorpus:
    settings = {"tokenizer": VOCAB, "workers": 0, "progress": False, **settings}
    return prepare_corpus(inputs, out, **settings)  # type: ignore[arg-type]


def file_times(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def texts_of(documents: list[Document]) -> list[str]:
    """One text per document that ``split_sentences`` splits back into its sentences."""
    texts = ["\n\n".join(d.sentences) for d in documents]
    assert [tuple(split_sentences(t)) for t in texts] == [d.sentences for d in documents]
    return texts


# ---------------------------------------------------------------------- same ids as raw


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.jsonl"])
def test_plain_files_hold_the_raw_paths_ids(name: str, tmp_path: Path, tokenizer) -> None:
    store = prepare(SAMPLE / name, tmp_path / "out")
    assert_same_store(store, reference(read_text_corpus(SAMPLE / name), tokenizer))
    assert store.num_sentences == sum(len(d.sentences) for d in read_text_corpus(SAMPLE / name))
    assert PreparedCorpus.open(tmp_path / "out").fingerprint == store.fingerprint


def test_compressed_files_hold_the_raw_paths_ids(tmp_path: Path, tokenizer) -> None:
    zstandard = pytest.importorskip("zstandard")
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(TXT.read_bytes()))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(JSONL.read_bytes()))
    store = prepare([tmp_path / "a.txt.gz", tmp_path / "b.jsonl.zst"], tmp_path / "out")
    documents = read_text_corpus([TXT, JSONL])
    assert_same_store(store, reference(documents, tokenizer))


def test_save_to_disk_folder_and_parquet(tmp_path: Path, tokenizer) -> None:
    datasets = pytest.importorskip("datasets")
    documents = read_text_corpus(TXT)
    table = {"content": texts_of(documents), "n": list(range(len(documents)))}
    datasets.Dataset.from_dict(table).save_to_disk(str(tmp_path / "ds"))
    datasets.Dataset.from_dict(table).to_parquet(str(tmp_path / "corpus.parquet"))
    expected = reference(documents, tokenizer)
    for source in ("ds", "corpus.parquet"):
        store = prepare(tmp_path / source, tmp_path / f"out-{source}", text_field="content")
        assert_same_store(store, expected)


def test_arrow_rows_skip_blanks_and_name_a_null_row(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"text": ["One. Two.", "  ", None]}), tmp_path / "t.parquet")
    with pytest.raises(CorpusError, match=r"t\.parquet:3: \"text\" is a NoneType") as caught:
        prepare(tmp_path / "t.parquet", tmp_path / "out")
    assert caught.value.line == 3
    with pytest.raises(CorpusError, match=r"no column 'body' \(columns: text\)"):
        prepare(tmp_path / "t.parquet", tmp_path / "out", text_field="body")


def test_store_pickles_without_its_maps_for_dataloader_workers(tmp_path: Path) -> None:
    import pickle

    store = prepare(TXT, tmp_path / "out", shard_bytes=5000)
    bounds = store.sentence_offsets(3)
    copy = pickle.loads(pickle.dumps(store))
    np.testing.assert_array_equal(copy.sentence_offsets(3), bounds)
    np.testing.assert_array_equal(
        copy.tokens(int(bounds[0]), int(bounds[-1])), store.tokens(int(bounds[0]), int(bounds[-1]))
    )
    assert isinstance(copy, TokenStore) and copy.cache_dir == tmp_path / "out" / "cache"
    with pytest.raises(ValueError, match="cross the end of a shard"):
        first = store.manifest["shards"][0]["tokens"]
        store.tokens(first - 1, first + 1)


# ---------------------------------------------------------------------- cutting into shards


def test_many_shards_give_the_same_store_as_one(tmp_path: Path, tokenizer) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    documents = read_text_corpus([TXT, JSONL])
    expected = reference(documents, tokenizer)
    texts = texts_of(documents)
    pq.write_table(pa.table({"text": texts}), tmp_path / "c.parquet", row_group_size=4)
    with pa.ipc.new_stream(tmp_path / "c.arrow", pa.schema([("text", pa.string())])) as writer:
        for first in range(0, len(texts), 3):
            writer.write_batch(pa.record_batch([pa.array(texts[first : first + 3])], ["text"]))
    for index, inputs in enumerate(
        ([TXT, JSONL], [tmp_path / "c.parquet"], [tmp_path / "c.arrow"])
    ):
        one = prepare(inputs, tmp_path / f"one-{index}")
        many = prepare(inputs, tmp_path / f"many-{index}", shard_bytes=2000)
        assert one.num_shards == len(inputs) and many.num_shards >= 4
        assert_same_store(many, expected)
        assert_same_store(one, expected)


def test_cuts_fall_on_document_boundaries_and_keep_line_numbers(tmp_path: Path) -> None:
    store = prepare(TXT, tmp_path / "out", shard_bytes=1500)
    lines = TXT.read_bytes().split(b"\n")
    for shard in store.manifest["shards"]:
        source = shard["source"]
        if source["start"]:
            assert lines[source["line_base"] - 1].strip() == b""  # after a blank line
            assert TXT.read_bytes()[: source["start"]].count(b"\n") == source["line_base"]


def test_workers_give_the_same_shards(tmp_path: Path) -> None:
    inline = prepare([TXT, JSONL], tmp_path / "inline", shard_bytes=4000)
    pooled = prepare([TXT, JSONL], tmp_path / "pooled", shard_bytes=4000, workers=2)
    assert inline.manifest["shards"] == pooled.manifest["shards"]


# ---------------------------------------------------------------------- incremental


def test_rerun_on_unchanged_input_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare([TXT, JSONL], out, shard_bytes=5000)
    before = file_times(out)
    started = time.perf_counter()
    prepare([TXT, JSONL], out, shard_bytes=5000)
    assert time.perf_counter() - started < 2
    assert file_times(out) == before


def test_a_new_file_is_prepared_alone(tmp_path: Path, tokenizer) -> None:
    out, extra = tmp_path / "out", tmp_path / "extra.jsonl"
    first = prepare([TXT], out, shard_bytes=5000)
    shards = {s["name"] for s in first.manifest["shards"]}
    times = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
    extra.write_text(json.dumps({"text": "A new document. It has two sentences."}) + "\n")
    second = prepare([TXT, extra], out, shard_bytes=5000)
    added = [s for s in second.manifest["shards"] if s["name"] not in shards]
    assert [s["source"]["path"] for s in added] == [str(extra.resolve())]
    assert {
        p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir() if p.name in times
    } == times
    assert_same_store(second, reference(read_text_corpus([TXT, extra]), tokenizer))


def test_trained_tokenizer_is_kept_while_its_sample_is_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = prepare([TXT], out, tokenizer=None, vocab_size=300, tokenizer_sample_bytes=2000)
    assert first.manifest["tokenizer"]["sample"]["complete"]
    vocab = (first.tokenizer_dir / "vocab.txt").stat().st_mtime_ns
    second = prepare([TXT, JSONL], out, tokenizer=None, vocab_size=300, tokenizer_sample_bytes=2000)
    assert (second.tokenizer_dir / "vocab.txt").stat().st_mtime_ns == vocab
    assert second.num_documents == first.num_documents + 5
    (out / "manifest.json").unlink()  # as if killed before the end: plan.json remains
    (out / "plan.json").write_text(
        json.dumps({"inputs": [], "tokenizer": second.manifest["tokenizer"]})
    )
    shards = file_times(out / "shards")
    third = prepare([TXT, JSONL], out, tokenizer=None, vocab_size=300, tokenizer_sample_bytes=2000)
    assert (third.tokenizer_dir / "vocab.txt").stat().st_mtime_ns == vocab
    assert file_times(out / "shards") == shards


def test_tokenizer_is_trained_on_the_raw_paths_sentences(tmp_path: Path, monkeypatch) -> None:
    seen: list[str] = []
    train = WordPieceTokenizer.train

    def spy(texts, **settings):  # type: ignore[no-untyped-def]
        return train((seen.append(t) or t for t in texts), **settings)

    monkeypatch.setattr(WordPieceTokenizer, "train", spy)
    store = prepare([TXT], tmp_path / "out", tokenizer=None, vocab_size=400, shard_bytes=4000)
    documents = read_text_corpus(TXT)
    assert seen == [s for d in documents for s in d.sentences]
    prepared = WordPieceTokenizer.from_directory(store.tokenizer_dir)
    assert prepared.vocab_size == 400
    assert_same_store(store, reference(documents, prepared))


def test_cache_dir_is_keyed_by_the_inputs_as_given(tmp_path: Path) -> None:
    folder = prepared_cache_dir([SAMPLE], tmp_path, vocab_size=8000)
    assert folder.parent == tmp_path and folder.name.startswith("prepared-")
    assert prepared_cache_dir([SAMPLE], tmp_path, vocab_size=8000) == folder
    assert prepared_cache_dir([SAMPLE], tmp_path, vocab_size=500) != folder
    assert prepared_cache_dir([TXT], tmp_path, tokenizer=VOCAB) != folder


# ---------------------------------------------------------------------- damage and crashes


def test_damaged_shard_is_caught_at_open_and_rebuilt_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = prepare(TXT, out, shard_bytes=5000)
    victim = out / "shards" / f"{store.manifest['shards'][1]['name']}.tokens"
    data = bytearray(victim.read_bytes())
    data[7] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(PreparedDataError) as caught:
        PreparedCorpus.open(out)
    message = str(caught.value)
    assert str(victim) in message and "checksum" in message
    assert "re-run `ptm prepare` on the same inputs: the damaged shard is rebuilt alone" in message
    PreparedCorpus.open(out, verify=False)  # same size: only the checksum tells
    others = {p: p.stat().st_mtime_ns for p in (out / "shards").glob("*.tokens") if p != victim}
    prepare(TXT, out, shard_bytes=5000)
    assert {p: p.stat().st_mtime_ns for p in others} == others
    assert victim.read_bytes() != bytes(data)
    PreparedCorpus.open(out)


def test_files_a_family_stores_beside_the_tokens_are_verified_too(tmp_path: Path) -> None:
    # ERNIE keeps entity/phrase units beside each shard's tokens and lists their digests in
    # the shard's record; verify_shards checked only the three token files before.
    from ptm_core.data.prepared import shard_file, verify_shards
    from ptm_core.data.sources import file_sha256

    out = tmp_path / "out"
    store = prepare(TXT, out)
    shards = [dict(shard, sha256=dict(shard["sha256"])) for shard in store.manifest["shards"]]
    extra = shard_file(out, shards[0]["name"], "entity_units")
    extra.write_bytes(b"\x01\x02\x03\x04")
    shards[0]["sha256"]["entity_units"] = file_sha256(extra)
    assert verify_shards(out, shards) == []
    extra.write_bytes(b"\x01\x02\x03\x05")
    errors = verify_shards(out, shards, rebuild="run the family's own command again")
    assert len(errors) == 1
    assert str(extra) in str(errors[0]) and "checksum" in str(errors[0])
    assert "run the family's own command again" in str(errors[0])
    extra.unlink()
    assert "missing" in str(verify_shards(out, shards)[0])


def test_truncated_or_missing_shard_names_the_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = prepare(TXT, out)
    tokens = out / "shards" / f"{store.manifest['shards'][0]['name']}.tokens"
    tokens.write_bytes(tokens.read_bytes()[:-2])
    with pytest.raises(PreparedDataError, match="cut short"):
        PreparedCorpus.open(out, verify=False)
    tokens.unlink()
    with pytest.raises(PreparedDataError, match=f"{tokens}: shard file is missing"):
        PreparedCorpus.open(out)
    with pytest.raises(PreparedDataError, match=r"manifest\.json is missing"):
        PreparedCorpus.open(tmp_path)


def _numbered_jsonl(path: Path, count: int, bad: int | None = None) -> None:
    lines = [
        json.dumps({"id": i, "text": f"Document {i} is here. It ends now."}) for i in range(count)
    ]
    if bad is not None:
        lines[bad - 1] = '{"id": "broken", "text": '
    path.write_text("\n".join(lines) + "\n")


def test_bad_line_deep_in_the_input_names_its_line_and_keeps_finished_shards(
    tmp_path: Path,
) -> None:
    corpus, out = tmp_path / "big.jsonl", tmp_path / "out"
    _numbered_jsonl(corpus, 400)
    clean = prepare(corpus, tmp_path / "clean", shard_bytes=2000)
    third = clean.manifest["shards"][2]["source"]
    bad = third["line_base"] + 5  # a line of the third shard
    _numbered_jsonl(corpus, 400, bad=bad)
    with pytest.raises(CorpusError) as caught:
        prepare(corpus, out, shard_bytes=2000)
    assert str(caught.value).startswith(f"{corpus.resolve()}:{bad}: invalid JSON")
    with pytest.raises(CorpusError) as in_worker:  # the same error, raised in a worker process
        prepare(corpus, tmp_path / "pooled", shard_bytes=2000, workers=2)
    assert str(in_worker.value) == str(caught.value) and in_worker.value.line == bad
    records = sorted((out / "shards").glob("*.json"))
    assert len(records) == 2 and not (out / "manifest.json").exists()
    written = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
    _numbered_jsonl(corpus, 400)  # the line is fixed
    store = prepare(corpus, out, shard_bytes=2000)
    assert {n: t for n, t in file_times(out / "shards").items() if n in written} == written
    assert store.manifest["shards"] == clean.manifest["shards"]


_KILL_SCRIPT = """
import sys
from ptm_core.data.prepare import prepare_corpus
prepare_corpus([sys.argv[1]], sys.argv[2], tokenizer=sys.argv[3], workers=0,
               shard_bytes=50_000, progress=False)
"""


@pytest.mark.integration
def test_kill_9_mid_way_then_rerun_equals_a_clean_run(tmp_path: Path) -> None:
    corpus, out = tmp_path / "corpus.txt", tmp_path / "killed"
    corpus.write_bytes(b"\n".join([TXT.read_bytes().strip()] * 60) + b"\n")  # ~2.4 MB
    process = subprocess.Popen(
        [sys.executable, "-c", _KILL_SCRIPT, str(corpus), str(out), str(VOCAB)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + 120
        while not list((out / "shards").glob("*.json")) and time.monotonic() < deadline:
            assert process.poll() is None, "prepare ended before a shard was written"
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert not (out / "manifest.json").exists(), "killed too late to test a resume"
    finished = {p.name: p.stat().st_mtime_ns for p in (out / "shards").glob("*.json")}
    resumed = prepare(corpus, out, shard_bytes=50_000)
    clean = prepare(corpus, tmp_path / "clean", shard_bytes=50_000)
    assert {n: (out / "shards" / n).stat().st_mtime_ns for n in finished} == finished
    drop = ("created",)
    assert {k: v for k, v in resumed.manifest.items() if k not in drop} == {
        k: v for k, v in clean.manifest.items() if k not in drop
    }
    for shard in clean.manifest["shards"]:
        for kind in ("tokens", "sentences.npy", "documents.npy"):
            name = f"{shard['name']}.{kind}"
            assert (out / "shards" / name).read_bytes() == (
                tmp_path / "clean" / "shards" / name
            ).read_bytes()
    # ptm's output marker (#31) in tokenizer/ is part of the folder, not a leftover.
    leftovers = [p for p in out.rglob(".*") if p.name not in (".lock", OUTPUT_MARKER)]
    assert leftovers == []


# ---------------------------------------------------------------------- dtype


def test_ids_are_uint16_when_the_vocabulary_fits_else_uint32(tmp_path: Path) -> None:
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32
    small = prepare(JSONL, tmp_path / "small")
    assert small.dtype == np.uint16
    assert small.tokens(0, 3).dtype == np.uint16
    big_vocab = tmp_path / "vocab.txt"
    words = [line for line in VOCAB.read_text().splitlines() if line not in SPECIAL_TOKENS]
    filler = [f"zzfill{i}" for i in range(70_000 - len(words) - len(SPECIAL_TOKENS))]
    # Every real piece gets an id past 65535.
    big_vocab.write_text("\n".join([*SPECIAL_TOKENS, *filler, *words]) + "\n")
    big = prepare(JSONL, tmp_path / "big", tokenizer=big_vocab)
    assert big.dtype == np.uint32
    assert int(np.max(big.tokens(0, big.num_tokens))) > 65535
    big_tokenizer = WordPieceTokenizer.from_vocab(big_vocab)
    assert_same_store(big, reference(read_text_corpus(JSONL), big_tokenizer))
