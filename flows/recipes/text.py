"""Text pre-training (BERT family) from a composed config: ``recipe: text``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.pretraining import RUN_TOKENIZER, PretrainResult, pretrain

logger = logging.getLogger(__name__)


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Instantiate the configured encoder, objectives and trainer, and pre-train.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config`.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    objectives = {name: instantiate(node) for name, node in cfg.objective.objectives.items()}
    weights = OmegaConf.to_container(cfg.objective.get("weights", {}), resolve=True)
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    prepared = data.get("prepared")
    init_from = cfg.get("init_from")
    tokenizer = None if prepared else data.tokenizer
    if init_from and tokenizer and find_tokenizer_directory(init_from) is not None:
        # The checkpoint's token table is indexed by its own tokenizer's ids: the data
        # preset's tokenizer (data.tokenizer has a default) would not fit it.
        logger.info(
            "init_from=%s has its own tokenizer; it replaces data.tokenizer=%s",
            init_from,
            tokenizer,
        )
        tokenizer = None
    encoder = instantiate(cfg.model)
    init_embeddings = cfg.get("init_embeddings")
    if init_embeddings and init_from:
        raise ValueError(
            f"init_embeddings={init_embeddings} and init_from={init_from} are both set: the "
            "init_from checkpoint already has trained token embeddings; drop one of them"
        )
    if init_embeddings:
        encoder = with_static_embeddings(
            encoder, init_embeddings, Path(trainer.output_dir) / RUN_TOKENIZER
        )
    return pretrain(
        None if prepared else data.corpus,
        prepared=prepared,
        encoder=encoder,
        objectives=objectives,
        weights=weights,  # type: ignore[arg-type]
        trainer=trainer,
        tokenizer=tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        pack=data.get("pack", False),
        seed=cfg.seed,
        init_from=init_from,
        num_workers=data.get("num_workers", 0),
        cache_dir=data.get("cache_dir"),
    )


def with_static_embeddings(
    factory: Callable[..., TransformerEncoder], table_dir: str | Path, tokenizer_dir: Path
) -> Callable[..., TransformerEncoder]:
    """Wrap an encoder factory so that its token embeddings start from a static vector table.

    ``init_embeddings=<dir>`` (a ``final/`` of ``experiment=word2vec_tiny``, ``glove_tiny`` or
    ``nnlm_tiny``): once the run's tokenizer is saved in ``tokenizer_dir`` (``pretrain`` does
    that before it builds the encoder), every token the table holds (as written, else
    lower-cased) gets its vector; the coverage is logged. The table's ``dim`` must equal the
    encoder's embedding size.
    """
    from ptm_classic.static.vectors import VectorTable, init_token_embeddings
    from ptm_core.tokenization import WordPieceTokenizer

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
