"""What every data-pipeline benchmark shares: the generated corpora, one tokenizer, readers.

Everything generated lives under ``/tmp/ptm-bench/`` (``PTM_BENCH_DIR`` overrides it),
never in the repository, and is reused across runs: a corpus or tokenizer is written once
and marked done.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from benchmarks.make_corpus import ensure_corpus, parse_size

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(os.environ.get("PTM_BENCH_DIR", "/tmp/ptm-bench"))


def load_script(path: Path, name: str) -> ModuleType:
    """A script that is not in a package (a ``data_specs/*/make_*.py`` generator) as the
    module ``name``, registered in ``sys.modules`` (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bench_env(**extra: str) -> dict[str, str]:
    """The environment of a benchmark subprocess: offline, and no thread pools in tokenizers.

    ``TOKENIZERS_PARALLELISM=false`` on every side, so the process count is the only
    parallelism (``tokenizers`` would otherwise use every core inside each process).
    """
    env = dict(os.environ)
    # Start-up figures are a user's: sources compiled once, not again in every process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="90",
        HF_HOME=str(BENCH_DIR / "hf-home"),
        HF_DATASETS_CACHE=str(BENCH_DIR / "hf-home" / "datasets"),
        PREFECT_HOME=str(BENCH_DIR / "prefect"),
        PREFECT_LOCAL_STORAGE_PATH=str(BENCH_DIR / "prefect" / "storage"),
    )
    (BENCH_DIR / "prefect" / "storage").mkdir(parents=True, exist_ok=True)
    env.update(extra)
    return env


def corpus_path(size: str, fmt: str = "txt", seed: int = 0) -> Path:
    """The generated corpus of ``size`` (``"100MB"``), written on first use."""
    out = BENCH_DIR / f"corpus-{size}-s{seed}.{fmt}"
    return ensure_corpus(out, parse_size(size), fmt=fmt, seed=seed)


def iter_documents(path: Path) -> Iterator[list[str]]:
    """Documents of sentences of a ``.txt`` or ``.jsonl`` corpus, streamed.

    ``.txt``: a sentence per line, blank lines between documents. ``.jsonl``: the ``text``
    field split by :func:`ptm_core.data.split_sentences`, as ``ptm prepare`` splits it.
    """
    if path.suffix == ".jsonl":
        from ptm_core.data.corpus import split_sentences

        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    sentences = split_sentences(json.loads(line)["text"])
                    if sentences:
                        yield sentences
        return
    document: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            text = line.strip()
            if text:
                document.append(text)
            elif document:
                yield document
                document = []
    if document:
        yield document


def ensure_tokenizer(corpus: Path, vocab_size: int = 8000) -> Path:
    """A WordPiece vocabulary trained once on ``corpus`` with ptm's trainer (streamed).

    Returns:
        The directory written by :meth:`ptm_core.tokenization.WordPieceTokenizer.save`
        (``tokenizer.json``, ``vocab.txt``), which ``tokenizers.Tokenizer.from_file``,
        ``transformers.PreTrainedTokenizerFast`` and ptm all load.
    """
    out = BENCH_DIR / f"tokenizer-{corpus.stem}-{vocab_size}"
    if (out / "tokenizer.json").exists():
        return out
    from ptm_core.tokenization import WordPieceTokenizer

    texts = (" ".join(document) for document in iter_documents(corpus))
    tokenizer = WordPieceTokenizer.train(texts, vocab_size=vocab_size, lowercase=True)
    tmp = out.with_name(out.name + ".tmp")
    tokenizer.save(tmp)
    tmp.replace(out)
    return out


def disk_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (or of ``path`` itself)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def python() -> str:
    """The interpreter of this benchmark (the project's virtual environment)."""
    return sys.executable
