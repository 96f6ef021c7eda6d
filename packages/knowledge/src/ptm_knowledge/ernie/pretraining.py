"""Public pre-training steps for ERNIE-Baidu and ERNIE-THU (what recipes and flows call)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import torch

from ptm_core.data import PretrainingBatches
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.pretraining import PretrainResult, prepare_tokenizer, save_heads
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_core.training.run import TrainingRun, train_and_save
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective, ErnieThuPretrainingModel
from ptm_knowledge.ernie.examples import build_knowledge_examples, check_mention_coverage
from ptm_knowledge.ernie.knowledge_masking import (
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
)
from ptm_knowledge.ernie.phrases import CollocationPhrases, PhraseExtractor, build_phrase_extractor
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.linking.corpus import LinkedDocument, read_linked_corpus

logger = logging.getLogger(__name__)

EncoderSource: TypeAlias = Callable[..., TransformerEncoder] | TransformerEncoder | str | Path


def _documents(linked: str | Path | Sequence[LinkedDocument]) -> list[LinkedDocument]:
    if isinstance(linked, (str, Path)):
        return read_linked_corpus(linked)
    return list(linked)


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
        tokenizer_dir=output_dir / "tokenizer",
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        final_metrics=run.final_metrics,
        num_examples=num_examples,
    )


def pretrain_ernie_baidu(
    linked_corpus: str | Path | Sequence[LinkedDocument],
    *,
    encoder: EncoderSource,
    trainer: TrainerConfig,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    mask_prob: float = 0.15,
    schedule_fractions: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
    phrases: PhraseExtractor | Sequence[str] | None = None,
    nlp: Any = None,
    objective: Callable[..., KnowledgeMaskingObjective] | None = None,
    callbacks: Sequence[object] = (),
) -> PretrainResult:
    """ERNIE 1.0 (Sun et al., 2019) pre-training: MLM with staged knowledge masking.

    Args:
        linked_corpus: a linked corpus (``data_specs/linked_corpus``) or its documents;
            the mentions define entity-level units.
        encoder: a built encoder, a factory called with ``vocab_size=``, or a checkpoint
            directory for ``TransformerEncoder.from_pretrained``.
        trainer: trainer settings (``output_dir`` is the run directory).
        tokenizer, vocab_size, lowercase, max_length, batch_size, seed: as
            :func:`ptm_core.pretraining.pretrain`.
        mask_prob: fraction of tokens masked (whole units).
        schedule_fractions: shares of training for basic, phrase and entity masking.
        phrases: a phrase extractor, a phrase lexicon (strings), or ``None``: noun chunks
            when ``nlp`` has a parser, else collocations learned from the corpus.
        nlp: optional spaCy pipeline for noun-chunk phrases.
        objective: factory ``(encoder=, vocab=) -> KnowledgeMaskingObjective`` (config).

    Returns:
        :class:`ptm_core.pretraining.PretrainResult`.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    documents = _documents(linked_corpus)
    tok = prepare_tokenizer(
        documents, output_dir, tokenizer=tokenizer, vocab_size=vocab_size, lowercase=lowercase
    )
    if phrases is None:
        extractor = build_phrase_extractor(nlp, (s for d in documents for s in d.sentences))
    elif isinstance(phrases, Sequence) and not isinstance(phrases, str):
        extractor = CollocationPhrases.from_lexicon(phrases)
    else:
        extractor = phrases  # type: ignore[assignment]
    text = _text_encoder(encoder, tok.vocab_size, seed)
    make = objective or KnowledgeMaskingObjective
    mlm = (
        make(encoder=text, vocab=tok.vocab_info, mask_prob=mask_prob)
        if objective is None
        else make(encoder=text, vocab=tok.vocab_info)
    )
    mix = ObjectiveMix({"mlm": mlm})
    examples = build_knowledge_examples(documents, tok, max_length, phrases=extractor)
    total = trainer.max_steps * trainer.gradient_accumulation_steps
    fractions = tuple(float(f) for f in schedule_fractions)
    if len(fractions) != 3:
        raise ValueError(
            f"schedule_fractions needs 3 shares (basic, phrase, entity), got {fractions}"
        )
    batches = StagedMaskingBatches(
        examples,
        batch_size,
        schedule=MaskingSchedule(total, fractions),
        pad_id=tok.vocab_info.pad_id,
        transform=mix.collate,
        seed=seed,
    )
    logger.info(
        "ERNIE-Baidu: %d rows, %d phrase pairs", len(examples), len(getattr(extractor, "pairs", ()))
    )
    run = train_and_save(
        PretrainingModel(text, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: text.save_pretrained(final, extra_writers=[tok.save]),
    )
    return _finish(run, output_dir, len(examples))


def pretrain_ernie_thu(
    linked_corpus: str | Path | Sequence[LinkedDocument],
    *,
    entity_ids: Sequence[str],
    entity_embeddings: torch.Tensor,
    encoder: EncoderSource,
    trainer: TrainerConfig,
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
) -> PretrainResult:
    """ERNIE (Zhang et al., 2019) pre-training: MLM + NSP + dEA on a linked corpus.

    The text encoder (built, from a factory, or loaded from any checkpoint
    ``TransformerEncoder.from_pretrained`` reads, e.g. a Hugging Face BERT) is split by
    :meth:`KnowledgeableEncoder.from_text_encoder`: its last ``num_knowledge_layers``
    layers become the aggregators' token streams.

    Args:
        linked_corpus: the linked corpus or its documents.
        entity_ids, entity_embeddings: KG embeddings (``load_entity_embeddings(dir)``);
            mentions of ids outside ``entity_ids`` are ignored.
        encoder: text encoder source (``L`` layers = ``N`` T-Encoder + ``M`` aggregators).
        trainer: trainer settings.
        num_knowledge_layers: ``M``.
        entity_heads, entity_size, entity_bias_everywhere: see :class:`KnowledgeableEncoder`.
        objectives: name -> factory ``(encoder=, vocab=)`` of the text objectives
            (default MLM + NSP); a factory with ``build_examples`` is not needed: rows
            are NSP segment pairs.
        entity_objectives: name -> factory ``(encoder=, vocab=)`` needing the
            knowledgeable encoder (default ``{"dea": DenoisingEntityAutoencoderObjective}``).
        weights: name -> loss weight (default 1 each).
        entity_source: where ``entity_embeddings`` came from, named in the error when
            the corpus's mentions do not match them.
        (others as :func:`pretrain_ernie_baidu`)

    Raises:
        ValueError: no linked mention reaches a training row (counts and likely cause in
            the message; see :func:`check_mention_coverage`). Fewer than
            :data:`~ptm_knowledge.ernie.examples.MIN_MENTION_FRACTION` of them logs a
            warning.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    documents = _documents(linked_corpus)
    tok = prepare_tokenizer(
        documents, output_dir, tokenizer=tokenizer, vocab_size=vocab_size, lowercase=lowercase
    )
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
    built: dict[str, Any] = {n: f(encoder=model_encoder, vocab=vocab) for n, f in factories.items()}
    mix = ObjectiveMix(built, weights)
    nsp = next((o for o in built.values() if isinstance(o, NextSentenceObjective)), None)
    index = {entity_id: i for i, entity_id in enumerate(entity_ids)}
    examples = build_knowledge_examples(
        documents,
        tok,
        max_length,
        entity_index=index,
        segment_pairs=nsp is not None,
        rng=random.Random(derive_seed(seed, "examples")),
        random_next_prob=nsp.random_next_prob if nsp is not None else 0.5,
        short_seq_prob=nsp.short_seq_prob if nsp is not None else 0.1,
    )
    assert examples.coverage is not None  # an entity_index was given
    check_mention_coverage(examples.coverage, entity_source=entity_source, max_length=max_length)
    from ptm_core.seeding import generator_for

    generator = generator_for(seed, "static")
    prepared = [mix.prepare_example(e, generator) for e in examples]
    batches = PretrainingBatches(
        prepared, batch_size, pad_id=vocab.pad_id, transform=mix.collate, seed=seed
    )
    run = train_and_save(
        ErnieThuPretrainingModel(model_encoder, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: model_encoder.save_pretrained(
            final,
            entity_ids=entity_ids,
            extra_writers=[tok.save, lambda path: save_heads(mix, model_encoder, path)],
        ),
    )
    return _finish(run, output_dir, len(examples))
