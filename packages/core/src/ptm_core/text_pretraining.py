"""Text pre-training of the ``encoder`` and ``xlnet`` families: the runner's plan hooks.

A corpus (prepared, memory-mapped; raw files are prepared into a cache first) and its
tokenizer, an encoder (from the ``model`` preset, or ``init_from``), the objectives' mix
and the examples it builds: :func:`plan_encoder_pretraining` returns them as a
:class:`~ptm_core.families.runner.PretrainingPlan`; the runner trains and writes ``final/``
(the encoder, its tokenizer and ``heads.safetensors``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ptm_core.data.batches import PretrainingBatches
from ptm_core.data.row_views import PackedRows
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.core_settings import TextData, TextSettings
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives.base import BuildsExamples
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.objectives.unilm import UniLMObjective
from ptm_core.objectives.whole_word import UsesWordBoundaries
from ptm_core.pretraining import (
    RUN_TOKENIZER,
    PretrainResult,
    build_examples,
    load_init_heads,
    open_training_corpus,
    save_heads,
)
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer

logger = logging.getLogger(__name__)

EncoderFactory = Callable[..., TransformerEncoder]


def plan_encoder_pretraining(run: PretrainRun) -> PretrainingPlan:
    """The ``encoder`` family's plan (BERT, RoBERTa, ALBERT, ELECTRA, SpanBERT, UniLM, GPT).

    ``run.settings`` is a :class:`TextSettings`; ``run.model`` a factory called with the
    tokenizer's ``vocab_size``; ``run.objectives`` factories that
    :func:`~ptm_core.objectives.inputs.build_objective` calls with the numbers they name.
    ``init_from`` (a ``final/`` of an earlier run, or a Hugging Face BERT, ALBERT or ELECTRA
    folder) gives the encoder (``model`` is then not used), the objectives' heads and,
    unless ``data.tokenizer`` is a user's own, the tokenizer.
    """
    return _plan_text(run, relative=False)


def plan_xlnet_pretraining(run: PretrainRun) -> PretrainingPlan:
    """The ``xlnet`` family's plan: :func:`plan_encoder_pretraining` for an encoder with
    relative positions (permutation LM, segment recurrence)."""
    return _plan_text(run, relative=True)


def _plan_text(run: PretrainRun, *, relative: bool) -> PretrainingPlan:
    settings: TextSettings = run.settings
    data = settings.data
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    if settings.init_embeddings and run.init_from:
        raise ValueError(
            f"init_embeddings={settings.init_embeddings} and init_from={run.init_from} are both "
            "set: the init_from checkpoint already has trained token embeddings; drop one of them"
        )
    tokenizer = _tokenizer_source(data, run.init_from)
    store, tok = open_training_corpus(
        None if data.prepared else data.corpus,
        data.prepared,
        tokenizer=tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        cache_dir=data.cache_dir,
        run_dir=output_dir,
    )
    vocab = tok.vocab_info
    # Initial weights depend on the seed only, not on what ran before in this process.
    torch.manual_seed(derive_seed(run.seed, "init"))
    encoder = _encoder(run, settings, vocab, tokenizer)
    _check_family(encoder, relative)
    if data.max_length > encoder.config.max_positions:
        raise ValueError(
            f"data max_length={data.max_length} exceeds the encoder's max_positions="
            f"{encoder.config.max_positions}; lower max_length or raise max_positions"
        )
    mix = ObjectiveMix(
        {name: build_objective(make, encoder, vocab) for name, make in run.objectives.items()},
        dict(run.weights),
    )
    for _, objective in mix:
        if isinstance(objective, UsesWordBoundaries):
            if not isinstance(tok, WordPieceTokenizer):
                raise ValueError(
                    f"{type(objective).__name__} finds word boundaries from WordPiece's '##' "
                    f"pieces, and the run's tokenizer ({tokenizer}) is not WordPiece (a "
                    "RoBERTa/XLM-R folder's BPE or Unigram); use token-level MLM "
                    "(experiment=roberta_tiny) with this folder"
                )
            objective.bind_tokenizer(tok)  # word boundaries from the run's own tokenizer
        if isinstance(objective, UniLMObjective):  # attention.structured_masks
            objective.structured_masks = run.trainer.structured_masks
    if run.init_from is not None:
        load_init_heads(mix, Path(run.init_from))
    examples = build_examples(mix, store, vocab, data.max_length, run.seed)
    if data.pack:
        if any(isinstance(o, BuildsExamples) for _, o in mix):
            raise ValueError(
                "data.pack=true needs single-segment objectives; sentence-pair objectives "
                "(NSP, SOP) label whole rows. Set data.pack=false"
            )
        examples = PackedRows(examples, data.max_length)
    batches = PretrainingBatches(
        examples,
        data.batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
        structured_masks=run.trainer.structured_masks,
    )
    logger.info(
        "%d documents, %d tokens -> %d examples, %d batches per epoch",
        store.num_documents,
        store.num_tokens,
        len(examples),
        batches.batches_per_epoch,
    )
    return PretrainingPlan(
        network=encoder,
        objectives=mix,
        data=batches,
        save_final=lambda final: encoder.save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix, encoder, path)]
        ),
        finish=lambda trained: PretrainResult.of_run(trained, output_dir, len(examples)),
        callbacks=run.callbacks,
    )


def _tokenizer_source(data: TextData, init_from: str | None) -> str | Path | None:
    """The tokenizer the corpus is read with: a prepared corpus's own (``None``), an
    ``init_from`` checkpoint's own (its token table is indexed by those ids: the data
    preset's tokenizer would not fit it), else ``data.tokenizer``."""
    if data.prepared:
        return None
    if init_from is None:
        return data.tokenizer
    from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory

    own = find_tokenizer_directory(init_from)
    if own is None:
        return data.tokenizer or init_from
    if data.tokenizer:
        logger.info(
            "init_from=%s has its own tokenizer; it replaces data.tokenizer=%s",
            init_from,
            data.tokenizer,
        )
    return own


