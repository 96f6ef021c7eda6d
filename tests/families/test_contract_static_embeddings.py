"""The static_embeddings family passes the contract: word2vec trains in gensim's own loop
(the spec's ``pretrain`` hook, not a plan for the Trainer) and writes a vector table."""

from __future__ import annotations

from pathlib import Path

from classic_corpora import write_corpus
from family_contract import FamilyContract

from ptm_core.data.vector_table import VectorTable


class TestStaticEmbeddingsContract(FamilyContract):
    family = "static_embeddings"

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        corpus = write_corpus(tmp_path / "corpus")
        return [
            "experiment=word2vec_tiny",
            f"data.corpus={corpus}",
            "model.epochs=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def saved_folder(self, tmp_path: Path) -> Path:
        final = super().saved_folder(tmp_path)
        table = VectorTable.load(final)
        assert table.method.startswith("word2vec") and "bridge" in table and table.dim == 32
        return final
