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
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import keep_run_tokenizer, save_heads
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save
from ptm_multilingual.batches import XLMBatches
from ptm_multilingual.corpora import read_parallel_corpora
from ptm_multilingual.evaluation import retrieval_accuracy
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.prepared_data import DEFAULT_SHARD_TOKENS, PreparedXLM, prepare_xlm
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
            "encoder": self.encoder.text_config.to_dict(),
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
    prepared: str | Path | None = None,
    cache_dir: str | Path | None = None,
    tokenizer_sample: int | None = None,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
) -> XLMPretrainResult:
    """Pre-train XLM with MLM on monolingual streams and TLM on parallel pairs.

    The corpora are read from prepared, memory-mapped token shards
    (:mod:`ptm_multilingual.prepared_data`): raw ``monolingual``/``parallel`` files are
    prepared once into a cache keyed by their fingerprint (a second run reuses it), and
    MLM stream rows and TLM pair rows are built per index when a batch draws them, so
    memory does not grow with the corpora. The batches of a seed equal those of the
    in-memory builders (:func:`build_mlm_streams`, :func:`build_tlm_examples`).

    Args:
        encoder: factory of the text stack, called with ``vocab_size=`` (e.g.
            :func:`~ptm_multilingual.model.xlm_text_encoder`).
        objectives: name -> factory, built with
            :func:`~ptm_core.objectives.inputs.build_objective` from the encoder.
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
        seed: seed of sampling, masking, init and the BPE sample.
        callbacks: trainer callbacks.
        prepared: a folder :func:`prepare_xlm` wrote (instead of the raw corpora).
        cache_dir: where raw corpora are prepared (default core's ``default_cache_dir()``).
        tokenizer_sample: sentences in the BPE training sample (default all, at most
            ``DEFAULT_SAMPLE_SENTENCES``).
        shard_tokens: tokens per shard file of the prepared corpora.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    saved = output_dir / "tokenizer"
    if prepared is None:
        # A resumed run keeps its own tokenizer: the one its checkpoints were trained with.
        given = tokenizer
        if given is None and (saved / "tokenizer.json").exists():
            given = saved
        prepared = prepare_xlm(
            monolingual,
            parallel,
            tokenizer=given,
            vocab_size=vocab_size,
            vocab_alpha=vocab_alpha,
            lowercase=lowercase,
            tokenizer_sample=tokenizer_sample,
            seed=seed,
            cache_dir=cache_dir,
            shard_tokens=shard_tokens,
        )
    elif monolingual is not None or parallel is not None or tokenizer is not None:
        raise ValueError(
            "give either prepared= or the raw corpora (monolingual=/parallel=, tokenizer=), "
            "not both: a prepared folder holds its own tokenizer"
        )
    data = PreparedXLM.open(prepared)
    tok = data.tokenizer
    keep_run_tokenizer(tok, output_dir)  # refuses to replace the tokenizer of checkpoints
    vocab = tok.vocab_info
    mlm_examples = data.mlm_rows(stream_length)
    mlm_counts = data.mlm_counts()
    tlm_examples = data.tlm_rows(max_length, directions)
    tlm_counts = {name: len(rows) for name, rows in tlm_examples.items()}
    logger.info(
        "XLM data %s: MLM rows %s, TLM rows %s",
        data.directory,
        {k: len(v) for k, v in mlm_examples.items()},
        tlm_counts,
    )

    torch.manual_seed(derive_seed(seed, "init"))
    text_encoder = encoder(vocab_size=vocab.vocab_size)
    if max(stream_length, max_length) > text_encoder.config.max_positions:
        raise ValueError(
            f"stream_length/max_length exceed the encoder's max_positions="
            f"{text_encoder.config.max_positions}; lower them or raise max_positions"
        )
    xlm = XLMEncoder(text_encoder, tok.languages)
    mix = ObjectiveMix(
        {name: build_objective(make, xlm, vocab) for name, make in objectives.items()}
    )
    counts = data.token_counts(stream_length)
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
        # heads.safetensors keeps the MLM output bias (its weight is the tied token table),
        # so `ptm export` can write an XLMWithLMHeadModel with the trained MLM logits.
        save_final=lambda final: xlm.cpu().save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix.cpu(), xlm, path)]
        ),
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
