"""`ptm link` on bad or awkward input: one clear line, no retries of data errors, no litter.

Defects 9 (bad KG retried then a traceback; KG symlink loop), 11 (temporary files of a
killed run left behind) and the U+2028 line split of the merged output.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from flows.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
KG = ROOT / "data_specs" / "knowledge_graph" / "sample"


def _corpus(tmp_path: Path, documents: int = 8) -> Path:
    corpus = tmp_path / "corpus.txt"
    kept = CORPUS.read_text(encoding="utf-8").strip().split("\n\n")[:documents]
    corpus.write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    return corpus


def _ptm_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("ptm:")]


def test_bad_kg_is_loaded_once_never_retried_and_reported_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ptm_knowledge.kg

    kg = tmp_path / "kg"
    shutil.copytree(KG, kg)
    entities = kg / "entities.tsv"
    lines = entities.read_text(encoding="utf-8").split("\n")
    lines[3] = "pierre_curie\tPierre Curie"  # line 4: two cells instead of five
    entities.write_text("\n".join(lines), encoding="utf-8")

    loads: list[Any] = []
    real_load = ptm_knowledge.kg.load_knowledge_graph

    def counting_load(*args: Any, **kwargs: Any) -> Any:
        loads.append(args)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(ptm_knowledge.kg, "load_knowledge_graph", counting_load)
    output = tmp_path / "linked.jsonl"
    code = main(
        [
            "link",
            "--corpus",
            str(_corpus(tmp_path)),
            "--kg",
            str(kg),
            "--output",
            str(output),
            "--shard-size",
            "2",  # four shards: the old code loaded (and failed) 4 x 3 = 12 times
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert _ptm_lines(captured.err) == [_ptm_lines(captured.err)[0]]
    assert _ptm_lines(captured.err)[0].startswith(f"ptm: {entities}:4: expected 5 ")
    assert len(loads) == 1, f"the KG was loaded {len(loads)} times"
    assert not output.exists()


@pytest.mark.parametrize("where", ["kg folder", "entity table"])
def test_kg_symlink_loop_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    if where == "kg folder":
        kg = loop = tmp_path / "loop"
        loop.symlink_to(loop)  # ln -s loop loop
    else:
        kg = tmp_path / "kg"
        kg.mkdir()
        loop = kg / "entities.tsv"
        loop.symlink_to(loop)
    output = tmp_path / "linked.jsonl"
    args = ["link", "--corpus", str(_corpus(tmp_path)), "--kg", str(kg), "--output", str(output)]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 1
    assert _ptm_lines(captured.err) == [
        f"ptm: {loop}: a symbolic link loop (a link that points back at itself) (field "
        "'path'); point --kg at the real folder (`ls -l` shows each link's target)"
    ]
    assert not output.exists()


def test_temp_files_of_a_killed_run_are_removed_and_output_is_unchanged(tmp_path: Path) -> None:
    from flows.link_entities import link_entities

    corpus = _corpus(tmp_path)
    clean = tmp_path / "clean" / "linked.jsonl"
    clean.parent.mkdir()
    link_entities(str(corpus), str(KG), str(clean), shard_size=4)

    output = tmp_path / "crashed" / "linked.jsonl"
    shard_dir = output.parent / ".linked.jsonl.shards"
    shard_dir.mkdir(parents=True)
    # What ptm_core.atomic leaves when killed mid-write: real mkstemp names, partial data.
    key = "0123456789abcdef0123"  # a shard key: 20 hex digits
    litter = [
        Path(tempfile.mkstemp(prefix=f".{key}.jsonl.", suffix=".tmp", dir=shard_dir)[1]),
        Path(tempfile.mkstemp(prefix=".linked.jsonl.", suffix=".tmp", dir=output.parent)[1]),
    ]
    for path in litter:
        path.write_text('{"doc_id": "half', encoding="utf-8")
    foreign = [  # not names of ours: kept
        shard_dir / "notes.tmp",
        output.parent / ".other.jsonl.abcdefgh.tmp",
        output.parent / "linked.jsonl.abcdefgh.tmp",
    ]
    for path in foreign:
        path.write_text("keep me", encoding="utf-8")

    link_entities(str(corpus), str(KG), str(output), shard_size=4)

    assert [p for p in litter if p.exists()] == []
    assert all(p.read_text(encoding="utf-8") == "keep me" for p in foreign)
    assert output.read_bytes() == clean.read_bytes()
    assert not [p for p in shard_dir.iterdir() if p.name.endswith(".tmp") and p not in foreign]


def test_mentions_are_counted_per_record_when_a_shard_holds_a_raw_u2028(
    tmp_path: Path,
) -> None:
    from flows.link_entities import link_entities

    corpus = tmp_path / "corpus.jsonl"
    records = [  # U+2028/U+2029 survive in document ids (sentences collapse whitespace)
        {"id": "curie\u2028marie", "text": "Marie Curie moved to Paris. She studied radium."},
        {"id": "curie\u2029pierre", "text": "Pierre Curie was born in Paris."},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    output = tmp_path / "linked.jsonl"
    first = link_entities(str(corpus), str(KG), str(output), shard_size=1)
    assert first["mentions"] > 0
    # A shard written by another writer (or an older ptm) may keep U+2028/U+2029 unescaped:
    # still valid JSON Lines, one record per "\n"-terminated line.
    shards = sorted((tmp_path / ".linked.jsonl.shards").glob("*.jsonl"))
    assert len(shards) == 2
    for shard in shards:
        text = shard.read_text(encoding="utf-8")
        assert "\\u2028" in text or "\\u2029" in text
        raw = text.replace("\\u2028", "\u2028").replace("\\u2029", "\u2029")
        assert [json.loads(line) for line in raw.split("\n") if line] == [
            json.loads(line) for line in text.split("\n") if line
        ]
        shard.write_text(raw, encoding="utf-8")

    again = link_entities(str(corpus), str(KG), str(output), shard_size=1)
    assert again["executed"] == 0, "both shards come from the cache"
    assert again["mentions"] == first["mentions"]
    merged = output.read_text(encoding="utf-8")
    assert "\u2028" in merged and "\u2029" in merged
    assert [json.loads(line)["id"] for line in merged.split("\n") if line] == [
        "curie\u2028marie",
        "curie\u2029pierre",
    ]


def _shard_files(tmp_path: Path, count: int) -> list[Path]:
    shards = []
    for i in range(count):
        shard = tmp_path / "shards" / f"{i:02d}.jsonl"
        shard.parent.mkdir(exist_ok=True)
        records = [
            {"id": f"doc{i}-{k}", "sentences": ["a\u2028b"], "mentions": [{"k": k}] * k}
            for k in range(3)
        ]
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        shard.write_text(text if i % 2 else text.rstrip("\n"), encoding="utf-8")  # odd: no \n
        shards.append(shard)
    return shards


def test_streaming_merge_keeps_shard_order_in_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.entity_linking
    import flows.link_entities as link

    monkeypatch.setattr(
        flows.entity_linking, "_COPY_BLOCK", 7
    )  # records cut across many read blocks
    shards = _shard_files(tmp_path, 5)
    order = [shards[i] for i in (3, 0, 4, 1, 2)]
    output = tmp_path / "merged.jsonl"
    assert link.merge_shards.fn([str(p) for p in order], str(output)) == str(output)
    expected = "".join(p.read_text(encoding="utf-8").rstrip("\n") + "\n" for p in order)
    assert output.read_text(encoding="utf-8") == expected
    merger = flows.entity_linking.ShardMerger(tmp_path / "counted.jsonl")
    for shard in order:
        merger.add(shard)
    merger.commit()
    assert (merger.documents, merger.mentions) == (15, 15)


def test_streaming_merge_is_atomic(tmp_path: Path) -> None:
    import flows.link_entities as link

    shards = _shard_files(tmp_path, 3)
    output = tmp_path / "merged.jsonl"
    output.write_text("previous output\n", encoding="utf-8")
    missing = tmp_path / "shards" / "gone.jsonl"
    with pytest.raises(FileNotFoundError):
        link.merge_shards.fn([str(shards[0]), str(shards[1]), str(missing)], str(output))
    assert output.read_text(encoding="utf-8") == "previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged.jsonl", "shards"]


def test_flow_output_equals_link_corpus_with_few_shards_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.entity_linking
    import flows.link_entities as link
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker, link_corpus

    monkeypatch.setattr(
        flows.entity_linking, "IN_FLIGHT", 2
    )  # shards are merged while others still run
    corpus = _corpus(tmp_path, documents=10)
    output = tmp_path / "linked.jsonl"
    result = link.link_entities(str(corpus), str(KG), str(output), shard_size=3)
    assert result["shards"] == 4 and result["executed"] == 4
    expected = link_corpus(
        corpus, EntityLinker(load_knowledge_graph(KG)), tmp_path / "direct.jsonl"
    )
    assert output.read_bytes() == expected.read_bytes()
    lines = output.read_text(encoding="utf-8").split("\n")[:-1]
    assert result["mentions"] == sum(len(json.loads(line)["mentions"]) for line in lines)
    caches = list((Path(os.environ["PTM_CACHE_DIR"]) / "kg").glob("kg-*/manifest.json"))
    assert caches, "the flow stores the loaded KG in $PTM_CACHE_DIR/kg"
