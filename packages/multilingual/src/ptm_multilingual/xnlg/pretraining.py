"""XNLG stage 2 as a family plan: the stage-1 XLM's encoder, frozen, under a new decoder
trained with XAE + DAE (Chi et al., 2020, section 3.2).

Stage 1 is XLM itself (``ptm pretrain experiment=xlm_tlm_tiny``: MLM + TLM); its ``final/``
is this stage's ``init_from``. The corpora are prepared with that folder's tokenizer (the
same data as stage 1, as the reference does), the decoder starts from the encoder
(:meth:`XNLGModel.init_decoder_from_encoder`), the encoder is frozen
(``xnlg.freeze_encoder``), and the runner trains with the one Trainer. ``final/`` holds the
whole :class:`XNLGModel` and the tokenizer; with ``data.evaluation_parallel``, the finished
run translates the held-out pairs in both directions and reports
``translation/<l1>-<l2>/bleu`` (a check that the decoder writes the language it is told).
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
from ptm_core.pretraining import keep_run_tokenizer
from ptm_core.seeding import derive_seed
from ptm_core.training.run import TrainingRun
from ptm_multilingual.init_from import XLMStart
from ptm_multilingual.prepared_reader import PreparedXLM
from ptm_multilingual.pretraining import prepared_folder
from ptm_multilingual.tokenizer import SharedBPETokenizer
from ptm_multilingual.xnlg.data import XNLGBatches, stage2_rows
from ptm_multilingual.xnlg.generate import score_generation
from ptm_multilingual.xnlg.model import XNLGModel
from ptm_multilingual.xnlg.objective import XNLGObjective
from ptm_multilingual.xnlg.settings import XNLGSettings

logger = logging.getLogger(__name__)


@dataclass
class XNLGPretrainResult:
    """What a stage-2 run produced.

    Attributes:
        output_dir: the run folder.
        encoder_dir: ``final/`` (the whole :class:`XNLGModel` + tokenizer).
        tokenizer_dir: the run's tokenizer.
        metrics_path: JSON lines of training metrics.
        last_checkpoint: newest training checkpoint.
        final_metrics: last metrics, plus ``translation/<dir>/bleu`` when evaluated.
        model: the trained model (in memory).
        tokenizer: the shared tokenizer.
    """

    output_dir: Path
    encoder_dir: Path
    tokenizer_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any]
    model: XNLGModel
    tokenizer: SharedBPETokenizer


def build_stage2_model(
    init_from: str | Path, settings: XNLGSettings, seed: int
) -> tuple[XNLGModel, SharedBPETokenizer, XLMStart]:
    """The XNLG model around a stage-1 XLM ``final/`` (decoder started from it, encoder
    frozen as ``xnlg`` says) and its tokenizer; no training. Also the model an
    encoder-decoder "without stage 2" starts from (``benchmarks/xnlg_gain.py``)."""
    start = XLMStart.open(init_from, settings.data)
    encoder = start.encoder(start.tokenizer.languages)
    vocab = start.tokenizer.vocab_info
    torch.manual_seed(derive_seed(seed, "init"))
    options = settings.xnlg
    model = XNLGModel.from_encoder(
        encoder,
        num_layers=options.decoder_layers,
        start_id=vocab.cls_id,
        end_id=vocab.sep_id,
        pad_id=vocab.pad_id,
        init_decoder=options.init_decoder,
    )
    model.freeze_encoder(options.freeze_encoder)
    return model, start.tokenizer, start


def plan_xnlg_pretraining(run: PretrainRun) -> PretrainingPlan:
    """Stage 2: decoder pre-training with XAE + DAE on the stage-1 encoder.

    Args:
        run: ``settings`` an :class:`XNLGSettings`; ``init_from`` the stage-1 XLM
            ``final/``; ``objectives`` one ``xnlg`` factory (``configs/objective/xnlg.yaml``),
            called with ``vocab=`` and ``max_length=``.

    Raises:
        ValueError: no ``init_from``, another objective, or lengths beyond the encoder's
            positions.
    """
    settings: XNLGSettings = run.settings
    data, options = settings.data, settings.xnlg
    if not run.init_from:
        raise ValueError(
            "XNLG stage 2 starts from a stage-1 XLM (MLM + TLM): run `ptm pretrain "
            "experiment=xnlg_stage1_tiny` (or any XLM run) first, then give "
            "init_from=<its final/>"
        )
    names = list(run.objectives)
    if names != ["xnlg"]:
        raise ValueError(
            f"XNLG stage 2 trains the xnlg objective (XAE + DAE); objective.objectives has "
            f"{names}. Use objective=xnlg"
        )
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    model, tok, start = build_stage2_model(run.init_from, settings, run.seed)
    with start.tokenizer_folder() as given:
        prepared = PreparedXLM.open(prepared_folder(data, output_dir, run.seed, given))
    start.check_prepared(prepared.tokenizer, data.prepared)
    keep_run_tokenizer(tok, output_dir)
    positions = model.encoder.encoder.config.max_positions
    if data.max_length > positions:
        raise ValueError(
            f"data.max_length={data.max_length} exceeds the stage-1 encoder's max_positions="
            f"{positions}; lower data.max_length"
        )
    objective = _objective(run, tok, data.max_length)
    xae, dae = stage2_rows(prepared, options.directions)
    logger.info(
        "XNLG stage 2 from %s: XAE pairs %s, DAE sentences %s; decoder %d layers (%s), encoder %s",
        run.init_from,
        {k: len(v) for k, v in xae.items()},
        {k: len(v) for k, v in dae.items()},
        options.decoder_layers,
        "from the encoder" if options.init_decoder else "random",
        "frozen" if options.freeze_encoder else "trained",
    )
    batches = XNLGBatches(
        xae,
        dae,
        objective,
        data.batch_size,
        options.dae_fraction,
        data.batches_per_epoch,
        seed=run.seed,
    )
    mix = ObjectiveMix({"xnlg": objective}, {"xnlg": float(run.weights.get("xnlg", 1.0))})

    def finish(trained: TrainingRun) -> XNLGPretrainResult:
        final = trained.final_metrics
        network = model.cpu()
        if data.evaluation_parallel is not None:
            for corpus in read_parallel_corpora(data.evaluation_parallel):
                a, b = corpus.source_lang, corpus.target_lang
                for l1, l2, pairs in (
                    (a, b, corpus.pairs),
                    (b, a, [(t, s) for s, t in corpus.pairs]),
                ):
                    scores, _ = score_generation(
                        network, tok, pairs, l1, l2, max_source_length=data.max_length
                    )
                    final[f"translation/{l1}-{l2}/bleu"] = scores["bleu"]
        return XNLGPretrainResult(
            output_dir=output_dir,
            encoder_dir=trained.final_dir,
            tokenizer_dir=output_dir / "tokenizer",
            metrics_path=trained.result.metrics_path,
            last_checkpoint=trained.result.last_checkpoint,
            final_metrics=final,
            model=network,
            tokenizer=tok,
        )

    return PretrainingPlan(
        network=model,
        objectives=mix,
        data=batches,
        save_final=lambda final: model.cpu().save_pretrained(final, extra_writers=[tok.save]),
        finish=finish,
        callbacks=run.callbacks,
    )


def _objective(run: PretrainRun, tok: SharedBPETokenizer, max_length: int) -> XNLGObjective:
    built = run.objectives["xnlg"](vocab=tok.vocab_info, max_length=max_length)
    if not isinstance(built, XNLGObjective):
        raise ValueError(
            f"objective.objectives.xnlg built {type(built).__name__}, not XNLGObjective; "
            "use objective=xnlg"
        )
    return built


__all__ = ["XNLGPretrainResult", "build_stage2_model", "plan_xnlg_pretraining"]
