"""What every text pre-training shares: the corpus and its tokenizer, examples, heads, result.

The families' plans (:mod:`ptm_core.text_pretraining`, :mod:`ptm_core.seq2seq_pretraining`,
the extension packages') open the corpus with :func:`open_training_corpus`, keep the run's
tokenizer with :func:`keep_run_tokenizer`, build examples with :func:`build_examples` and
save their objectives' heads with :func:`save_heads`; the runner
(:func:`ptm_core.families.runner.run_pretraining`) trains.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from safetensors.torch import load_file, save_file

from ptm_core.atomic import atomic_directory
from ptm_core.data.corpus import Document
from ptm_core.data.document_shape import warn_one_sentence_documents
from ptm_core.data.layouts import (
    SENTENCE_STARTS,
    SegmentRows,
    cached_plan,
    iter_single_segments,
)
from ptm_core.data.row_views import StaticDataSide
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.data.vocabulary_fit import report_tokenizer, tokenizer_source
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives.base import BuildsExamples, Objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_core.training.checkpointing import find_latest_checkpoint

if TYPE_CHECKING:
    from typing import Self

    from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
    from ptm_core.training.run import TrainingRun

logger = logging.getLogger(__name__)

EncoderFactory = Callable[..., TransformerEncoder]
ObjectiveFactory = Callable[..., Objective]


@dataclass
class PretrainResult:
    """Where a pre-training run put its outputs.

    Attributes:
        output_dir: the run directory.
        encoder_dir: final encoder (``config.json`` + ``model.safetensors`` + tokenizer),
            loadable with ``TransformerEncoder.from_pretrained``.
        tokenizer_dir: the tokenizer used (trained or copied).
        metrics_path: JSON lines of training metrics.
        last_checkpoint: newest full training checkpoint (for resume).
        final_metrics: the last logged metrics record.
        num_examples: training rows built from the corpus.
    """

    output_dir: Path
    encoder_dir: Path
    tokenizer_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)
    num_examples: int = 0

    @classmethod
    def of_run(
        cls,
        run: TrainingRun,
        output_dir: Path,
        num_examples: int,
        *,
        final_metrics: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Self:
        """The result of a finished ``run`` whose folder is ``output_dir`` (its tokenizer
        in ``RUN_TOKENIZER``); ``final_metrics`` replaces the run's last record, ``extra``
        fills a subclass's own fields."""
        return cls(
            output_dir=output_dir,
            encoder_dir=run.final_dir,
            tokenizer_dir=output_dir / RUN_TOKENIZER,
            metrics_path=run.result.metrics_path,
            last_checkpoint=run.result.last_checkpoint,
            final_metrics=run.final_metrics if final_metrics is None else final_metrics,
            num_examples=num_examples,
            **extra,
        )


class HasSentences(Protocol):
    """A document as the tokenizer trainer needs it (text or linked corpus documents)."""

    @property
    def sentences(self) -> Sequence[str]: ...


class SavesItself(Protocol):
    """A tokenizer that writes itself into a directory (WordPiece, XLM's shared BPE)."""

    def save(self, directory: Path) -> object: ...


RUN_TOKENIZER = "tokenizer"


def keep_run_tokenizer(tokenizer: SavesItself, output_dir: Path) -> Path:
    """Save ``tokenizer`` as the run's ``output_dir/tokenizer``, checking first.

    The run's checkpoints hold embeddings indexed by that tokenizer's ids, so a different
    tokenizer must never replace it while they exist: that would break the run that made
    them, and every later resume of it. An identical tokenizer is not written again.

    Args:
        tokenizer: the tokenizer this run will use.
        output_dir: the run directory.

    Returns:
        The run's tokenizer directory.

    Raises:
        ValueError: ``output_dir`` has checkpoints trained with another tokenizer.
    """
    saved = output_dir / RUN_TOKENIZER
    with tempfile.TemporaryDirectory(prefix="ptm-tokenizer-") as scratch:
        tokenizer.save(Path(scratch))
        new = _tokenizer_files(Path(scratch))
    if saved.is_dir():
        old = _tokenizer_files(saved)
        if old == new:
            return saved
        checkpoint = find_latest_checkpoint(output_dir / "checkpoints")
        if checkpoint is not None:
            differ = sorted(n for n in old.keys() | new.keys() if old.get(n) != new.get(n))
            raise ValueError(
                f"{saved}: the checkpoints of this run ({checkpoint}) were trained with the "
                f"tokenizer saved there, and the tokenizer given now differs ({', '.join(differ)}"
                "); nothing was changed. Train with the new tokenizer in a new "
                f"trainer.output_dir, or delete {output_dir / 'checkpoints'} to start this run "
                "over with it"
            )
    if int(os.environ.get("RANK", "0")) != 0:
        return saved  # under torchrun (before the process group exists) rank 0 writes
    with atomic_directory(saved) as tmp:
        for name, data in new.items():
            (tmp / name).write_bytes(data)
    return saved


