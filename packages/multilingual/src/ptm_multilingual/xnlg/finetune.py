"""XNLG fine-tuning on generation in one language, then generation in every language.

The reference's zero-shot recipe (``xnlg-ft.py --train_layers 1,10``, README "Training for
Zero-Shot QG"): fine-tune on ``train_lang`` only, updating the encoder's Transformer
layers (``xnlg_finetune.train=encoder_layers``) while the token/position/language tables
and the decoder stay as stage 2 left them, so the decoder still writes every language of
stage 2; then generate for each dev language with that language's id given to the decoder.
Scores are BLEU (sacrebleu) and ROUGE-1/2/L (rouge-score) against the dev references
(``dev/<lang>/bleu``, ... in ``eval.json``), and the generated texts go to
``generations/<lang>.txt``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.families.runner import FinetuneRun
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.seq2seq_pretraining import Seq2SeqBatches
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save
from ptm_multilingual.language_tsv import read_two_column_tsv
from ptm_multilingual.tokenizer import SharedBPETokenizer
from ptm_multilingual.xnlg.generate import score_generation
from ptm_multilingual.xnlg.model import XNLGModel
from ptm_multilingual.xnlg.objective import XNLGObjective, XNLGRow
from ptm_multilingual.xnlg.settings import TRAIN_PARTS, XNLGFinetune, XNLGSettings

#: The batch keys :meth:`XNLGModel.forward` reads (the family's ``input_keys``).
XNLG_INPUTS = (
    "input_ids",
    "attention_mask",
    "langs",
    "decoder_input_ids",
    "decoder_attention_mask",
    "decoder_langs",
)
EVAL_FILE = "eval.json"
TASK_FILE = "xnlg_task.json"


@dataclass
class XNLGFinetuneResult:
    """Where :func:`finetune_generation` put its outputs.

    Attributes:
        output_dir: the run folder.
        metrics_path: its ``metrics.jsonl``.
        last_checkpoint: the newest checkpoint.
        encoder_dir: ``final/`` (an XNLG folder: ``XNLGModel.from_pretrained``).
        final_metrics: last training metrics plus ``dev/<lang>/{bleu,rouge1,rouge2,rougeL}``.
        generations: language -> generated texts of its dev set.
    """

    output_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    encoder_dir: Path
    final_metrics: dict[str, Any] = field(default_factory=dict)
    generations: dict[str, list[str]] = field(default_factory=dict)


def read_generation_tsv(path: str | Path) -> list[tuple[str, str]]:
    """``source<TAB>target`` lines (no header) -> ``[(source, target)]``.

    Raises:
        DataError: ``file:line`` and the field of the first bad line.
    """
    return [(a, b) for a, b, _ in read_two_column_tsv(path, ("source", "target"))]


def set_trainable(model: XNLGModel, part: str) -> None:
    """Which parameters fine-tuning updates (``xnlg_finetune.train``).

    Raises:
        ValueError: an unknown part (the message lists the valid ones).
    """
    if part not in TRAIN_PARTS:
        raise ValueError(f"xnlg_finetune.train={part!r}; use one of {', '.join(TRAIN_PARTS)}")
    for parameter in model.parameters():
        parameter.requires_grad_(part == "all")
    parts: dict[str, list[torch.nn.Module]] = {
        "encoder_layers": [model.encoder.encoder.layers],
        "encoder": [model.encoder],
        "decoder": [model.decoder, model.lang_embeddings, model.head],
        "all": [],
    }
    chosen = parts[part]
    for module in chosen:
        for parameter in module.parameters():
            parameter.requires_grad_(True)


def finetune_generation(
    model: XNLGModel,
    tokenizer: SharedBPETokenizer,
    options: XNLGFinetune,
    trainer: TrainerConfig,
    *,
    seed: int = 0,
    provenance: dict[str, Any] | None = None,
) -> XNLGFinetuneResult:
    """Fine-tune ``model`` on ``options.train_file`` and score every dev language.

    Args:
        model: an XNLG model (stage 2's ``final/``, or one built without stage 2).
        tokenizer: its shared tokenizer.
        options: the ``xnlg_finetune`` block.
        trainer: trainer settings (``output_dir`` is the run folder).
        seed: batch order seed.
        provenance: JSON-ready facts kept in ``final/xnlg_task.json``.

    Raises:
        ValueError: no training file, a language the model does not know, or lengths
            beyond its positions.
    """
    if options.train_file is None:
        raise ValueError(
            "xnlg_finetune.train_file is not set; give a source<TAB>target file in "
            "xnlg_finetune.train_lang (experiment=xnlg_zero_shot sets a generated one)"
        )
    for lang in [options.train_lang, *options.dev]:
        model.lang_id(lang)  # raises, naming the model's languages
    positions = model.config.max_positions
    if max(options.max_source_length, options.max_target_length) > positions:
        raise ValueError(
            f"xnlg_finetune.max_source_length/max_target_length exceed the model's "
            f"max_positions={positions}; lower them"
        )
    train_pairs = read_generation_tsv(options.train_file)
    dev_pairs = {lang: read_generation_tsv(path) for lang, path in options.dev.items()}
    lang_id = tokenizer.lang_id(options.train_lang)
    rows = [
        XNLGRow(s, t, lang_id, lang_id, False)
        for s, t in zip(
            tokenizer.encode_batch([s for s, _ in train_pairs]),
            tokenizer.encode_batch([t for _, t in train_pairs]),
            strict=True,
        )
    ]
    objective = XNLGObjective(
        tokenizer.vocab_info,
        max_length=max(options.max_source_length, options.max_target_length),
        word_shuffle=0.0,
        word_dropout=0.0,
        word_blank=0.0,
    )
    set_trainable(model, options.train)
    wrapped = PretrainingModel(model, ObjectiveMix({"generation": objective}), XNLG_INPUTS)
    batches = Seq2SeqBatches(cast(Any, rows), objective, options.batch_size, seed)
    record = {
        "train": {"file": str(options.train_file), "lang": options.train_lang},
        "dev": dict(options.dev),
        "trained": options.train,
        **({"provenance": provenance} if provenance else {}),
    }

    def save_final(directory: Path) -> None:
        def write_record(path: Path) -> None:
            atomic_write_text(path / TASK_FILE, json.dumps(record, indent=2) + "\n")

        model.cpu().save_pretrained(directory, extra_writers=[tokenizer.save, write_record])

    run = train_and_save(wrapped, batches, trainer, save_final=save_final)
    model.cpu().eval()
    final_metrics = dict(run.final_metrics)
    generations: dict[str, list[str]] = {}
    output_dir = run.result.output_dir
    for dev_lang, pairs in dev_pairs.items():
        scores, texts = score_generation(
            model,
            tokenizer,
            pairs,
            dev_lang,
            dev_lang,
            max_source_length=options.max_source_length,
            max_length=options.max_target_length,
            num_beams=options.num_beams,
            batch_size=options.eval_batch_size,
            bleu_tokenize=options.bleu_tokenize,
            bleu_max_order=options.bleu_max_order,
        )
        final_metrics.update({f"dev/{dev_lang}/{k}": v for k, v in scores.items()})
        generations[dev_lang] = texts
        atomic_write_text(
            output_dir / "generations" / f"{dev_lang}.txt", "".join(t + "\n" for t in texts)
        )
    atomic_write_text(output_dir / EVAL_FILE, json.dumps(final_metrics, indent=2) + "\n")
    return XNLGFinetuneResult(
        output_dir=output_dir,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        encoder_dir=run.final_dir,
        final_metrics=final_metrics,
        generations=generations,
    )


def finetune_xnlg(run: FinetuneRun) -> XNLGFinetuneResult:
    """The ``xnlg`` family's ``finetune`` hook: ``init_from`` is a stage-2 ``final/``.

    Raises:
        FileNotFoundError: ``init_from`` is not given or not a folder.
    """
    init_from = run.init_from
    if not init_from or not Path(init_from).is_dir():
        raise FileNotFoundError(
            f"init_from={init_from}: experiment=xnlg_zero_shot fine-tunes an XNLG model; give "
            "init_from=<final/ of ptm pretrain experiment=xnlg_tiny>"
        )
    settings: XNLGSettings = run.settings
    model = XNLGModel.from_pretrained(init_from)
    tokenizer = SharedBPETokenizer.from_directory(init_from)
    torch.manual_seed(run.seed)
    return finetune_generation(
        model,
        tokenizer,
        settings.xnlg_finetune,
        run.trainer,
        seed=run.seed,
        provenance={"init_from": str(init_from), "experiment": str(settings.experiment_name)},
    )


__all__ = [
    "XNLG_INPUTS",
    "XNLGFinetuneResult",
    "finetune_generation",
    "finetune_xnlg",
    "read_generation_tsv",
    "set_trainable",
]
