"""Preparation workers and the CLI import ptm_core without paying for torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ptm_core
import ptm_core.data


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_preparing_does_not_import_torch() -> None:
    # A worker of `ptm prepare` paid ~600 MiB of RSS for torch before the package
    # __init__ files loaded their names lazily.
    loaded = _modules_after(
        "import ptm_core, ptm_core.data\n"
        "from ptm_core.data import prepare_corpus, PreparedCorpus, prepared_cache_dir\n"
        "from ptm_core.data.shard_writer import shard_worker_pool"
    )
    assert "ptm_core.data.prepare" in loaded
    assert "torch" not in loaded


@pytest.mark.parametrize("module", [ptm_core, ptm_core.data])
def test_every_exported_name_resolves(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    for name in names:
        assert getattr(module, name) is not None, name
    assert set(names) <= set(dir(module))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name  # type: ignore[attr-defined]
