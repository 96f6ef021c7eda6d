"""XLM pre-training: corpora -> shared BPE -> MLM streams + TLM pairs -> trainer -> encoder."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders import TransformerEncoder
from ptm_core.objectives import Objective, ObjectiveMix
from ptm_core.pretraining import keep_run_tokenizer
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save
from ptm_multilingual.batches import XLMBatches, build_mlm_streams, build_tlm_examples
from ptm_multilingual.corpora import (
    ParallelCorpus,
    read_monolingual_corpora,
    read_parallel_corpora,
)
from ptm_multilingual.evaluation import retrieval_accuracy
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.tokenizer import SharedBPETokenizer

logger = logging.getLogger(__name__)

# Batch keys XLMEncoder reads; the rest belongs to the objectives.
XLM_INPUTS = ("input_ids", "attention_mask", "position_ids", "langs")


@dataclass
class XLMPretrainingOutput:
    """Attributes: loss (0-d) and ``"<objective>/<metric>"`` scalars."""

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class XLMPretrainingModel(nn.Module):
    """An :class:`XLMEncoder` pass shared by a mix of objectives (the trainer's model).

    Args:
        encoder: the XLM encoder.
        objectives: the objective mix (normally one :class:`XLMMaskedLMObjective`).
    """

    def __init__(self, encoder: XLMEncoder, objectives: ObjectiveMix) -> None:
        super().__init__()
        self.encoder = encoder
        self.objectives = objectives

    def forward(self, batch: dict[str, Tensor]) -> XLMPretrainingOutput:
        encoded = self.encoder(**{k: batch[k] for k in XLM_INPUTS if k in batch})
        mix = self.objectives(encoded, batch)
        return XLMPretrainingOutput(loss=mix.loss, metrics=mix.metrics)

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "encoder": self.encoder.config.to_dict(),
            "languages": self.encoder.languages,
            "objectives": {name: type(obj).__name__ for name, obj in self.objectives},
        }


@dataclass
class XLMPretrainResult:
    """Outputs of :func:`pretrain_xlm`.

    Attributes:
        output_dir: run directory.
        encoder_dir: final :class:`XLMEncoder` + tokenizer (``XLMEncoder.from_pretrained``).
        tokenizer_dir: the shared tokenizer.
        metrics_path: JSON lines of training metrics.
        last_checkpoint: newest training checkpoint.
        final_metrics: last metrics record, plus ``retrieval/<pair>/...`` when evaluated.
        encoder: the trained encoder (in memory).
        tokenizer: the shared tokenizer.
    """

    output_dir: Path
    encoder_dir: Path
    tokenizer_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any]
    encoder: XLMEncoder
    tokenizer: SharedBPETokenizer


def _oriented(corpus: ParallelCorpus, directions: Sequence[str] | None) -> list[ParallelCorpus]:
    """The corpus in each requested direction (default: as stored)."""
    forward, backward = corpus.name, f"{corpus.target_lang}-{corpus.source_lang}"
    if directions is None:
        return [corpus]
    out = []
    if forward in directions:
        out.append(corpus)
    if backward in directions:
        swapped = tuple((t, s) for s, t in corpus.pairs)
        out.append(ParallelCorpus(corpus.target_lang, corpus.source_lang, swapped, corpus.source))
    return out


def pretrain_xlm(
    *,
    encoder: Callable[..., TransformerEncoder],
    objectives: Mapping[str, Callable[..., Objective]],
    trainer: TrainerConfig,
    monolingual: str | Path | Sequence[str | Path] | None = None,
    parallel: str | Path | Sequence[str | Path] | None = None,
    evaluation_parallel: str | Path | Sequence[str | Path] | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    vocab_alpha: float = 0.5,
    lowercase: bool = True,
    alpha: float = 0.5,
    stream_length: int = 64,
    max_length: int = 64,
    batch_size: int = 32,
    mlm_steps: int = 1,
    tlm_steps: int = 1,
    directions: Sequence[str] | None = None,
    batches_per_epoch: int = 100,
    seed: int = 0,
    callbacks: Sequence[object] = (),
) -> XLMPretrainResult:
    """Pre-train XLM with MLM on monolingual streams and TLM on parallel pairs.

    Args:
        encoder: factory of the text stack, called with ``vocab_size=`` (e.g.
            :func:`~ptm_multilingual.model.xlm_text_encoder`).
        objectives: name -> factory called with ``encoder=`` and ``vocab=``.
        trainer: trainer settings.
        monolingual: ``<lang>.txt`` files or directory (None: TLM only).
        parallel: parallel corpora (``*.tsv`` / aligned files; None: MLM only). Their sides
            also feed the vocabulary and, with ``mlm_steps``, the MLM streams.
        evaluation_parallel: held-out parallel corpora for retrieval accuracy at the end.
        tokenizer: a saved shared tokenizer directory; None trains BPE of ``vocab_size``.
        vocab_alpha: language smoothing of the BPE training sample.
        alpha: language smoothing of batch sampling.
        stream_length: tokens per MLM stream row.
        max_length: tokens per TLM row (both sentences).
        batch_size: rows per batch.
        mlm_steps, tlm_steps: alternation pattern of MLM and TLM batches.
        directions: TLM orders to use, e.g. ``["en-fr", "fr-en"]`` (first language first);
            default each corpus as stored.
        batches_per_epoch: length of an epoch of the sampled batch stream.
        seed: seed of sampling, masking and init.
        callbacks: trainer callbacks.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    mono = read_monolingual_corpora(monolingual) if monolingual is not None else {}
    par = read_parallel_corpora(parallel) if parallel is not None else []
    texts: dict[str, list[str]] = {lang: list(s) for lang, s in mono.items()}
    for corpus in par:
        texts.setdefault(corpus.source_lang, []).extend(s for s, _ in corpus.pairs)
        texts.setdefault(corpus.target_lang, []).extend(t for _, t in corpus.pairs)
    saved = output_dir / "tokenizer"
    if tokenizer is not None:
        tok = SharedBPETokenizer.from_directory(tokenizer)
    elif (saved / "tokenizer.json").exists():
        tok = SharedBPETokenizer.from_directory(saved)
    else:
        tok = SharedBPETokenizer.train(
            texts, vocab_size=vocab_size, alpha=vocab_alpha, lowercase=lowercase, seed=seed
        )
    keep_run_tokenizer(tok, output_dir)  # refuses to replace the tokenizer of checkpoints
    vocab = tok.vocab_info

    mlm_examples: dict[str, list[dict[str, Any]]] = {}
    mlm_counts: dict[str, int] = {}
    # MLM streams use the monolingual text (parallel sides too when there is none).
    stream_texts = mono if mono else texts
    for lang, sentences in stream_texts.items():
        mlm_examples[lang] = build_mlm_streams(
            tok.encode_batch(sentences), tok.lang_id(lang), vocab, stream_length
        )
        mlm_counts[lang] = len(sentences)
    tlm_examples: dict[str, list[dict[str, Any]]] = {}
    tlm_counts: dict[str, int] = {}
    for corpus in par:
        for oriented in _oriented(corpus, directions):
            ids = zip(
                tok.encode_batch([s for s, _ in oriented.pairs]),
                tok.encode_batch([t for _, t in oriented.pairs]),
                strict=True,
            )
            tlm_examples[oriented.name] = tlm_examples.get(oriented.name, []) + build_tlm_examples(
                list(ids),
                tok.lang_id(oriented.source_lang),
                tok.lang_id(oriented.target_lang),
                vocab,
                max_length,
            )
            tlm_counts[oriented.name] = len(tlm_examples[oriented.name])

    torch.manual_seed(derive_seed(seed, "init"))
    text_encoder = encoder(vocab_size=vocab.vocab_size)
    if max(stream_length, max_length) > text_encoder.config.max_positions:
        raise ValueError(
            f"stream_length/max_length exceed the encoder's max_positions="
            f"{text_encoder.config.max_positions}; lower them or raise max_positions"
        )
    xlm = XLMEncoder(text_encoder, tok.languages)
    mix = ObjectiveMix({name: make(encoder=xlm, vocab=vocab) for name, make in objectives.items()})
    counts = torch.zeros(vocab.vocab_size, dtype=torch.long)
    for rows in mlm_examples.values():
        for row in rows:
            counts += torch.bincount(torch.tensor(row["input_ids"]), minlength=vocab.vocab_size)
    for _, objective in mix:
        setter = getattr(objective, "set_token_counts", None)
        if setter is not None:
            setter(counts)
    batches = XLMBatches(
        mlm_examples if mlm_steps else {},
        tlm_examples if tlm_steps else {},
        batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=seed,
        alpha=alpha,
        mlm_counts=mlm_counts if mlm_steps else None,
        tlm_counts=tlm_counts if tlm_steps else None,
        mlm_steps=mlm_steps,
        tlm_steps=tlm_steps,
        batches_per_epoch=batches_per_epoch,
    )
    run = train_and_save(
        XLMPretrainingModel(xlm, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: xlm.cpu().save_pretrained(final, extra_writers=[tok.save]),
    )
    result, encoder_dir, final = run.result, run.final_dir, run.final_metrics
    xlm = xlm.cpu()
    if evaluation_parallel is not None:
        for corpus in read_parallel_corpora(evaluation_parallel):
            scores = retrieval_accuracy(
                xlm, tok, corpus.pairs, corpus.source_lang, corpus.target_lang
            )
            for key, value in scores.items():
                final[f"retrieval/{corpus.name}/{key}"] = value
    return XLMPretrainResult(
        output_dir=output_dir,
        encoder_dir=encoder_dir,
        tokenizer_dir=saved,
        metrics_path=result.metrics_path,
        last_checkpoint=result.last_checkpoint,
        final_metrics=final,
        encoder=xlm,
        tokenizer=tok,
    )
