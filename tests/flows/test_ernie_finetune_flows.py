"""ERNIE-THU through the generic commands: `ptm finetune model=<ERNIE final>` keeps the
knowledge layers (entity inputs linked at fine-tuning time), and `ptm evaluate` scores the
fine-tuned final/ with its KG links instead of dropping the K-Encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.evaluate import evaluate
from flows.evaluation import model_family
from flows.finetune import run_one
from ptm_core.encoders import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.kg import load_knowledge_graph

REPO = Path(__file__).resolve().parents[2]
KG_DIR = REPO / "data_specs" / "knowledge_graph" / "sample"
VOCAB = REPO / "data_specs" / "text_corpus" / "sample-vocab.txt"


@pytest.fixture(scope="module")
def ernie_final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ERNIE-THU final/ as pre-training writes it (built directly, no training)."""
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    entity_ids = list(load_knowledge_graph(KG_DIR).entity_ids)
    torch.manual_seed(0)
    text = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )
    encoder = KnowledgeableEncoder.from_text_encoder(
        text, torch.randn(len(entity_ids), 8), 1, entity_heads=2
    )
    final = tmp_path_factory.mktemp("ernie") / "final"
    encoder.save_pretrained(
        final, entity_ids=entity_ids, kg=KG_DIR, extra_writers=[tokenizer.save]
    )  # pre-training records the KG it embedded: fine-tuning links against it by default
    return final


def _finetune(ernie_final: Path, out: Path, *extra: str) -> dict:
    return run_one(
        [
            "task=kg_entity_typing",
            f"model={ernie_final}",
            f"trainer.output_dir={out}",
            "trainer.max_steps=3",
            "trainer.progress=false",
            *extra,
        ]
    )


def test_finetune_keeps_the_knowledge_layers_and_evaluate_scores_them(
    ernie_final: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTM_CACHE_DIR", str(tmp_path / "cache"))
    run = _finetune(ernie_final, tmp_path / "run")
    final = Path(run["final_dir"])
    record = json.loads((final / "task.json").read_text())
    assert record["recipe"] == "ernie_thu_finetune" and record["use_entities"] is True
    assert record["link_coverage"]["dev"]["rows_with_entity"] > 0
    assert model_family(final) == "ernie_finetuned"
    result = evaluate(str(final), report_path=str(tmp_path / "report.md"))
    assert result["family"] == "ernie_finetuned" and result["metric"] == "accuracy"
    assert result["model"]["accuracy"] == pytest.approx(run["final_metrics"]["dev/accuracy"])
    assert 0.0 <= result["baseline"]["accuracy"] <= 1.0


def test_kg_free_switch_and_unsupported_options(
    ernie_final: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTM_CACHE_DIR", str(tmp_path / "cache"))
    run = _finetune(ernie_final, tmp_path / "free", "finetune.use_entities=false")
    record = json.loads((Path(run["final_dir"]) / "task.json").read_text())
    assert record["use_entities"] is False
    with pytest.raises(ValueError, match=r"finetune\.random_init=true is not supported"):
        _finetune(ernie_final, tmp_path / "random", "finetune.random_init=true")


def test_ptm_finetune_with_a_prompt_then_evaluate(
    ernie_final: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's ``ptm finetune task=kg_entity_typing model=<ERNIE-THU final/>`` with
    ``finetune.peft=prompt``: an adapter-only final/ that ``ptm evaluate`` scores as the run did."""
    monkeypatch.setenv("PTM_CACHE_DIR", str(tmp_path / "cache"))
    run = _finetune(ernie_final, tmp_path / "run", "finetune.peft=prompt",
                    "finetune.peft_virtual_tokens=4", "trainer.learning_rate=1e-2")  # fmt: skip
    final = Path(run["final_dir"])
    record = json.loads((final / "task.json").read_text())
    assert record["peft"]["method"] == "prompt" and record["use_entities"] is True
    assert not (final / "model.safetensors").exists()
    assert run["final_metrics"]["parameters/trainable_share"] < 0.1
    result = evaluate(str(final), report_path=str(tmp_path / "report.md"))
    assert result["model"]["accuracy"] == pytest.approx(run["final_metrics"]["dev/accuracy"])
