"""SentiLARE pre-training: the ``sentilr`` family's plan hook.

A labelled corpus is read, annotated once (POS + polarity per word, with progress lines),
and batched; the network is a core encoder (the ``model`` preset, or ``init_from``: a core
``final/``, a Hugging Face BERT, or a SentiLARE folder) with the knowledge tables; the
objective is the label-aware MLM. ``final/`` is a ``sentilr`` folder with the tokenizer
and ``heads.safetensors``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from ptm_core.data.batches import PretrainingBatches
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.model_kinds import read_model_kind
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.pretraining import (
    PretrainResult,
    load_init_heads,
    prepare_tokenizer,
    save_heads,
)
from ptm_core.seeding import derive_seed
from ptm_text.families import SENTILR_KIND
from ptm_text.sentilr.checkpoint import load_sentilr, save_sentilr
from ptm_text.sentilr.data import LabelledExamples, label_names, read_labelled_corpus
from ptm_text.sentilr.knowledge import KnowledgeAnnotator
from ptm_text.sentilr.model import SentiLRKnowledgeEmbeddings, SentiLRModel
from ptm_text.sentilr.objective import LabelAwareMLMObjective
from ptm_text.sentilr.settings import SentiLROptions, SentiLRSettings

logger = logging.getLogger(__name__)


def annotator_from(options: SentiLROptions | dict[str, Any]) -> KnowledgeAnnotator:
    """The annotator a ``sentilr`` block (or a saved record) names."""
    get = options.get if isinstance(options, dict) else lambda k, d=None: getattr(options, k, d)
    return KnowledgeAnnotator(
        pos_pipeline=get("pos_pipeline"),
        wordnet_dir=get("wordnet_dir"),
        polarity_threshold=float(get("polarity_threshold", 0.0)),
    )


def plan_sentilr(run: PretrainRun) -> PretrainingPlan:
    """The ``sentilr`` family's plan (``run.settings``: :class:`SentiLRSettings`)."""
    settings: SentiLRSettings = run.settings
    data = settings.data
    if data.corpus is None:
        raise ValueError(
            "sentilr needs a labelled corpus: data.corpus=<.jsonl or .tsv with text and "
            "label fields> (experiment=sentilr_tiny uses the bundled review sample)"
        )
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    corpus = data.corpus if isinstance(data.corpus, (str, Path)) else list(data.corpus)
    texts = read_labelled_corpus(corpus, text_field=data.text_field, label_field=data.label_field)
    labels = label_names(texts, data.labels)
    init = _init_folder(run.init_from)
    tokenizer = prepare_tokenizer(
        [SimpleNamespace(sentences=[row.text]) for row in texts],
        output_dir,
        tokenizer=_tokenizer_source(data.tokenizer, run.init_from),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
    )
    vocab = tokenizer.vocab_info
    annotator = annotator_from(settings.sentilr)
    logger.info(
        "sentilr: %d labelled texts, labels %s; POS from %s, polarity from %s",
        len(texts), labels, annotator.sources["pos"], annotator.sources["polarity"],
    )  # fmt: skip
    examples = LabelledExamples(texts, labels, tokenizer, annotator, data.max_length)
    stats = examples.statistics()
    logger.info(
        "sentilr: %d pieces, %.1f%% of word pieces polar, %.1f%% tagged other",
        stats["pieces"], 100 * stats["polar_piece_share"], 100 * stats["other_pos_share"],
    )  # fmt: skip
    record = {
        "labels": labels,
        "text_field": data.text_field,
        "label_field": data.label_field,
        "pos_pipeline": settings.sentilr.pos_pipeline,
        "wordnet_dir": settings.sentilr.wordnet_dir,
        "polarity_threshold": settings.sentilr.polarity_threshold,
        "sources": annotator.sources,
    }
    torch.manual_seed(derive_seed(run.seed, "init"))
    network = _network(run, init, vocab.vocab_size, len(labels), record)
    if data.max_length > network.encoder.config.max_positions:
        raise ValueError(
            f"data.max_length={data.max_length} exceeds the encoder's max_positions="
            f"{network.encoder.config.max_positions}; lower data.max_length"
        )
    mix = ObjectiveMix(
        {
            name: build_objective(make, network, vocab, knowledge=network.knowledge)
            for name, make in run.objectives.items()
        },
        dict(run.weights),
    )
    if not any(isinstance(o, LabelAwareMLMObjective) for _, o in mix):
        raise ValueError(
            "family sentilr trains the label-aware MLM: use objective=sentilr "
            "(ptm_text.sentilr.LabelAwareMLMObjective)"
        )
    if init is not None:
        load_init_heads(mix, init)
    batches = PretrainingBatches(
        examples,
        data.batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    heads = lambda path: save_heads(mix, network, path)  # noqa: E731
    return PretrainingPlan(
        network=network,
        objectives=mix,
        data=batches,
        save_final=lambda final: save_sentilr(
            network, final, record=record, extra_writers=[tokenizer.save, heads]
        ),
        finish=lambda trained: PretrainResult.of_run(trained, output_dir, len(examples)),
        callbacks=run.callbacks,
    )


def _init_folder(init_from: str | None) -> Path | None:
    if init_from is None:
        return None
    folder = Path(init_from)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"init_from={init_from}: no such folder; give a final/ of a ptm run or a Hugging "
            "Face BERT folder"
        )
    return folder


def _tokenizer_source(given: str | None, init_from: str | None) -> str | Path | None:
    if init_from is None:
        return given
    from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory

    own = find_tokenizer_directory(init_from)
    if own is not None and given:
        logger.info("init_from=%s has its own tokenizer; it replaces data.tokenizer", init_from)
    return own or given


def _network(
    run: PretrainRun, init: Path | None, vocab_size: int, num_labels: int, record: dict[str, Any]
) -> SentiLRModel:
    if init is not None and read_model_kind(init) == SENTILR_KIND:
        network = load_sentilr(init)
        if network.knowledge.num_labels != num_labels:
            raise ValueError(
                f"init_from={init} was pre-trained with {network.knowledge.num_labels} labels, "
                f"this corpus has {num_labels}; set data.labels to that folder's "
                f"{network.record.get('labels')}"
            )
        network.record = record
        return network
    if init is not None:
        encoder = TransformerEncoder.from_pretrained(init)
    elif run.model is None:
        raise ValueError("no model: give a model preset (model=bert_tiny) or init_from=<final/>")
    else:
        encoder = run.model(vocab_size=vocab_size)
    if encoder.config.vocab_size != vocab_size:
        raise ValueError(
            f"the encoder has {encoder.config.vocab_size} token ids but the tokenizer "
            f"{vocab_size}; leave data.tokenizer unset with init_from (its own is used)"
        )
    width = encoder.config.embedding_size or encoder.config.hidden_size
    return SentiLRModel(encoder, SentiLRKnowledgeEmbeddings(width, num_labels), record)
