"""Preparation workers and the CLI import ptm_core without paying for torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ptm_core
import ptm_core.data
import ptm_core.finetune.data


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


def test_a_whole_preparation_does_not_import_torch(tmp_path: Path) -> None:
    # Importing was not enough: reading a given tokenizer folder went through
    # ptm_core.finetune.data's __init__, which loaded the featurizers and torch (2-3 s and
    # ~300 MiB in the main process and in every shard worker of `ptm prepare`).
    corpus = tmp_path / "corpus.txt"
    words = [f"w{i}x" for i in range(300)]
    corpus.write_text(
        "\n\n".join(
            "\n".join(
                " ".join(words[(d * 7 + s * 3 + k) % 300] for k in range(9)) for s in range(4)
            )
            for d in range(40)
        )
        + "\n",
        encoding="utf-8",
    )
    code = (
        "from ptm_core.data import prepare_corpus\n"
        f"trained = prepare_corpus([{str(corpus)!r}], {str(tmp_path / 'a')!r}, vocab_size=200,"
        " workers=0, progress=False)\n"
        f"given = prepare_corpus([{str(corpus)!r}], {str(tmp_path / 'b')!r},"
        f" tokenizer={str(tmp_path / 'a' / 'tokenizer')!r}, workers=0, progress=False)\n"
        "assert given.num_tokens == trained.num_tokens > 0, (given.num_tokens, trained.num_tokens)"
    )
    loaded = _modules_after(code)
    assert "ptm_core.data.shard_writer" in loaded
    assert "ptm_core.finetune.data.task_tokenizer" in loaded
    assert "torch" not in loaded


@pytest.mark.parametrize("module", [ptm_core, ptm_core.data, ptm_core.finetune.data])
def test_every_exported_name_resolves(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    for name in names:
        assert getattr(module, name) is not None, name
    assert set(names) <= set(dir(module))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name  # type: ignore[attr-defined]
