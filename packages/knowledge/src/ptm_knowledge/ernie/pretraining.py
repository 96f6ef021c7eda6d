"""The data side of ERNIE-Baidu and ERNIE-THU pre-training (the plans are in
:mod:`ptm_knowledge.ernie.plans`).

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.data.document_shape import warn_one_sentence_documents
from ptm_core.data.layouts import (
    SegmentPairRows,
    SegmentRows,
    cached_plan,
    plan_segment_pairs,
    plan_single_segments,
)
from ptm_core.data.prepared import TOKENIZER_DIR
from ptm_core.data.shard_writer import tokenizer_sha256
from ptm_core.data.sources import Piece
from ptm_core.data.vocabulary_fit import report_tokenizer, tokenizer_source
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.pretraining import (
    RUN_TOKENIZER,
    PretrainResult,
    default_cache_dir,
    keep_run_tokenizer,
)
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo
from ptm_core.training.run import TrainingRun
from ptm_knowledge.ernie.knowledge_store import KnowledgeRows, KnowledgeStore
from ptm_knowledge.ernie.linked_shards import iter_numbered_documents
from ptm_knowledge.ernie.phrases import CollocationPhrases, NounChunkPhrases, PhraseExtractor
from ptm_knowledge.ernie.prepared import ERNIE_FORMAT, phrase_key, prepare_linked_corpus
from ptm_knowledge.linking.corpus import LinkedDocument, linked_corpus_for, write_linked_corpus

if TYPE_CHECKING:
    from ptm_core.families.runner import PretrainRun
    from ptm_knowledge.kg_corpus_settings import KGCorpusData

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
    return PretrainResult.of_run(run, output_dir, num_examples)


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
) -> tuple[KnowledgeStore, TaskTokenizer]:
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
    tok = load_task_tokenizer(store.tokenizer_dir)
    keep_run_tokenizer(tok, output_dir)
    report_tokenizer(store, tok.vocab_info.unk_id, tok.vocab_size, source)
    return store, tok


def open_run_corpus(
    run: PretrainRun, data: KGCorpusData, tokenizer: Any = None, **options: Any
) -> tuple[KnowledgeStore, Any, Any]:
    """A run's linked corpus (linked now into the run folder unless ``data.prepared`` is
    given), its store and tokenizer (``tokenizer``, an ``init_from`` folder's own, replaces
    ``data.tokenizer``); ``options`` go to :func:`open_linked_corpus`. The ERNIE and
    KnowBERT plans open their data through this."""
    output_dir = run.output_dir
    linked = None if data.prepared else linked_corpus_for(data, output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    store, tok = open_linked_corpus(
        linked,
        data.prepared,
        output_dir=output_dir,
        tokenizer=tokenizer or data.tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        cache_dir=data.cache_dir,
        **options,
    )
    return store, tok, linked


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
