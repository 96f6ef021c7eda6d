"""Public pre-training steps for ERNIE-Baidu and ERNIE-THU (what recipes and flows call).

Both train from a linked corpus prepared once into memory-mapped shards
(:mod:`ptm_knowledge.ernie.prepared`): a raw ``.jsonl`` is prepared into a cache keyed by
the input and the settings (:func:`open_linked_corpus`), so a second run, a resume or a
retrain opens it at once. Rows are planned once (cached beside the shards) and built per
batch (:class:`~ptm_knowledge.ernie.knowledge_store.KnowledgeRows`), in DataLoader worker
processes when asked: memory does not grow with the corpus.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.data import PretrainingBatches
from ptm_core.data.document_shape import warn_one_sentence_documents
from ptm_core.data.layouts import (
    SegmentPairRows,
    SegmentRows,
    cached_plan,
    plan_segment_pairs,
    plan_single_segments,
)
from ptm_core.data.prepared import TOKENIZER_DIR
from ptm_core.data.row_views import StaticDataSide
from ptm_core.data.shard_writer import tokenizer_sha256
from ptm_core.data.sources import Piece
from ptm_core.data.vocabulary_fit import report_tokenizer, tokenizer_source
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.objectives.base import Objective
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import (
    RUN_TOKENIZER,
    PretrainResult,
    default_cache_dir,
    keep_run_tokenizer,
    save_heads,
)
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.run import TrainingRun, train_and_save
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective, ErnieThuPretrainingModel
from ptm_knowledge.ernie.examples import check_mention_coverage
from ptm_knowledge.ernie.knowledge_masking import (
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
)
from ptm_knowledge.ernie.knowledge_store import KnowledgeRows, KnowledgeStore, knowledge_coverage
from ptm_knowledge.ernie.linked_shards import iter_numbered_documents
from ptm_knowledge.ernie.phrases import CollocationPhrases, NounChunkPhrases, PhraseExtractor
from ptm_knowledge.ernie.prepared import ERNIE_FORMAT, phrase_key, prepare_linked_corpus
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.linking.corpus import LinkedDocument, write_linked_corpus

logger = logging.getLogger(__name__)

EncoderSource: TypeAlias = Callable[..., TransformerEncoder] | TransformerEncoder | str | Path
LinkedSource: TypeAlias = str | Path | Sequence[LinkedDocument] | None
PhraseSource: TypeAlias = PhraseExtractor | Sequence[str] | None
# A run given documents in memory writes them here, then prepares them like a file.
DOCUMENTS_FILE = "linked_documents.jsonl"
PHRASES_FILE = "phrases.json"


def _text_encoder(source: EncoderSource, vocab_size: int, seed: int) -> TransformerEncoder:
    torch.manual_seed(derive_seed(seed, "init"))
    if isinstance(source, TransformerEncoder):
        return source
    if isinstance(source, (str, Path)):
        return TransformerEncoder.from_pretrained(source)
    return source(vocab_size=vocab_size)


def _finish(run: TrainingRun, output_dir: Path, num_examples: int) -> PretrainResult:
    return PretrainResult(
        output_dir=output_dir,
        encoder_dir=run.final_dir,
        tokenizer_dir=output_dir / RUN_TOKENIZER,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        final_metrics=run.final_metrics,
        num_examples=num_examples,
    )


# ---------------------------------------------------------------------- opening the data


def linked_cache_dir(
    linked_corpus: str | os.PathLike[str],
    cache_root: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str] | None,
    vocab_size: int,
    lowercase: bool,
    phrases: Any,
) -> Path:
    """``<cache_root>/ernie-<16 hex>``: keyed by the input as given and the settings.

    As :func:`ptm_core.data.prepare.prepared_cache_dir`, the key costs no file read; the
    folder is brought up to date in place when the file changes.
    """
    key = {
        "format": ERNIE_FORMAT,
        "input": os.path.abspath(os.fspath(linked_corpus)),
        "tokenizer": None if tokenizer is None else os.path.abspath(os.fspath(tokenizer)),
        "vocab_size": vocab_size if tokenizer is None else None,
        "lowercase": lowercase,
        "phrases": phrases,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return Path(cache_root) / f"ernie-{digest[:16]}"


def _phrase_spec(phrases: PhraseSource, nlp: Any) -> Any:
    """How the phrases are made, for the cache key (``False``: no phrase units)."""
    if phrases is None:
        if nlp is not None and "parser" in getattr(nlp, "pipe_names", ()):
            meta = getattr(nlp, "meta", {})
            return {"noun_chunks": [meta.get("name"), meta.get("version")]}
        return {"learn": "collocations"}
    if isinstance(phrases, Sequence) and not isinstance(phrases, str):
        return {"lexicon": hashlib.sha256("\n".join(phrases).encode()).hexdigest()}
    return phrase_key(phrases)  # type: ignore[arg-type]


def _phrase_extractor(
    phrases: PhraseSource, nlp: Any, linked: Path, folder: Path
) -> PhraseExtractor:
    """The extractor; learned collocations are kept in ``folder`` while the input is
    unchanged (learning reads the whole corpus once, as a stream of sentences)."""
    if phrases is not None:
        if isinstance(phrases, Sequence) and not isinstance(phrases, str):
            return CollocationPhrases.from_lexicon(phrases)
        return phrases  # type: ignore[return-value]
    if nlp is not None and "parser" in getattr(nlp, "pipe_names", ()):
        return NounChunkPhrases(nlp)
    stat = linked.stat()
    identity = [str(linked.resolve()), stat.st_size, stat.st_mtime_ns]
    saved = folder / PHRASES_FILE
    try:
        data = json.loads(saved.read_text(encoding="utf-8"))
        if data.get("input") == identity:
            return CollocationPhrases([tuple(p) for p in data["pairs"]])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    folder.mkdir(parents=True, exist_ok=True)
    whole = Piece(str(linked), "jsonl", None, "bytes", 0, stat.st_size, 0)
    learned = CollocationPhrases.learn(
        s for _, d in iter_numbered_documents(whole, folder) for s in d.sentences
    )
    pairs = sorted(list(p) for p in learned.pairs)
    atomic_write_text(saved, json.dumps({"input": identity, "pairs": pairs}) + "\n")
    return learned


def open_linked_corpus(
    linked_corpus: LinkedSource,
    prepared: str | Path | None = None,
    *,
    output_dir: Path,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    phrases: PhraseSource | bool = False,
    nlp: Any = None,
    cache_dir: str | Path | None = None,
    workers: int | None = 0,
) -> tuple[KnowledgeStore, WordPieceTokenizer]:
    """The prepared linked corpus to train on, and its tokenizer (kept as the run's).

    Args:
        linked_corpus: a linked-corpus ``.jsonl`` (prepared into ``cache_dir`` first,
            once) or its documents in memory (written to ``output_dir`` first); or
        prepared: a folder written by :func:`prepare_linked_corpus` (give one of the two).
        output_dir: the run directory (its saved tokenizer is reused on resume).
        tokenizer, vocab_size, lowercase: as :func:`ptm_core.pretraining.pretrain`.
        phrases: ERNIE-Baidu's phrase source (extractor, lexicon, or ``None``: noun chunks
            with a parser in ``nlp``, else collocations learned from the corpus); ``False``
            for no phrase units (ERNIE-THU).
        nlp: a spaCy pipeline for noun chunks.
        cache_dir: where raw input is prepared (default ``default_cache_dir()``, beside
            the text corpora).
        workers: processes preparing shards (``0``: this one).

    Raises:
        ValueError: neither or both of ``linked_corpus`` and ``prepared``.
        LinkedCorpusError: a bad line of the input (``file:line``).
        PreparedDataError: a damaged prepared folder, naming the shard file and the fix.
    """
    where = linked_corpus if isinstance(linked_corpus, (str, Path)) else "the linked documents"
    source = tokenizer_source(tokenizer, prepared, where, vocab_size)
    if (linked_corpus is None) == (prepared is None):
        raise ValueError(
            "give the linked corpus once: data.linked_corpus=<.jsonl> (prepared into a cache "
            "first) or data.prepared=<a folder written by prepare_linked_corpus>"
        )
    if prepared is not None:
        store = KnowledgeStore.open(prepared)
    else:
        assert linked_corpus is not None
        if isinstance(linked_corpus, (str, Path)):
            path = Path(linked_corpus)
        else:
            path = write_linked_corpus(linked_corpus, output_dir / DOCUMENTS_FILE)
        spec = False if phrases is False else _phrase_spec(phrases, nlp)  # type: ignore[arg-type]
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()

        def folder(given: str | Path | None) -> Path:
            return linked_cache_dir(
                path,
                root,
                tokenizer=given,
                vocab_size=vocab_size,
                lowercase=lowercase,
                phrases=spec,
            )

        target = folder(tokenizer)
        saved = output_dir / RUN_TOKENIZER
        if tokenizer is None and (saved / "vocab.txt").is_file():
            # A resumed run keeps its ids: the cache's trained tokenizer when it is the
            # run's (nothing to prepare again), else the run's own, given.
            trained = target / TOKENIZER_DIR
            if not (trained.is_dir() and tokenizer_sha256(trained) == tokenizer_sha256(saved)):
                tokenizer = saved
                target = folder(tokenizer)
        extractor = (
            None if phrases is False else _phrase_extractor(phrases, nlp, path, target)  # type: ignore[arg-type]
        )
        prepare_linked_corpus(
            path,
            target,
            tokenizer=tokenizer,
            vocab_size=vocab_size,
            lowercase=lowercase,
            phrases=extractor,
            workers=workers,
        )
        store = KnowledgeStore.open(target, verify=False)
    tok = WordPieceTokenizer.from_directory(store.tokenizer_dir)
    keep_run_tokenizer(tok, output_dir)
    report_tokenizer(store, tok.vocab_info.unk_id, tok.vocab_size, source)
    return store, tok


def knowledge_rows(
    store: KnowledgeStore,
    vocab: VocabInfo,
    max_length: int,
    *,
    segment_pairs: bool = False,
    seed: int = 0,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> KnowledgeRows:
    """ERNIE rows over a prepared linked corpus, planned once (cached) and built per index.

    The same rows as :func:`~ptm_knowledge.ernie.examples.build_knowledge_examples` with
    ``rng=random.Random(derive_seed(seed, "examples"))``.
    """
    base: SegmentRows | SegmentPairRows
    if segment_pairs:
        warn_one_sentence_documents(store, ["nsp"])
        settings = {
            "max_length": max_length,
            "seed": seed,
            "random_next_prob": random_next_prob,
            "short_seq_prob": short_seq_prob,
        }
        plan = cached_plan(
            store,
            "ernie-pairs",
            settings,
            lambda: plan_segment_pairs(
                store,
                max_length,
                random.Random(derive_seed(seed, "examples")),
                random_next_prob=random_next_prob,
                short_seq_prob=short_seq_prob,
            ),
        )
        base = SegmentPairRows(store, plan, vocab, label_key="next_sentence_label")
    else:
        plan = cached_plan(
            store,
            "single",
            {"max_length": max_length},
            lambda: plan_single_segments(store, max_length),
        )
        base = SegmentRows(store, plan, vocab)
    return KnowledgeRows(base, store)


# ---------------------------------------------------------------------- ERNIE-Baidu


def pretrain_ernie_baidu(
    linked_corpus: LinkedSource = None,
    *,
    encoder: EncoderSource,
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    mask_prob: float = 0.15,
    schedule_fractions: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
    phrases: PhraseSource = None,
    nlp: Any = None,
    objective: Callable[..., KnowledgeMaskingObjective] | None = None,
    callbacks: Sequence[object] = (),
    num_workers: int = 0,
    cache_dir: str | Path | None = None,
) -> PretrainResult:
    """ERNIE 1.0 (Sun et al., 2019) pre-training: MLM with staged knowledge masking.

    Args:
        linked_corpus: a linked corpus (``data_specs/linked_corpus``) or its documents;
            the mentions define entity-level units. Prepared once into ``cache_dir``
            (with the phrase units); or
        prepared: a folder written by :func:`prepare_linked_corpus` (with its phrases).
        encoder: a built encoder, a factory called with ``vocab_size=``, or a checkpoint
            directory for ``TransformerEncoder.from_pretrained``.
        trainer: trainer settings (``output_dir`` is the run directory).
        tokenizer, vocab_size, lowercase, max_length, batch_size, seed: as
            :func:`ptm_core.pretraining.pretrain`.
        mask_prob: fraction of tokens masked (whole units).
        schedule_fractions: shares of training for basic, phrase and entity masking.
        phrases: a phrase extractor, a phrase lexicon (strings), or ``None``: noun chunks
            when ``nlp`` has a parser, else collocations learned from the corpus (once;
            kept in the cache).
        nlp: optional spaCy pipeline for noun-chunk phrases.
        objective: factory ``(vocab=, hidden_size=, ...) -> KnowledgeMaskingObjective`` (config).
        num_workers: DataLoader processes building batches off the training loop.
        cache_dir: where a raw linked corpus is prepared (default ``default_cache_dir()``).

    Returns:
        :class:`ptm_core.pretraining.PretrainResult`.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    fractions = tuple(float(f) for f in schedule_fractions)
    if len(fractions) != 3:
        raise ValueError(
            f"schedule_fractions needs 3 shares (basic, phrase, entity), got {fractions}"
        )
    store, tok = open_linked_corpus(
        linked_corpus,
        prepared,
        output_dir=output_dir,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        phrases=phrases,
        nlp=nlp,
        cache_dir=cache_dir,
    )
    store.bind_entities(None)
    text = _text_encoder(encoder, tok.vocab_size, seed)
    make = objective or KnowledgeMaskingObjective
    mlm = (
        build_objective(make, text, tok.vocab_info, mask_prob=mask_prob)
        if objective is None
        else build_objective(make, text, tok.vocab_info)
    )
    mix = ObjectiveMix({"mlm": mlm})
    examples = knowledge_rows(store, tok.vocab_info, max_length)
    total = trainer.max_steps * trainer.gradient_accumulation_steps
    batches = StagedMaskingBatches(
        examples,
        batch_size,
        schedule=MaskingSchedule(total, fractions),
        pad_id=tok.vocab_info.pad_id,
        transform=mix.collate,
        seed=seed,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    logger.info(
        "ERNIE-Baidu: %d documents, %d tokens -> %d rows",
        store.num_documents,
        store.num_tokens,
        len(examples),
    )
    run = train_and_save(
        PretrainingModel(text, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: text.save_pretrained(final, extra_writers=[tok.save]),
    )
    return _finish(run, output_dir, len(examples))


# ---------------------------------------------------------------------- ERNIE-THU


def pretrain_ernie_thu(
    linked_corpus: LinkedSource = None,
    *,
    entity_ids: Sequence[str],
    entity_embeddings: torch.Tensor,
    encoder: EncoderSource,
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    num_knowledge_layers: int = 1,
    entity_heads: int = 1,
    entity_size: int | None = None,
    entity_bias_everywhere: bool = False,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    objectives: Mapping[str, Callable[..., Any]] | None = None,
    entity_objectives: Mapping[str, Callable[..., Any]] | None = None,
    weights: Mapping[str, float] | None = None,
    callbacks: Sequence[object] = (),
    entity_source: str | Path | None = None,
    known_entities: Container[str] | None = None,
    num_workers: int = 0,
    cache_dir: str | Path | None = None,
    kg: str | Path | None = None,
) -> PretrainResult:
    """ERNIE (Zhang et al., 2019) pre-training: MLM + NSP + dEA on a linked corpus.

    The text encoder (built, from a factory, or loaded from any checkpoint
    ``TransformerEncoder.from_pretrained`` reads, e.g. a Hugging Face BERT) is split by
    :meth:`KnowledgeableEncoder.from_text_encoder`: its last ``num_knowledge_layers``
    layers become the aggregators' token streams.

    Args:
        linked_corpus: the linked corpus or its documents (prepared once into
            ``cache_dir``); or
        prepared: a folder written by :func:`prepare_linked_corpus`.
        entity_ids, entity_embeddings: KG embeddings (``load_entity_embeddings(dir)``);
            mentions of ids outside ``entity_ids`` are ignored.
        encoder: text encoder source (``L`` layers = ``N`` T-Encoder + ``M`` aggregators).
        trainer: trainer settings.
        num_knowledge_layers: ``M``.
        entity_heads, entity_size, entity_bias_everywhere: see :class:`KnowledgeableEncoder`.
        objectives: name -> factory (``build_objective``) of the text objectives
            (default MLM + NSP); rows are NSP segment pairs when one is NSP.
        entity_objectives: name -> factory (``build_objective``) needing the
            knowledgeable encoder (default ``{"dea": DenoisingEntityAutoencoderObjective}``).
        weights: name -> loss weight (default 1 each).
        entity_source: where ``entity_embeddings`` came from, named in the error when
            the corpus's mentions do not match them.
        known_entities: the KG's entity ids: a mention of any other id is an error naming
            its file and line (``None``: not checked).
        num_workers, cache_dir: as :func:`pretrain_ernie_baidu`.
        kg: the KG folder ``entity_ids`` come from, recorded in ``knowledge_config.json``
            (fine-tuning links task text against it by default).
        (others as :func:`pretrain_ernie_baidu`)

    Raises:
        ValueError: no linked mention reaches a training row (counts and likely cause in
            the message; see :func:`check_mention_coverage`). Fewer than
            :data:`~ptm_knowledge.ernie.examples.MIN_MENTION_FRACTION` of them logs a
            warning.
        LinkedCorpusError: an entity outside ``known_entities`` (``file:line``).
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    store, tok = open_linked_corpus(
        linked_corpus,
        prepared,
        output_dir=output_dir,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        cache_dir=cache_dir,
    )
    index = {entity_id: i for i, entity_id in enumerate(entity_ids)}
    store.bind_entities(index, known=known_entities)
    text = _text_encoder(encoder, tok.vocab_size, seed)
    model_encoder = KnowledgeableEncoder.from_text_encoder(
        text,
        entity_embeddings,
        num_knowledge_layers,
        entity_heads=entity_heads,
        entity_size=entity_size,
        entity_bias_everywhere=entity_bias_everywhere,
    )
    vocab = tok.vocab_info
    factories: dict[str, Callable[..., Any]] = dict(
        objectives or {"mlm": MaskedLMObjective, "nsp": NextSentenceObjective}
    )
    factories.update(entity_objectives or {"dea": DenoisingEntityAutoencoderObjective})
    built: dict[str, Any] = {
        n: build_objective(f, model_encoder, vocab) for n, f in factories.items()
    }
    mix = ObjectiveMix(built, weights)
    nsp = next((o for o in built.values() if isinstance(o, NextSentenceObjective)), None)
    rows = knowledge_rows(
        store,
        vocab,
        max_length,
        segment_pairs=nsp is not None,
        seed=seed,
        random_next_prob=nsp.random_next_prob if nsp is not None else 0.5,
        short_seq_prob=nsp.short_seq_prob if nsp is not None else 0.1,
    )
    coverage = knowledge_coverage(store, index, rows)
    check_mention_coverage(coverage, entity_source=entity_source, max_length=max_length)
    examples: Sequence[dict[str, Any]] = rows
    if any(type(o).prepare_example is not Objective.prepare_example for _, o in mix):
        examples = StaticDataSide(rows, mix.prepare_example, seed)
    batches = PretrainingBatches(
        examples,
        batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=seed,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    run = train_and_save(
        ErnieThuPretrainingModel(model_encoder, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: model_encoder.save_pretrained(
            final,
            entity_ids=entity_ids,
            kg=kg,
            extra_writers=[tok.save, lambda path: save_heads(mix, model_encoder, path)],
        ),
    )
    return _finish(run, output_dir, len(rows))
