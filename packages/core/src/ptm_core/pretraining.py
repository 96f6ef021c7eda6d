"""The pre-training recipe: corpus -> tokenizer -> examples -> model -> trainer -> checkpoint.

Hydra configs and Prefect flows call :func:`pretrain` with built pieces and numbers; no
configuration framework is imported here.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors.torch import load_file, save_file

from ptm_core.atomic import atomic_directory
from ptm_core.data.batches import PretrainingBatches
from ptm_core.data.corpus import Document
from ptm_core.data.document_shape import warn_one_sentence_documents
from ptm_core.data.layouts import SegmentRows, cached_plan, iter_single_segments
from ptm_core.data.row_views import PackedRows, StaticDataSide
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.data.vocabulary_fit import report_tokenizer, tokenizer_source
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives.base import BuildsExamples, Objective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.objectives.unilm import UniLMObjective
from ptm_core.objectives.whole_word import UsesWordBoundaries
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.checkpointing import find_latest_checkpoint
from ptm_core.training.run import train_and_save

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
    if builders:
        name, objective = builders[0]
        warn_one_sentence_documents(store, [name])
        rows = objective.rows(store, max_length, derive_seed(seed, "examples", name))
    else:
        plan = cached_plan(
            store,
            "single",
            {"max_length": max_length},
            lambda: iter_single_segments(store, max_length),
        )
        rows = SegmentRows(store, plan, vocab)
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
) -> tuple[TokenStore, WordPieceTokenizer]:
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
    tok = WordPieceTokenizer.from_directory(store.tokenizer_dir)
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
    tokenizer = (
        WordPieceTokenizer.from_vocab(given, lowercase=lowercase)
        if given.is_file()
        else WordPieceTokenizer.from_directory(given)
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


def pretrain(
    corpus: str | Path | Sequence[str | Path] | None = None,
    *,
    encoder: EncoderFactory | TransformerEncoder,
    objectives: Mapping[str, ObjectiveFactory],
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    weights: Mapping[str, float] | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    callbacks: Sequence[object] = (),
    init_from: str | Path | None = None,
    pack: bool = False,
    num_workers: int = 0,
    cache_dir: str | Path | None = None,
) -> PretrainResult:
    """Pre-train an encoder on a text corpus with a mix of objectives.

    The corpus is read from a prepared, memory-mapped dataset (``ptm prepare``): raw
    ``corpus`` files are prepared into a cache first (once; see
    :func:`open_training_corpus`). Examples are planned once from the sentence and
    document boundaries and built per batch, in ``num_workers`` processes when asked, so
    memory does not grow with the corpus.

    Args:
        corpus: text-corpus file(s) or directory (see ``data_specs/text_corpus``); or
        prepared: a directory written by ``ptm prepare`` (give one of the two).
        encoder: a built encoder, or a factory called with ``vocab_size=`` of the tokenizer.
        objectives: name -> factory, called by
            :func:`~ptm_core.objectives.inputs.build_objective` with ``vocab=`` and the
            encoder's numbers it names (``hidden_size``, ``vocab_size``, ``tie_to``, ...).
        trainer: trainer settings (``output_dir`` is the run directory).
        weights: name -> loss weight (default 1 each).
        tokenizer: a ``vocab.txt`` or tokenizer directory; ``None`` trains a WordPiece
            vocabulary of ``vocab_size`` on the corpus (from a sample of its stream).
        vocab_size: size of a trained vocabulary.
        lowercase: lower-case text (trained or ``vocab.txt`` tokenizers).
        max_length: tokens per row, special tokens included.
        batch_size: rows per micro-batch.
        seed: seed of example building, masking and shuffling.
        callbacks: trainer callbacks (``on_log(step, record)``, ``on_save(step, path)``).
        init_from: a ``final/`` directory of an earlier run, or a Hugging Face BERT,
            ALBERT, ELECTRA or XLNet folder, to continue from: its encoder (architecture
            and weights; ``encoder`` is then ignored), its objective heads
            (``heads.safetensors``, or a Hugging Face ``...ForPreTraining`` model's heads)
            and, unless ``tokenizer`` is given, its tokenizer.
        pack: pack short rows together (block-diagonal attention, positions restarting
            per example) so no compute goes to padding; for single-segment objectives
            (MLM, SpanBERT, WWM), not for NSP/SOP pairs or objectives that build their
            own attention masks (GPT, UniLM).
        num_workers: DataLoader worker processes that build batches (masking, padding)
            off the training loop; 0 builds them in the training process.
        cache_dir: where raw corpora are prepared (default :func:`default_cache_dir`).

    Returns:
        :class:`PretrainResult`.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if init_from is not None and tokenizer is None and prepared is None:
        from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory

        tokenizer = find_tokenizer_directory(init_from) or init_from
    store, tok = open_training_corpus(
        corpus,
        prepared,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        cache_dir=cache_dir,
        run_dir=output_dir,
    )
    vocab = tok.vocab_info
    # Initial weights depend on the seed only, not on what ran before in this process.
    torch.manual_seed(derive_seed(seed, "init"))
    if init_from is not None:
        model_encoder = TransformerEncoder.from_pretrained(init_from)
        _check_init_vocabulary(init_from, model_encoder, vocab, tok_source=tokenizer)
    elif isinstance(encoder, TransformerEncoder):
        model_encoder = encoder
    else:
        model_encoder = encoder(vocab_size=vocab.vocab_size)
    if max_length > model_encoder.config.max_positions:
        raise ValueError(
            f"data max_length={max_length} exceeds the encoder's max_positions="
            f"{model_encoder.config.max_positions}; lower max_length or raise max_positions"
        )
    mix = ObjectiveMix(
        {name: build_objective(make, model_encoder, vocab) for name, make in objectives.items()},
        weights,
    )
    for _, objective in mix:
        if isinstance(objective, UsesWordBoundaries):
            objective.bind_tokenizer(tok)  # word boundaries from the run's own tokenizer
        if isinstance(objective, UniLMObjective):  # attention.structured_masks
            objective.structured_masks = trainer.structured_masks
    if init_from is not None:
        load_init_heads(mix, Path(init_from))
    examples = build_examples(mix, store, vocab, max_length, seed)
    if pack:
        if any(isinstance(o, BuildsExamples) for _, o in mix):
            raise ValueError(
                "data.pack=true needs single-segment objectives; sentence-pair objectives "
                "(NSP, SOP) label whole rows. Set data.pack=false"
            )
        examples = PackedRows(examples, max_length)
    batches = PretrainingBatches(
        examples,
        batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=seed,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
        structured_masks=trainer.structured_masks,
    )
    logger.info(
        "%d documents, %d tokens -> %d examples, %d batches per epoch",
        store.num_documents,
        store.num_tokens,
        len(examples),
        batches.batches_per_epoch,
    )
    run = train_and_save(
        PretrainingModel(model_encoder, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: model_encoder.save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix, model_encoder, path)]
        ),
    )
    return PretrainResult(
        output_dir=output_dir,
        encoder_dir=run.final_dir,
        tokenizer_dir=output_dir / RUN_TOKENIZER,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        final_metrics=run.final_metrics,
        num_examples=len(examples),
    )


def _check_init_vocabulary(
    init_from: str | Path,
    encoder: TransformerEncoder,
    vocab: VocabInfo,
    *,
    tok_source: str | Path | None,
) -> None:
    """An ``init_from`` checkpoint's token table must fit the run's tokenizer."""
    if vocab.vocab_size == encoder.config.vocab_size:
        return
    from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory

    own = find_tokenizer_directory(init_from)
    fix = (
        f"leave data.tokenizer unset so that the checkpoint's own tokenizer ({own}) is used"
        if own is not None
        else f"{init_from} has no tokenizer files (tokenizer.json or vocab.txt): give "
        "data.tokenizer=<the vocab.txt the checkpoint was trained with>"
    )
    raise ValueError(
        f"init_from={init_from}: the checkpoint's vocab_size is {encoder.config.vocab_size} "
        f"but the tokenizer ({tok_source or 'trained on the corpus'}) has {vocab.vocab_size} "
        f"ids; its token table is indexed by its own tokenizer's ids, so {fix}"
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
