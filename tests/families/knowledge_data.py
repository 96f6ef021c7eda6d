"""More generated knowledge data for the ERNIE, K-BERT and KG-embedding contract cases.

On top of :mod:`generated_knowledge`'s KG and text corpus (not the samples): a linked
corpus of its entities (as the linker writes it) and labelled TSVs (entity typing: is the
entity a person, a city or a country?) for the fine-tuning families; and
:class:`LinkedKnowledgeContract`, the case of the families that pre-train on that KG and
linked corpus and fine-tune on the typing task (ERNIE-THU, KnowBERT).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from family_contract import FAST, FamilyContract
from generated_knowledge import write_knowledge

from ptm_knowledge.linking.corpus import LinkedDocument, SentenceMention, write_linked_corpus

_FILLER = ["we", "read", "about", "the", "story", "of", "people", "near", "old", "river"]


@dataclass
class GeneratedKnowledge:
    """Paths of the generated data."""

    kg: Path
    linked_corpus: Path
    corpus: Path
    train: Path
    dev: Path
    entity_ids: list[str]


def generate(folder: Path, *, seed: int = 7) -> GeneratedKnowledge:
    """The generated KG and corpus (:func:`generated_knowledge.write_knowledge`) under
    ``folder``, plus a linked corpus of its entities and entity-typing TSVs."""
    rng = random.Random(seed)
    kg, corpus = write_knowledge(folder, seed=seed)
    rows = [line.split("\t") for line in (kg / "entities.tsv").read_text().splitlines()[1:]]
    entities = [(row[0], row[1], row[2]) for row in rows if row and row[0]]
    # More facts per entity, so PyKEEN's 90 % training split still covers every entity.
    people = [e for e, _, t in entities if t == "person"]
    cities = [e for e, _, t in entities if t == "city"]
    extra = [f"{p}\tlives_in\t{rng.choice(cities)}" for p in people]
    extra += [f"{p}\tknows\t{rng.choice(people)}" for p in people for _ in range(2)]
    with (kg / "triples.tsv").open("a", encoding="utf-8") as handle:
        handle.write("\n".join(extra) + "\n")
    documents: list[LinkedDocument] = []
    for d in range(24):
        sentences: list[str] = []
        mentions: list[SentenceMention] = []
        for _ in range(6):
            text = " ".join(rng.sample(_FILLER, 3)) + " "
            entity_id, name, _ = rng.choice(entities)
            mentions.append(
                SentenceMention(len(sentences), len(text), len(text) + len(name), entity_id)
            )
            text += name + " " + " ".join(rng.sample(_FILLER, 2)) + "."
            sentences.append(text[0].upper() + text[1:])
        documents.append(LinkedDocument(f"doc{d}", sentences, mentions))
    linked = write_linked_corpus(documents, folder / "linked.jsonl")

    def typing(path: Path, rows: list[tuple[str, str, str]]) -> Path:
        body = [f"{t}\tWe talked about {n} today." for _, n, t in rows]
        path.write_text("\n".join(["label\tsentence", *body]) + "\n", encoding="utf-8")
        return path

    train_rows: list[tuple[str, str, str]] = []
    dev_rows: list[tuple[str, str, str]] = []
    for kind in sorted({t for _, _, t in entities}):  # every type in both splits
        of_kind = [e for e in entities if e[2] == kind]
        rng.shuffle(of_kind)
        cut = max(1, len(of_kind) * 2 // 3)
        train_rows += of_kind[:cut]
        dev_rows += of_kind[cut:]
    return GeneratedKnowledge(
        kg=kg,
        linked_corpus=linked,
        corpus=corpus,
        train=typing(folder / "train.tsv", train_rows * 2),
        dev=typing(folder / "dev.tsv", dev_rows),
        entity_ids=[e for e, _, _ in entities],
    )


TINY = [
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.intermediate_size=64",
    "data.max_length=32",
    "data.batch_size=8",
    "trainer.max_steps=2",
    "trainer.device=cpu",
]


def task_overrides(data_root: Path, key: str) -> list[str]:
    """The generated entity-typing task (under ``data_root/data``) as the task block ``key``
    (``task`` in configs/finetune.yaml, ``<recipe>.task`` in an experiment)."""
    data = generate(data_root / "data")
    return [
        f"{key}.train={data.train}",
        f"{key}.dev={data.dev}",
        f"{key}.max_length=16",
        f"{key}.batch_size=8",
    ]


class LinkedKnowledgeContract(FamilyContract):
    """A family that pre-trains on the generated KG + linked corpus (KG embeddings
    included) and fine-tunes on the generated entity-typing task by its experiment.

    Subclasses set ``family``, the two experiments, the experiment's task block
    (``finetune_task_key``) and the overrides that size their KG embeddings
    (``kg_overrides``).
    """

    finetune_config = "config"  # the fine-tuning experiment
    pretrain_experiment: ClassVar[str]
    finetune_experiment: ClassVar[str]
    finetune_task_key: ClassVar[str]
    kg_overrides: ClassVar[tuple[str, ...]]

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        data = generate(tmp_path.parent / "data")
        return [
            f"experiment={self.pretrain_experiment}",
            *TINY,
            f"data.kg={data.kg}",
            f"data.linked_corpus={data.linked_corpus}",
            "data.tokenizer=null",
            "data.vocab_size=200",
            *self.kg_overrides,
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(generate(tmp_path / "data").linked_corpus)

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return [
            f"experiment={self.finetune_experiment}",
            f"init_from={final_dir}",
            *task_overrides(tmp_path.parent, self.finetune_task_key),
            "trainer.max_steps=2",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def ptm_finetune(self, final: Path, data_root: Path, output_dir: Path, *extra: str) -> Any:
        """``ptm finetune model=<final>`` (configs/finetune.yaml) on the generated typing task:
        asserts the folder's kind picks this family and returns the run's result."""
        from flows import runner
        from flows.config import compose_config

        cfg = compose_config(
            [
                *FAST,
                "task=kg_entity_typing",
                *task_overrides(data_root, "task"),
                f"init_from={final}",
                *extra,
                "trainer.max_steps=2",
                "trainer.device=cpu",
                f"trainer.output_dir={output_dir}",
            ],
            config_name="finetune",
        )
        spec = runner.family_of_folder(final)
        assert spec is not None and spec.name == self.family
        return runner.finetune(spec, cfg)
