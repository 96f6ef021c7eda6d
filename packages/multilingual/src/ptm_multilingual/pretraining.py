"""XLM pre-training as a family plan: corpora -> shared BPE -> MLM streams + TLM pairs.

:func:`plan_xlm_pretraining` is the ``plan_pretraining`` hook of the ``xlm`` family
(:mod:`ptm_multilingual.families`): the runner
(:func:`ptm_core.families.runner.run_pretraining`) wraps the :class:`XLMEncoder` and the
objectives in the generic :class:`~ptm_core.models.pretraining.PretrainingModel` (batch keys
``input_ids``, ``attention_mask``, ``position_ids``, ``langs``), trains, writes ``final/``
and calls the plan's ``finish``, which scores retrieval on ``data.evaluation_parallel``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ptm_core.data.parallel_corpus import read_parallel_corpora
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives import ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import keep_run_tokenizer, save_heads
from ptm_core.seeding import derive_seed
from ptm_core.training.run import TrainingRun
from ptm_multilingual.batches import XLMBatches
from ptm_multilingual.evaluation import retrieval_accuracy
from ptm_multilingual.init_from import XLMStart
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.prepared_data import prepare_xlm
from ptm_multilingual.prepared_reader import PreparedXLM
from ptm_multilingual.settings import XLMData, XLMSettings
from ptm_multilingual.tokenizer import SharedBPETokenizer

logger = logging.getLogger(__name__)


@dataclass
class XLMPretrainResult:
    """What an XLM pre-training run produced (``plan.finish``'s result).

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


def prepared_folder(
    data: XLMData, output_dir: Path, seed: int, init_tokenizer: Path | None = None
) -> Path:
    """``data.prepared``, else the raw corpora prepared once into the cache (with the
    ``init_from`` folder's tokenizer when there is one)."""
    if data.prepared is not None:
        # A prepared folder holds its own tokenizer; the raw corpora keys are not read.
        return Path(data.prepared)
    saved = output_dir / "tokenizer"
    # A resumed run keeps its own tokenizer: the one its checkpoints were trained with.
    given: str | Path | None = init_tokenizer or data.tokenizer
    if given is None and (saved / "tokenizer.json").exists():
        given = str(saved)
    return prepare_xlm(
        data.corpus,
        data.parallel,
        tokenizer=given,
        vocab_size=data.vocab_size,
        vocab_alpha=data.vocab_alpha,
        lowercase=data.lowercase,
        tokenizer_sample=data.tokenizer_sample,
        seed=seed,
        cache_dir=data.cache_dir,
    )


def plan_xlm_pretraining(run: PretrainRun) -> PretrainingPlan:
    """XLM's plan: MLM on monolingual streams and TLM on parallel pairs, alternating.

    The corpora are read from prepared, memory-mapped token shards
    (:mod:`ptm_multilingual.prepared_data`): raw ``data.corpus``/``data.parallel`` files are
    prepared once into a cache keyed by their fingerprint (a second run reuses it), and
    MLM stream rows and TLM pair rows are built per index when a batch draws them, so
    memory does not grow with the corpora. The batches of a seed equal those of the
    in-memory builders (:func:`build_mlm_streams`, :func:`build_tlm_examples`).

    Args:
        run: ``settings`` an :class:`XLMSettings`; ``model`` a factory of the text stack
            called with ``vocab_size=`` (e.g. :func:`~ptm_multilingual.model.xlm_text_encoder`);
            ``objectives`` factories built with
            :func:`~ptm_core.objectives.inputs.build_objective` from the XLM encoder.

    Raises:
        ValueError: ``data.stream_length``/``data.max_length`` exceed the encoder's
            ``max_positions``, the config has neither ``model`` nor ``init_from``, or the
            ``init_from`` folder cannot start XLM (:class:`~ptm_multilingual.init_from.XLMStart`).
    """
    settings: XLMSettings = run.settings
    data = settings.data
    start = XLMStart.open(run.init_from, data) if run.init_from else None
    if run.model is None and start is None:
        raise ValueError("XLM pre-training needs a model node (model=xlm_tiny) or init_from")
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    if start is None:
        prepared = PreparedXLM.open(prepared_folder(data, output_dir, run.seed))
    else:
        with start.tokenizer_folder() as given:
            prepared = PreparedXLM.open(prepared_folder(data, output_dir, run.seed, given))
        start.check_prepared(prepared.tokenizer, data.prepared)
    tok = prepared.tokenizer
    keep_run_tokenizer(tok, output_dir)  # refuses to replace the tokenizer of checkpoints
    vocab = tok.vocab_info
    mlm_examples = prepared.mlm_rows(data.stream_length)
    mlm_counts = prepared.mlm_counts()
    tlm_examples = prepared.tlm_rows(data.max_length, data.directions)
    tlm_counts = {name: len(rows) for name, rows in tlm_examples.items()}
    logger.info(
        "XLM data %s: MLM rows %s, TLM rows %s",
        prepared.directory,
        {k: len(v) for k, v in mlm_examples.items()},
        tlm_counts,
    )

    torch.manual_seed(derive_seed(run.seed, "init"))
    if start is None:
        assert run.model is not None
        xlm = XLMEncoder(run.model(vocab_size=vocab.vocab_size), tok.languages)
    else:
        xlm = start.encoder(tok.languages)
        config = xlm.encoder.config
        logger.info(
            "init_from=%s: the encoder is the folder's (%d layers x %d, vocabulary %d); "
            "the model preset's sizes are not used",
            run.init_from,
            config.num_layers,
            config.hidden_size,
            config.vocab_size,
        )
    positions = xlm.encoder.config.max_positions
    if max(data.stream_length, data.max_length) > positions:
        raise ValueError(
            f"data.stream_length/data.max_length exceed the encoder's max_positions="
            f"{positions}; lower them or raise model.max_positions"
        )
    mix = ObjectiveMix(
        {name: build_objective(make, xlm, vocab) for name, make in run.objectives.items()},
        run.weights,
    )
    if start is not None:
        start.load_heads(mix, xlm)
    counts = prepared.token_counts(data.stream_length)
    for _, objective in mix:
        setter = getattr(objective, "set_token_counts", None)
        if setter is not None:
            setter(counts)
    batches = XLMBatches(
        mlm_examples if data.mlm_steps else {},
        tlm_examples if data.tlm_steps else {},
        data.batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=run.seed,
        alpha=data.alpha,
        mlm_counts=mlm_counts if data.mlm_steps else None,
        tlm_counts=tlm_counts if data.tlm_steps else None,
        mlm_steps=data.mlm_steps,
        tlm_steps=data.tlm_steps,
        batches_per_epoch=data.batches_per_epoch,
    )

    def finish(trained: TrainingRun) -> XLMPretrainResult:
        final = trained.final_metrics
        encoder = xlm.cpu()
        if data.evaluation_parallel is not None:
            for corpus in read_parallel_corpora(data.evaluation_parallel):
                scores = retrieval_accuracy(
                    encoder, tok, corpus.pairs, corpus.source_lang, corpus.target_lang
                )
                for key, value in scores.items():
                    final[f"retrieval/{corpus.name}/{key}"] = value
        return XLMPretrainResult(
            output_dir=output_dir,
            encoder_dir=trained.final_dir,
            tokenizer_dir=output_dir / "tokenizer",
            metrics_path=trained.result.metrics_path,
            last_checkpoint=trained.result.last_checkpoint,
            final_metrics=final,
            encoder=encoder,
            tokenizer=tok,
        )

    return PretrainingPlan(
        network=xlm,
        objectives=mix,
        data=batches,
        # heads.safetensors keeps the MLM output bias (its weight is the tied token table),
        # so `ptm export` can write an XLMWithLMHeadModel with the trained MLM logits.
        save_final=lambda final: xlm.cpu().save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix.cpu(), xlm, path)]
        ),
        finish=finish,
    )


__all__ = ["XLMPretrainResult", "plan_xlm_pretraining"]