def _tokenizer_files(directory: Path) -> dict[str, bytes]:
    # Hidden names (ptm's output marker) are bookkeeping, not the tokenizer.
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def prepare_tokenizer(
    documents: Sequence[HasSentences],
    output_dir: Path,
    *,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
) -> WordPieceTokenizer:
    """Load the given tokenizer, reuse the run's saved one, or train one on the corpus.

    A run that resumes must see the same ids, so a tokenizer trained by an earlier
    attempt of the same run (``output_dir/tokenizer``) is always reused, and a given
    tokenizer that differs from it is refused while the run has checkpoints
    (:func:`keep_run_tokenizer`), before anything is written.
    """
    saved = output_dir / RUN_TOKENIZER
    if tokenizer is not None:
        path = Path(tokenizer)
        loaded = (
            WordPieceTokenizer.from_vocab(path, lowercase=lowercase)
            if path.is_file()
            else WordPieceTokenizer.from_directory(path)
        )
    elif (saved / "vocab.txt").exists():
        return WordPieceTokenizer.from_directory(saved)
    else:
        logger.info("training a WordPiece vocabulary of %d on the corpus", vocab_size)
        texts = (sentence for doc in documents for sentence in doc.sentences)
        loaded = WordPieceTokenizer.train(texts, vocab_size=vocab_size, lowercase=lowercase)
    keep_run_tokenizer(loaded, output_dir)
    return loaded


def tokenize_documents(
    documents: Sequence[Document], tokenizer: WordPieceTokenizer
) -> list[list[list[int]]]:
    """Word-piece ids of every sentence, grouped by document."""
    flat = [sentence for doc in documents for sentence in doc.sentences]
    ids = tokenizer.tokenize_ids_batch(flat)
    out: list[list[list[int]]] = []
    start = 0
    for doc in documents:
        out.append(ids[start : start + len(doc.sentences)])
        start += len(doc.sentences)
    return out


def build_examples(
    mix: ObjectiveMix,
    documents: TokenStore | Sequence[Sequence[Sequence[int]]],
    vocab: VocabInfo,
    max_length: int,
    seed: int,
) -> Sequence[dict[str, Any]]:
    """Examples for a mix, built lazily: the pairing objective's layout (NSP, SOP, UniLM)
    or single segments, then every objective's static data side per example.

    Args:
        mix: the objectives.
        documents: a token store (a prepared corpus), or tokenised documents in memory.
        vocab: special ids.
        max_length: row length with special tokens.
        seed: seed of the layout and of the static data side.

    Returns:
        A sequence that builds example ``i`` when indexed (nothing is held per example).
    """
    store = documents if isinstance(documents, TokenStore) else InMemoryTokenStore(documents)
    builders = [(n, o) for n, o in mix if isinstance(o, BuildsExamples)]
    if len(builders) > 1:
        raise ValueError(
            f"objectives {[n for n, _ in builders]} each decide how segments are paired; "
            "use only one of them"
        )
    rows: Sequence[dict[str, Any]]
    wants_starts = [n for n, o in mix if SENTENCE_STARTS in getattr(o, "row_keys", ())]
    if builders:
        name, objective = builders[0]
        if wants_starts:
            raise ValueError(
                f"objectives {wants_starts} need single-segment rows with sentence "
                f"boundaries and {name} builds sentence pairs; train them in separate runs"
            )
        warn_one_sentence_documents(store, [name])
        rows = objective.rows(store, max_length, derive_seed(seed, "examples", name))
    else:
        plan = cached_plan(
            store,
            "single",
            {"max_length": max_length},
            lambda: iter_single_segments(store, max_length),
        )
        rows = SegmentRows(store, plan, vocab, sentence_starts=bool(wants_starts))
    if all(type(o).prepare_example is Objective.prepare_example for _, o in mix):
        return rows  # no static data side
    return StaticDataSide(rows, mix.prepare_example, seed)


