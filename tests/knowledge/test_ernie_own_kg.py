"""ERNIE-THU fine-tuning links task text against the model's own KG (#31 item 16)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
import torch
from knowledge_sample_paths import KG_DIR

from ptm_core.encoders import bert_encoder
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie.finetune import finetune_ernie_thu
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder

KINDS = {"planet": "Orbiting world", "river": "Flowing water", "guild": "Crafts order"}


def _names(seed: int) -> dict[str, list[str]]:
    """Made-up entity names by kind: none of them is in the sample KG."""
    rng = random.Random(seed)
    parts = ["zor", "quex", "blam", "vint", "ordu", "sk", "mell", "trav", "ghi", "pold"]
    return {
        kind: sorted({"".join(rng.sample(parts, 3)).capitalize() for _ in range(6)})
        for kind in KINDS
    }


def _write_kg(folder: Path, names: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True)
    rows = ["id\tname\ttype\taliases\tdescription"]
    for kind, entities in names.items():
        rows += [f"{n.lower()}\t{n}\t{kind}\t\t{KINDS[kind]} called {n}." for n in entities]
    (folder / "entities.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    firsts = [entities[0].lower() for entities in names.values()]
    triples = [f"{a}\trelated_to\t{b}" for a, b in itertools.pairwise(firsts)]
    (folder / "triples.tsv").write_text("\n".join(triples) + "\n", encoding="utf-8")
    return folder


def _task(folder: Path, names: dict[str, list[str]]) -> TaskSpec:
    templates = ["Everyone talked about {} that night.", "The report on {} was short."]
    rows = ["label\tsentence"]
    for kind, entities in names.items():
        rows += [f"{kind}\t{t.format(n)}" for n in entities for t in templates]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (folder / "dev.tsv").write_text("\n".join(rows[:1] + rows[1::3]) + "\n", encoding="utf-8")
    return TaskSpec(
        name="own_typing",
        kind="classification",
        train=str(folder / "train.tsv"),
        dev=str(folder / "dev.tsv"),
        max_length=24,
        batch_size=4,
    )


def _final(folder: Path, entity_ids: list[str], corpus: str, kg: Path | None) -> Path:
    """An ERNIE-THU final/ as pre-training writes it, with a vocabulary of the task's words."""
    tokenizer = WordPieceTokenizer.train(corpus.splitlines(), vocab_size=200, min_frequency=1)
    torch.manual_seed(0)
    text = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
        intermediate_size=64, max_positions=32,
    )  # fmt: skip
    encoder = KnowledgeableEncoder.from_text_encoder(
        text, torch.randn(len(entity_ids), 8), 1, entity_heads=2
    )
    final = folder / "final"
    encoder.save_pretrained(final, entity_ids=entity_ids, kg=kg, extra_writers=[tokenizer.save])
    return final


@pytest.fixture()
def own(tmp_path: Path) -> tuple[Path, Path, TaskSpec]:
    names = _names(seed=11)
    kg = _write_kg(tmp_path / "my_kg", names)
    task = _task(tmp_path / "task", names)
    ids = [n.lower() for entities in names.values() for n in entities]
    final = _final(tmp_path / "pre", ids, Path(task.train).read_text(encoding="utf-8"), kg)
    return kg, final, task


def _trainer(tmp_path: Path) -> TrainerConfig:
    return TrainerConfig(output_dir=str(tmp_path / "run"), max_steps=2, progress=False)


def test_pretraining_records_its_kg(own) -> None:
    kg, final, _ = own
    assert json.loads((final / KNOWLEDGE_CONFIG).read_text())["kg"] == str(kg.resolve())
    KnowledgeableEncoder.from_pretrained(final)  # the new key does not reach the builder


def test_no_kg_given_links_against_the_models_own(tmp_path, own) -> None:
    kg, final, task = own
    result = finetune_ernie_thu(
        task, model_dir=final, trainer=_trainer(tmp_path), cache_dir=tmp_path / "links"
    )
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["kg"] == str(kg.resolve())
    coverage = record["link_coverage"]
    assert coverage["train"]["rows_with_entity"] == coverage["train"]["rows"] == 36


def test_a_kg_that_links_no_row_is_refused(tmp_path, own) -> None:
    _, final, task = own
    with pytest.raises(ValueError, match=r"train\.tsv: 0 of 36 train rows link") as info:
        finetune_ernie_thu(
            task, model_dir=final, kg=KG_DIR, trainer=_trainer(tmp_path), cache_dir=tmp_path / "l"
        )
    assert "use_entities=false" in str(info.value)
    assert not (tmp_path / "run" / "final").exists()


def test_kg_free_ablation_is_not_refused(tmp_path, own) -> None:
    _, final, task = own
    result = finetune_ernie_thu(
        task,
        model_dir=final,
        kg=KG_DIR,
        use_entities=False,
        trainer=_trainer(tmp_path),
        cache_dir=tmp_path / "l",
    )
    assert (result.encoder_dir / "task.json").is_file()


def test_a_model_without_a_recorded_kg_asks_for_one(tmp_path) -> None:
    names = _names(seed=12)
    task = _task(tmp_path / "task", names)
    ids = [n.lower() for entities in names.values() for n in entities]
    final = _final(tmp_path / "pre", ids, Path(task.train).read_text(encoding="utf-8"), None)
    with pytest.raises(ValueError, match=r"records no KG.*finetune\.kg="):
        finetune_ernie_thu(task, model_dir=final, trainer=_trainer(tmp_path))
