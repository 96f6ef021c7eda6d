"""No import cycles among ptm's modules (``uv run python -m tools.import_cycles``).

A new cycle anywhere fails this test, with the edges of the loop in the message so the
import to cut is visible.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Cycles tolerated: none (the last ones were cut in #17). Do not add to this set.
ALLOWED: frozenset[str] = frozenset()


def _checker() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_ptm_import_cycles", ROOT / "tools" / "import_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles() -> None:
    checker = _checker()
    found = checker.cycles(ROOT)
    new = [(group, edges) for group, edges in found if not set(group) <= ALLOWED]
    assert not new, "import cycles:\n" + checker.render(new)


def test_checkpoint_io_imports_no_model() -> None:
    checker = _checker()
    modules = checker.discover(ROOT)
    imported = checker.imports_of(
        "ptm_core.checkpoints.io", modules["ptm_core.checkpoints.io"], modules
    )
    assert imported <= {"ptm_core.atomic", "ptm_core.finite_values"}, imported


def test_models_do_not_import_checkpoint_code() -> None:
    """The model classes reach checkpoint code only through the registry."""
    checker = _checker()
    modules = checker.discover(ROOT)
    for name in (
        "ptm_core.encoders.transformer",
        "ptm_multilingual.model",
        "ptm_knowledge.ernie.thu_encoder",
    ):
        imported = checker.imports_of(name, modules[name], modules)
        checkpoint = {
            m for m in imported if m.startswith(("ptm_core.checkpoints", "ptm_multilingual.hf"))
        }
        assert checkpoint <= {"ptm_core.checkpoints.registry"}, (name, checkpoint)


def test_multimodal_models_do_not_import_their_converters() -> None:
    checker = _checker()
    modules = checker.discover(ROOT)
    converters = {
        "ptm_multimodal.visualbert_hf",
        "ptm_multimodal.visualbert_hf_export",
        "ptm_multimodal.lxmert_hf",
        "ptm_multimodal.loading",
        "ptm_multimodal.lxmert_loading",
    }
    for name in ("ptm_multimodal.visualbert", "ptm_multimodal.vilbert", "ptm_multimodal.lxmert"):
        assert not checker.imports_of(name, modules[name], modules) & converters, name


def test_imports_point_down_to_core() -> None:
    """ptm-core imports no extension, and an extension imports only itself and ptm-core
    (also through imports inside functions): each package installs without the others."""
    checker = _checker()
    modules = checker.discover(ROOT)
    packages = {name.partition(".")[0] for name in modules} - {"flows"}
    assert {"ptm_core", "ptm_classic"} <= packages, packages
    wrong = []
    for name, path in modules.items():
        top = name.partition(".")[0]
        if top == "flows":
            continue
        allowed = {"ptm_core"} if top == "ptm_core" else {"ptm_core", top}
        wrong += [
            f"{name} -> {imported}"
            for imported in sorted(checker.imports_of(name, path, modules))
            if imported.partition(".")[0] not in allowed
        ]
    assert not wrong, "imports that point up or across:\n" + "\n".join(wrong)
