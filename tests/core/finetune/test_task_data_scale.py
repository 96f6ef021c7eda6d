"""The task-data scaling benchmark's generated files are valid task files of the asked size.

``python -m benchmarks.task_data_scale`` measures ptm's lazy task readers on GLUE and CoNLL
files it writes itself; a generator that wrote something the readers reject (or far off
the size) would make that table meaningless. Timings are not checked here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from benchmarks.task_data_scale import write_task_file
from ptm_core.finetune.data import read_conll, read_glue


def test_generated_glue_file_reads_as_a_balanced_pair_task(tmp_path: Path) -> None:
    path = tmp_path / "glue.tsv"
    stats = write_task_file(path, 300_000, "glue", seed=3)
    assert 300_000 <= path.stat().st_size < 300_000 * 1.5
    assert stats["bytes"] == path.stat().st_size
    examples = read_glue(path)
    assert len(examples) == stats["examples"]
    assert examples.label_names == ["entailment", "not_entailment"]
    first = examples[0]
    assert first.text and first.pair and first.text != first.pair
    labels = [examples[i].label for i in range(len(examples))]
    assert abs(sum(labels) / len(labels) - 0.5) < 0.05  # 50% +- ~4.5 sd at ~1,200 rows
    # Reused, not rewritten, once its marker exists.
    mtime = path.stat().st_mtime_ns
    assert write_task_file(path, 300_000, "glue", seed=3) == stats
    assert path.stat().st_mtime_ns == mtime


def test_generated_conll_file_has_valid_bio_tags(tmp_path: Path) -> None:
    path = tmp_path / "conll.txt"
    stats = write_task_file(path, 200_000, "conll", seed=1)
    records = read_conll(path)
    assert len(records) == stats["examples"]
    assert set(records.label_names) == {"O", "B-ENT", "I-ENT"}
    inside, begin, outside = (records.label_names.index(t) for t in ("I-ENT", "B-ENT", "O"))
    seen_inside = 0
    for i in range(len(records)):
        tags = records[i].tags
        assert len(tags) == len(records[i].words) > 0
        assert tags[0] != inside  # I- never starts a sentence
        for previous, tag in itertools.pairwise(tags):
            if tag == inside:
                seen_inside += 1
                assert previous in (begin, inside)  # never O followed by I-
            assert tag in (begin, inside, outside)
    assert seen_inside > 0