def open_training_corpus(
    corpus: str | Path | Sequence[str | Path] | None,
    prepared: str | Path | None,
    *,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    cache_dir: str | Path | None = None,
    workers: int | None = None,
    run_dir: Path | None = None,
) -> tuple[TokenStore, TaskTokenizer]:
    """The memory-mapped corpus to train on, and the tokenizer its ids come from.

    With ``run_dir``, the tokenizer is also kept as that run's (:func:`keep_run_tokenizer`).

    ``prepared`` is a directory written by ``ptm prepare``. Raw ``corpus`` files are
    prepared first into ``cache_dir`` (default ``$PTM_CACHE_DIR/prepared``, else
    ``~/.cache/ptm/prepared``), in a folder keyed by the inputs as given and the tokenizer
    settings (:func:`~ptm_core.data.prepare.prepared_cache_dir`): a second run, a resume or a
    retrain on the same files opens it at once, and a file added to a corpus folder is
    prepared alone, in place.

    Raises:
        ValueError: neither or both of ``corpus`` and ``prepared``; a ``tokenizer`` that
            is not the one ``prepared`` was tokenised with.
    """
    from ptm_core.data.prepare import prepare_corpus, prepared_cache_dir
    from ptm_core.data.prepared import PreparedCorpus

    if (corpus is None) == (prepared is None):
        raise ValueError(
            "give the training data once: data.corpus=<text files> (prepared into a cache "
            "first) or data.prepared=<a directory written by `ptm prepare`>"
        )
    if prepared is not None:
        store = PreparedCorpus.open(prepared)
        if tokenizer is not None:
            _check_same_tokenizer(Path(tokenizer), store.tokenizer_dir, lowercase)
    else:
        assert corpus is not None
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        target = prepared_cache_dir(
            corpus, root, tokenizer=tokenizer, vocab_size=vocab_size, lowercase=lowercase
        )
        store = prepare_corpus(
            corpus,
            target,
            tokenizer=tokenizer,
            vocab_size=vocab_size,
            lowercase=lowercase,
            workers=workers,
        )
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    tok = load_task_tokenizer(store.tokenizer_dir)
    if run_dir is not None:
        keep_run_tokenizer(tok, run_dir)
    source = tokenizer_source(tokenizer, prepared, corpus, vocab_size)
    report_tokenizer(store, tok.vocab_info.unk_id, tok.vocab_size, source)
    return store, tok


def default_cache_dir() -> Path:
    """Where raw corpora are prepared: ``$PTM_CACHE_DIR/prepared`` or ``~/.cache/ptm/prepared``."""
    root = os.environ.get("PTM_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "ptm") / "prepared"


def _check_same_tokenizer(given: Path, prepared: Path, lowercase: bool) -> None:
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    tokenizer = (
        WordPieceTokenizer.from_vocab(given, lowercase=lowercase)
        if given.is_file()
        else load_task_tokenizer(given)
    )
    with tempfile.TemporaryDirectory(prefix="ptm-tokenizer-") as scratch:
        tokenizer.save(Path(scratch))
        same = all(
            (prepared / p.name).is_file() and (prepared / p.name).read_bytes() == p.read_bytes()
            for p in Path(scratch).iterdir()
            if p.is_file()
        )
    if not same:
        raise ValueError(
            f"data.tokenizer={given} is not the tokenizer data.prepared was tokenised with "
            f"({prepared}); leave data.tokenizer=null to use that one, or prepare the corpus "
            "again with this tokenizer (`ptm prepare ... --tokenizer`)"
        )


def load_init_heads(mix: ObjectiveMix, directory: Path) -> list[str]:
    """Load the objectives' heads of an ``init_from`` folder; returns those left fresh.

    A ptm ``final/`` has them in ``heads.safetensors`` (:func:`load_heads`); a Hugging Face
    ``...ForPreTraining`` folder in its model file, under its own names
    (:func:`~ptm_core.checkpoints.hf.pretraining_heads.load_hf_pretraining_heads`).
    """
    from ptm_core.checkpoints import read_json_object

    config_path = directory / "config.json"
    if (directory / HEADS_FILE).exists() or "ptm_format" in read_json_object(config_path):
        return load_heads(mix, directory)
    from ptm_core.checkpoints.hf.pretraining_heads import load_hf_pretraining_heads

    loaded, fresh = load_hf_pretraining_heads(mix, directory)
    if loaded:
        logger.info("%s: heads of %s loaded from the checkpoint", directory, ", ".join(loaded))
    if fresh:
        logger.warning(
            "%s: no Hugging Face head for %s in the checkpoint: those heads start from random init",
            directory,
            ", ".join(fresh),
        )
    return fresh


HEADS_FILE = "heads.safetensors"


def save_heads(mix: ObjectiveMix, encoder: torch.nn.Module, directory: Path) -> Path:
    """Write the objectives' own parameters (heads) next to an encoder checkpoint.

    Tensors shared with the encoder (a decoder tied to the token table) are left out;
    they are re-tied when the objective is rebuilt.
    """
    shared = {p.data_ptr() for p in encoder.parameters()}
    state = {
        name: tensor.detach().contiguous()
        for name, tensor in mix.state_dict().items()
        if tensor.data_ptr() not in shared
    }
    path = directory / HEADS_FILE
    save_file(state, str(path))
    return path


def load_heads(mix: ObjectiveMix, directory: Path) -> list[str]:
    """Load ``heads.safetensors`` into the objectives that exist in both; returns the names
    of head tensors that were not in the file (new objectives start from scratch)."""
    path = directory / HEADS_FILE
    if not path.exists():
        logger.warning("%s not found: objective heads start from random init", path)
        return sorted(mix.state_dict())
    state = load_file(path)
    own = mix.state_dict()
    mismatched = [
        f"{k}: file {tuple(v.shape)} vs model {tuple(own[k].shape)}"
        for k, v in state.items()
        if k in own and v.shape != own[k].shape
    ]
    if mismatched:
        raise ValueError(f"{path}: head shapes do not fit: " + "; ".join(mismatched))
    result = mix.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False)
    return sorted(result.missing_keys)
