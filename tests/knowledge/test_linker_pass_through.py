"""Every knowledge family that links text links with the settings it is given.

ERNIE-THU and ERNIE-Baidu pre-training and WKLM link their corpus through
:func:`linked_corpus_for` with ``data.linker``; ERNIE-THU fine-tuning links task files through
:func:`task_links` with the fine-tuning's settings, else the pre-training's recorded ones.
A threshold above any score (5.0) is the non-default setting: nothing may link with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from knowledge_sample_paths import KG_DIR

from ptm_core.encoders import bert_encoder
from ptm_core.finetune.data.examples import SentenceExample
from ptm_knowledge.ernie import pretraining as ernie_pretraining
from ptm_knowledge.ernie.finetune import task_linker_options
from ptm_knowledge.ernie.task_links import task_links
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder
from ptm_knowledge.kg_corpus_settings import KGCorpusData, LinkerSettings
from ptm_knowledge.linking.corpus import linked_corpus_for
from ptm_knowledge.wklm import pretraining as wklm_pretraining

SENTENCE = "Marie Curie was born in Warsaw."


def _mentions(path: Path) -> int:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return sum(len(r["mentions"]) for r in records)


def test_corpus_linking_uses_data_linker(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(SENTENCE + "\n")
    default = KGCorpusData(corpus=str(corpus), kg=str(KG_DIR))
    assert _mentions(linked_corpus_for(default, tmp_path / "default")) == 2
    strict = KGCorpusData(corpus=str(corpus), kg=str(KG_DIR), linker=LinkerSettings(threshold=5.0))
    assert _mentions(linked_corpus_for(strict, tmp_path / "strict")) == 0
    # the families that link a corpus all go through this one function
    # ERNIE and KnowBERT plans open their corpus through ernie.pretraining.open_run_corpus.
    assert ernie_pretraining.linked_corpus_for is linked_corpus_for
    assert wklm_pretraining.linked_corpus_for is linked_corpus_for


def test_task_links_use_the_given_settings(tmp_path: Path) -> None:
    task = tmp_path / "train.tsv"
    task.write_text("sentence\tlabel\n" + SENTENCE + "\tx\n")
    examples = [SentenceExample(text=SENTENCE, pair=None, label=0, id=0, line=2)]
    default = task_links(task, examples, KG_DIR, cache_dir=tmp_path / "cache")
    assert [e for _, _, e in default[0][0]] == ["marie_curie", "warsaw"]
    strict = task_links(
        task, examples, KG_DIR, linker_options={"threshold": 5.0}, cache_dir=tmp_path / "cache"
    )
    assert strict == [([], [])]


def test_fine_tuning_links_as_the_pre_training_did(tmp_path: Path) -> None:
    text = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2)
    model = KnowledgeableEncoder.from_text_encoder(text, torch.randn(4, 8), 1)
    legacy = {"guard": "none", "disambiguation": "overlap", "threshold": 0.3}
    settings = {**vars(LinkerSettings()), **legacy}
    model.save_pretrained(tmp_path / "final", entity_ids=list("abcd"), kg=KG_DIR, linker=settings)
    knowledge = json.loads((tmp_path / "final" / KNOWLEDGE_CONFIG).read_text())
    assert knowledge["linker"] == settings
    KnowledgeableEncoder.from_pretrained(tmp_path / "final")  # the record does not break loading
    assert task_linker_options(knowledge, None) == settings
    assert task_linker_options(knowledge, {"threshold": 0.5})["threshold"] == 0.5
    # a model saved before the record: the defaults
    assert task_linker_options({"kg": None}, None) == vars(LinkerSettings())