def _encoder(
    run: PretrainRun, settings: TextSettings, vocab: VocabInfo, tokenizer: str | Path | None
) -> TransformerEncoder:
    if run.init_from is not None:
        from ptm_core.checkpoints.init_report import check_segment_objectives

        encoder = TransformerEncoder.from_pretrained(run.init_from)
        _check_init_vocabulary(run.init_from, encoder, vocab, tok_source=tokenizer)
        check_segment_objectives(
            f"init_from={run.init_from}", encoder.config.type_vocab_size, run.objectives
        )
        return encoder
    if run.model is None:
        raise ValueError("no model: give a model preset (model=bert_tiny) or init_from=<final/>")
    factory: Any = run.model
    if settings.init_embeddings:
        factory = with_static_embeddings(
            factory, settings.init_embeddings, run.output_dir / RUN_TOKENIZER
        )
    encoder = (
        factory if isinstance(factory, TransformerEncoder) else factory(vocab_size=vocab.vocab_size)
    )
    from ptm_core.checkpoints.init_report import check_segment_objectives

    check_segment_objectives(
        f"model.type_vocab_size={encoder.config.type_vocab_size}",
        encoder.config.type_vocab_size,
        run.objectives,
    )
    return encoder


def _check_family(encoder: TransformerEncoder, relative: bool) -> None:
    if bool(encoder.config.relative) == relative:
        return
    if encoder.config.relative:
        raise ValueError(
            "the model is an XLNet encoder (relative positions); pre-train it with family=xlnet "
            "(experiment=xlnet_tiny sets it)"
        )
    raise ValueError(
        "family=xlnet pre-trains an encoder with relative positions; this model has absolute "
        "ones: use model=xlnet_tiny, or family=encoder for this model"
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


def with_static_embeddings(
    factory: EncoderFactory, table_dir: str | Path, tokenizer_dir: Path
) -> EncoderFactory:
    """Wrap an encoder factory so that its token embeddings start from a static vector table.

    ``init_embeddings=<dir>`` (a ``final/`` of ``experiment=word2vec_tiny``, ``glove_tiny`` or
    ``nnlm_tiny``): once the run's tokenizer is saved in ``tokenizer_dir`` (the plan does
    that before it builds the encoder), every token the table holds (as written, else
    lower-cased) gets its vector; the coverage is logged. The table's ``dim`` must equal the
    encoder's embedding size.
    """
    from ptm_core.data.vector_table import VectorTable, init_token_embeddings

    table = VectorTable.load(table_dir)

    def build(**kwargs: Any) -> TransformerEncoder:
        encoder = factory(**kwargs)
        tokenizer = WordPieceTokenizer.from_directory(tokenizer_dir)
        stats = init_token_embeddings(encoder.word_embeddings, tokenizer.backend.get_vocab(), table)
        logger.info(
            "init_embeddings=%s (%s): %d of %d token rows copied (%.1f%%; %d lower-cased)",
            table_dir,
            table.method,
            stats.exact + stats.lowercased,
            stats.total,
            100 * stats.coverage,
            stats.lowercased,
        )
        return encoder

    return build


__all__ = [
    "plan_encoder_pretraining",
    "plan_xlnet_pretraining",
    "with_static_embeddings",
]
