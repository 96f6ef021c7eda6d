"""Shared fixtures of the ptm-knowledge tests: the sample KG and corpus paths."""

from __future__ import annotations

import pytest
from knowledge_sample_paths import KG_DIR


@pytest.fixture(autouse=True)
def _pystow_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    # PyKEEN (through pystow) writes to ~/.data unless told otherwise.
    monkeypatch.setenv("PYSTOW_HOME", str(tmp_path_factory.getbasetemp() / "pystow"))


@pytest.fixture(scope="session")
def sample_kg():
    from ptm_knowledge.kg import load_knowledge_graph

    return load_knowledge_graph(KG_DIR)
