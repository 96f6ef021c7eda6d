"""Fine-tuning from a composed ``finetune.yaml`` config: ``recipe: finetune``.

The encoder and tokenizer come from ``init_from`` (a ptm ``final/`` or a Hugging Face
directory: the checkpoint's own tokenizer is used) or, without it, from the ``model``
preset at random init with the ``tokenizer`` vocabulary. ``finetune.random_init=true``
keeps a checkpoint's architecture and tokenizer but re-initialises its weights: the
"same model without pre-training" baseline. A seq2seq ``final/`` (BART/T5, ptm or Hugging
Face) fine-tunes as a whole encoder-decoder: BART's classification head on the decoder's
last end token, or with ``finetune.text_to_text=true`` T5's label generation
(:mod:`ptm_core.finetune.seq2seq`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core import TransformerEncoder
from ptm_core.checkpoints.hf.bert_tasks import is_hf_task_directory, load_hf_task_model
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.finetune.data import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.recipe import FinetuneResult, finetune
from ptm_core.finetune.seq2seq import is_seq2seq_directory, load_seq2seq_tokenizer
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer


def load_tokenizer(path: str | Path, lowercase: bool = True) -> WordPieceTokenizer:
    """A ``vocab.txt`` file or a tokenizer directory."""
    path = Path(path)
    if path.is_file():
        return WordPieceTokenizer.from_vocab(path, lowercase=lowercase)
    return WordPieceTokenizer.from_directory(path)


def encoder_and_tokenizer(
    cfg: DictConfig,
) -> tuple[TransformerEncoder | EncoderDecoderModel, TaskTokenizer]:
    """The encoder (or encoder-decoder) to fine-tune and its tokenizer, as the config says.

    A model folder brings its own tokenizer: BERT WordPiece, or any Hugging Face
    ``tokenizer.json`` (byte-level BPE, Unigram) through :func:`load_task_tokenizer`.
    """
    init_from = cfg.get("init_from")
    random_init = bool(cfg.finetune.get("random_init", False))
    if init_from:
        directory = Path(init_from)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"init_from={init_from}: no such directory; give a final/ directory of a ptm "
                "run or a Hugging Face model directory"
            )
        if is_seq2seq_directory(directory):  # BART/T5: the whole encoder-decoder
            seq2seq = EncoderDecoderModel.from_pretrained(directory)
            if random_init:
                torch.manual_seed(int(cfg.seed))
                seq2seq = EncoderDecoderModel(seq2seq.config)
            return seq2seq, load_seq2seq_tokenizer(directory)
        tokenizer = load_task_tokenizer(directory)
        if is_hf_task_directory(directory):  # a BertFor{...} folder: its encoder, not its head
            encoder = load_hf_task_model(directory).encoder
        else:
            encoder = TransformerEncoder.from_pretrained(directory)
        if random_init:
            torch.manual_seed(int(cfg.seed))
            encoder = encoder_from_config(encoder.config)
        return encoder, tokenizer
    tokenizer = load_tokenizer(cfg.tokenizer, bool(cfg.get("lowercase", True)))
    torch.manual_seed(int(cfg.seed))
    factory = instantiate(cfg.model)
    if str(cfg.model.get("_target_", "")).endswith("build_encoder_decoder"):
        vocab = tokenizer.vocab_info  # a seq2seq preset: [PAD] pads, [CLS] starts, [SEP] ends
        return factory(
            vocab_size=tokenizer.vocab_size,
            pad_token_id=vocab.pad_id,
            bos_token_id=vocab.cls_id,
            eos_token_id=vocab.sep_id,
            decoder_start_token_id=vocab.cls_id,
        ), tokenizer
    return factory(vocab_size=tokenizer.vocab_size), tokenizer


def run(cfg: DictConfig, **trainer_overrides: Any) -> FinetuneResult:
    """Fine-tune as configured (``configs/finetune.yaml`` + ``configs/task/<name>.yaml``).

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` with
            ``config_name="finetune"``.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    task_settings = OmegaConf.to_container(cfg.task, resolve=True)
    task = TaskSpec.from_mapping(task_settings)  # type: ignore[arg-type]
    task.check_files()  # before any model is built or loaded
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    options = cfg.finetune
    init_from = cfg.get("init_from")
    if init_from and (Path(init_from) / "knowledge_config.json").is_file():
        return _finetune_ernie_thu(cfg, task, trainer)
    if init_from:
        # A family with its own task adapter (ULMFiT's classifier for an AWD-LSTM folder)
        # fine-tunes its folders through the runner.
        from flows import runner
        from ptm_core.families.registry import UnknownFamilyError

        try:
            owner = runner.family_of_folder(init_from)
        except UnknownFamilyError:  # a kind no spec claims yet (the legacy core kinds)
            owner = None
        if owner is not None and owner.has("finetune"):
            return runner.finetune(owner, cfg, **trainer_overrides)
    encoder, tokenizer = encoder_and_tokenizer(cfg)
    return finetune(
        task,
        encoder=encoder,
        tokenizer=tokenizer,
        trainer=trainer,
        seed=int(cfg.seed),
        dropout=float(options.get("dropout", 0.1)),
        feature_based=bool(options.get("feature_based", False)),
        text_to_text=bool(options.get("text_to_text", False)),
        lstm_hidden=int(options.get("lstm_hidden", 128)),
        num_workers=int(options.get("num_workers", 0)),
        provenance={
            "init_from": str(cfg.get("init_from")) if cfg.get("init_from") else None,
            "random_init": bool(options.get("random_init", False)),
        },
    )


def _finetune_ernie_thu(cfg: DictConfig, task: TaskSpec, trainer: Any) -> FinetuneResult:
    """An ERNIE-THU ``final/``: its knowledge layers fine-tune too, with the task text linked
    to ``finetune.kg`` (null: the model's own KG) at fine-tuning time
    (``finetune.use_entities=false``: the kg-free
    ablation). Without this branch the generic loader would keep only the text layers."""
    from ptm_knowledge.ernie.finetune import finetune_ernie_thu

    options = cfg.finetune
    unsupported = [
        key for key in ("random_init", "feature_based", "text_to_text") if options.get(key)
    ]
    if unsupported:
        raise ValueError(
            f"finetune.{unsupported[0]}=true is not supported for an ERNIE-THU model "
            f"({cfg.init_from}); drop it, or use ernie_finetune.use_entities=false for the "
            "kg-free ablation"
        )
    return finetune_ernie_thu(
        task,
        model_dir=cfg.init_from,
        kg=options.get("kg"),
        trainer=trainer,
        seed=int(cfg.seed),
        dropout=float(options.get("dropout", 0.1)),
        use_entities=bool(options.get("use_entities", True)),
        num_workers=int(options.get("num_workers", 0)),
        provenance={"init_from": str(cfg.init_from)},
    )
