"""Paths of the sample data used by the ptm-knowledge tests (a helper module, not tests)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KG_DIR = ROOT / "data_specs" / "knowledge_graph" / "sample"
CORPUS = ROOT / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"
