"""Export a ptm ``final/`` folder as a complete Hugging Face model folder.

``ptm pretrain`` writes an encoder ``final/`` (``config.json`` with ``ptm_format``, the
weights with ptm's names, the objectives' heads in ``heads.safetensors`` and the
tokenizer); ``ptm finetune`` adds ``task.json`` and ``task_head.safetensors``; the
encoder-decoder families write ``ptm_model: encoder_decoder`` and ``tokenizer/``.
:func:`export_hf` turns any of them into the folder ``transformers`` expects: weights with
the heads under Hugging Face's names, a ``config.json`` whose ``architectures`` names the
class that holds those heads, and the tokenizer files of
:mod:`~ptm_core.checkpoints.hf.tokenizer_files`.

=================  ==============================  ===================================
ptm folder         Hugging Face class              ``transformers`` auto class
=================  ==============================  ===================================
BERT layout        ``BertForPreTraining`` (MLM +   ``AutoModelForMaskedLM``,
(bert, roberta,    NSP), ``BertForMaskedLM``       ``AutoModelForPreTraining``
spanbert, ...)     (MLM only), ``BertModel``
ALBERT             ``AlbertForPreTraining``        ``AutoModelForMaskedLM``
ELECTRA            ``ElectraForPreTraining``       ``AutoModelForPreTraining``
                   (discriminator), or            ``AutoModelForMaskedLM``
                   ``ElectraForMaskedLM`` (MLM)
XLNet              ``XLNetLMHeadModel``            ``AutoModelForCausalLM``
imported from      ``RobertaForMaskedLM``,         ``AutoModelForMaskedLM``
RoBERTa, XLM-R,    ``XLMRobertaForMaskedLM``,
DistilBERT         ``DistilBertForMaskedLM``
BART               ``BartForConditionalGeneration``  ``AutoModelForSeq2SeqLM``
T5                 ``T5ForConditionalGeneration``    ``AutoModelForSeq2SeqLM``
fine-tuned         ``{Bert,Albert,Electra,XLNet,Roberta,XLMRoberta,DistilBert}For{
                   SequenceClassification, TokenClassification, QuestionAnswering,
                   MultipleChoice}`` (``id2label``/``label2id``;
                   :mod:`~ptm_core.checkpoints.hf.task_heads`)
=================  ===================================================================

An ELECTRA pre-training run's generator (a narrower encoder on the discriminator's
embeddings, with its MLM head) is written beside the discriminator as an
``ElectraForMaskedLM`` folder, ``<out>/generator/`` (:attr:`HFExport.also`). Heads without
a Hugging Face counterpart (SpanBERT's SBO, ...) are left out and named in
:attr:`HFExport.skipped`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors.torch import load_file, save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import registry
from ptm_core.checkpoints.hf import electra as electra_hf
from ptm_core.checkpoints.hf.bert import check_bert_layout, encoder_config_to_hf, ptm_to_hf_bert
from ptm_core.checkpoints.hf.formats import default_hf_format
from ptm_core.checkpoints.hf.knowledge_export import (
    FLAG,
    NOTE_FILE,
    head_names,
    is_ernie_thu,
    knowledge_left_out,
    note,
    refusal,
)
from ptm_core.checkpoints.hf.pretraining_heads import take_head_group
from ptm_core.checkpoints.hf.tokenizer_files import (
    HF_TOKENIZER_FILES,
    find_tokenizer_directory,
    write_hf_tokenizer_files,
)
from ptm_core.checkpoints.io import CheckpointError, read_json_object

if TYPE_CHECKING:
    from ptm_core.encoders.transformer import TransformerEncoder
    from ptm_core.tokenization import WordPieceTokenizer

HEADS_FILE = "heads.safetensors"
# Files of non-WordPiece Hugging Face tokenizers, copied beside HF_TOKENIZER_FILES.
_COPIED_TOKENIZER_FILES = ("vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model")
TASK_JSON = "task.json"

# What ``ptm export --format hf`` accepts, for the error message of anything else.
SUPPORTED_KINDS = (
    "a ptm pretrain final/ of a BERT-layout encoder (bert, roberta, spanbert, ...), ALBERT, "
    "ELECTRA or XLNet",
    "a BART or T5 pretrain final/ (ptm_model: encoder_decoder)",
    "a ptm finetune final/ (task.json) on a BERT, ALBERT, ELECTRA or XLNet encoder, or one "
    "imported from RoBERTa, XLM-R or DistilBERT",
)

_MLM_NAMES = {  # ptm MaskedLMHead -> BERT's cls.predictions
    "head.dense.weight": "cls.predictions.transform.dense.weight",
    "head.dense.bias": "cls.predictions.transform.dense.bias",
    "head.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "head.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "head.decoder.bias": "cls.predictions.bias",
}
_PAIR_NAMES = {  # ptm SentencePairHead -> BERT's pooler + NSP classifier
    "head.pooler.dense.weight": "bert.pooler.dense.weight",
    "head.pooler.dense.bias": "bert.pooler.dense.bias",
    "head.classifier.weight": "cls.seq_relationship.weight",
    "head.classifier.bias": "cls.seq_relationship.bias",
}
_ALBERT_MLM_NAMES = {
    "head.dense.weight": "predictions.dense.weight",
    "head.dense.bias": "predictions.dense.bias",
    "head.norm.weight": "predictions.LayerNorm.weight",
    "head.norm.bias": "predictions.LayerNorm.bias",
    "head.decoder.bias": "predictions.bias",
}
_ALBERT_SOP_NAMES = {
    "head.pooler.dense.weight": "albert.pooler.weight",
    "head.pooler.dense.bias": "albert.pooler.bias",
    "head.classifier.weight": "sop_classifier.classifier.weight",
    "head.classifier.bias": "sop_classifier.classifier.bias",
}
_ELECTRA_NAMES = {
    "discriminator_head.dense.weight": "discriminator_predictions.dense.weight",
    "discriminator_head.dense.bias": "discriminator_predictions.dense.bias",
    "discriminator_head.prediction.weight": "discriminator_predictions.dense_prediction.weight",
    "discriminator_head.prediction.bias": "discriminator_predictions.dense_prediction.bias",
}
_ELECTRA_MLM_NAMES = {  # an MLM on an ELECTRA encoder: ElectraForMaskedLM (a generator)
    f"head.{ours}": theirs for ours, theirs in electra_hf.GENERATOR_NAMES.items()
}
_XLNET_NAMES = {"output_bias": "lm_loss.bias"}


@dataclass
class HFExport:
    """What :func:`export_hf` wrote.

    Attributes:
        directory: the Hugging Face folder.
        family: ``bert``, ``albert``, ``electra``, ``xlnet``, ``roberta``,
            ``xlm-roberta``, ``distilbert``, ``bart`` or ``t5``.
        architecture: the ``transformers`` class in ``config.json``'s ``architectures``.
        auto_class: the ``transformers`` auto class that loads it with its heads.
        heads: the ptm objectives (or task head) whose weights were exported.
        skipped: objectives whose heads have no Hugging Face counterpart (not written).
        also: other models written in subfolders, folder -> ``transformers`` class (an
            ELECTRA run's generator: ``{"generator": "ElectraForMaskedLM"}``); each gets
            the tokenizer files too.
    """

    directory: Path
    family: str
    architecture: str
    auto_class: str
    heads: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    also: dict[str, str] = field(default_factory=dict)


def _unsupported(source: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"{source}: {what}, which has no Hugging Face counterpart ptm can export. "
        "Supported: " + "; ".join(SUPPORTED_KINDS)
    )


def export_hf(
    source: str | Path,
    target: str | Path,
    *,
    text_layers_only: bool = False,
    peft_adapter: bool = False,
) -> HFExport:
    """Write ``source`` (a ptm ``final/``) as a Hugging Face folder at ``target``, atomically.

    ``transformers`` loads the result with ``AutoModelFor...`` (see the module table) and
    ``AutoTokenizer``; both give the same outputs and token ids as ptm on the same input.

    Args:
        source: a ``final/`` written by ``ptm pretrain`` or ``ptm finetune``.
        target: the folder to write (replaced as a whole if it exists).
        text_layers_only: for an ERNIE-THU ``final/`` (refused without it): export only
            its T-Encoder's text layers as a ``BertModel``, with a note
            (:data:`~ptm_core.checkpoints.hf.knowledge_export.NOTE_FILE`) of what was left
            out. Refused for any other folder.
        peft_adapter: for a ``finetune.peft=lora|ia3`` ``final/``: keep the adapter apart,
            as a ``peft`` adapter folder in ``<target>/adapter``, instead of merging it into
            the weights (:mod:`ptm_core.checkpoints.hf.peft_export`). Refused for any other
            folder.

    Returns:
        :class:`HFExport`.

    Raises:
        CheckpointError: ``source`` is not a ptm ``final/``, or its family or head has no
            Hugging Face counterpart (the message names the folder and the supported kinds).
    """
    source = Path(source)
    if not source.is_dir():
        raise CheckpointError(
            f"{source}: no such folder; give the final/ folder that ptm pretrain or ptm "
            "finetune wrote (e.g. runs/demo/pretrain/final)"
        )
    raw = read_json_object(source / "config.json")
    tokenizer_dir = find_tokenizer_directory(source)
    if is_ernie_thu(source, raw):
        return _export_text_layers(source, Path(target), tokenizer_dir, text_layers_only)
    if text_layers_only:
        raise CheckpointError(
            f"{source}: {FLAG} is for ERNIE-THU folders (their text layers without the "
            "knowledge layers); this folder exports whole: leave the flag out"
        )
    if (source / TASK_JSON).is_file():
        return _export_task(source, Path(target), tokenizer_dir, peft_adapter)
    if peft_adapter:
        raise CheckpointError(
            f"{source}: --peft-adapter is for a finetune.peft=lora|ia3 final/; this folder "
            "has no adapter: leave the flag out"
        )
    if raw.get("ptm_model") == "encoder_decoder":
        return _export_seq2seq(source, Path(target), tokenizer_dir)
    if "ptm_format" in raw:
        return _export_encoder(source, Path(target), tokenizer_dir)
    if "model_type" in raw:
        raise CheckpointError(
            f"{source}: already a Hugging Face folder (model_type {raw['model_type']!r}); "
            "transformers loads it as it is"
        )
    kind = raw.get("ptm_model") or raw.get("model_type") or "an unknown model"
    raise _unsupported(source, f"config.json describes {kind!r}")


def _tokenizer_writer(
    tokenizer_dir: Path | None, max_length: int | None
) -> Callable[[Path], object]:
    def write(directory: Path) -> object:
        if tokenizer_dir is None:
            return None
        from ptm_core.tokenization import TOKENIZER_FILE, WordPieceTokenizer

        try:
            tokenizer = WordPieceTokenizer.from_directory(tokenizer_dir)
        except ValueError:
            if not (tokenizer_dir / TOKENIZER_FILE).is_file():
                raise
            # A Hugging Face tokenizer that is not WordPiece (a fine-tuned folder that
            # came from the Hub with BPE/Unigram): its own files are already what
            # AutoTokenizer loads, so they are copied as they are.
            for name in (*_COPIED_TOKENIZER_FILES, *HF_TOKENIZER_FILES):
                if (tokenizer_dir / name).is_file():
                    shutil.copyfile(tokenizer_dir / name, directory / name)
            return None
        return write_hf_tokenizer_files(tokenizer, directory, model_max_length=max_length)

    return write


def _export_encoder(source: Path, target: Path, tokenizer_dir: Path | None) -> HFExport:
    from ptm_core.encoders.transformer import TransformerEncoder

    encoder = TransformerEncoder.from_pretrained(source)
    try:
        family = default_hf_format(encoder.config).removeprefix("hf-")
    except CheckpointError as exc:
        raise _unsupported(source, str(exc)) from None
    heads_path = source / HEADS_FILE
    heads = load_file(str(heads_path)) if heads_path.is_file() else {}
    # A BPE/Unigram tokenizer (a RoBERTa or XLM-R folder's) is copied as it is.
    write_tokenizer = _tokenizer_writer(
        tokenizer_dir, None if family == "xlnet" else encoder.config.max_positions
    )
    try:
        with atomic_directory(target, kind="export") as tmp:
            result = write_hf_encoder(encoder, tmp, family=family, heads=heads, tokenizer=None)
            write_tokenizer(tmp)
            for folder in result.also:
                write_tokenizer(tmp / folder)
    except CheckpointError as exc:
        raise _unsupported(source, str(exc)) from None
    result.directory = target
    return result


def _export_text_layers(
    source: Path, target: Path, tokenizer_dir: Path | None, text_layers_only: bool
) -> HFExport:
    """ERNIE-THU: refused, or (``text_layers_only``) its T-Encoder as a ``BertModel``."""
    from ptm_core.encoders.transformer import TransformerEncoder

    heads = head_names(source / HEADS_FILE)
    left_out = knowledge_left_out(source, heads)
    task = (source / TASK_JSON).is_file()
    if task or not text_layers_only:
        raise refusal(source, left_out, task=task)
    encoder = TransformerEncoder.from_pretrained(source)
    tokenizer = None
    if tokenizer_dir is not None:
        from ptm_core.tokenization import WordPieceTokenizer

        tokenizer = WordPieceTokenizer.from_directory(tokenizer_dir)
    text = note(source, encoder.config.num_layers, left_out)
    try:
        with atomic_directory(target, kind="export") as tmp:
            # No heads: ERNIE-THU's MLM/NSP/dEA heads read the K-Encoder's output.
            result = write_hf_encoder(encoder, tmp, family="bert", heads={}, tokenizer=tokenizer)
            (tmp / NOTE_FILE).write_text(text, encoding="utf-8")
    except CheckpointError as exc:
        raise _unsupported(source, str(exc)) from None
    result.directory = target
    result.family = "ernie_thu (text layers only)"
    result.skipped = [
        f"the K-Encoder ({left_out.summary()}); see {NOTE_FILE}",
    ]
    return result


def write_hf_encoder(
    encoder: TransformerEncoder,
    directory: Path,
    *,
    family: str,
    heads: Mapping[str, Tensor],
    tokenizer: WordPieceTokenizer | None,
) -> HFExport:
    """Write an encoder, its pre-training heads and its tokenizer as a Hugging Face folder.

    Args:
        encoder: the encoder.
        directory: an existing (empty) folder to write into; the caller makes it atomic.
        family: ``bert``, ``albert``, ``electra``, ``xlnet``, ``roberta``, ``xlm-roberta``
            or ``distilbert``.
        heads: the objectives' own tensors as ``heads.safetensors`` holds them
            (``objectives.<name>.<tensor>``, tied tensors left out); ``{}`` for none.
        tokenizer: the WordPiece tokenizer, or ``None`` to write no tokenizer files.

    Returns:
        :class:`HFExport` (``directory`` is the folder written into).
    """
    config = encoder.config
    if family not in ("xlnet", "modernbert"):  # their converters check their own layout
        check_bert_layout(config, f"hf-{family}")
    groups: dict[str, dict[str, Tensor]] = {}
    for name, tensor in heads.items():
        _, objective, rest = name.split(".", 2)  # "objectives.<name>.<tensor>"
        groups.setdefault(objective, {})[rest] = tensor
    used: list[str] = []
    state: dict[str, Tensor]
    generator_folder: tuple[dict[str, Any], dict[str, Tensor]] | None = None
    if family == "bert":
        hf_config = encoder_config_to_hf(config)
        state = {
            f"bert.{k}": v
            for k, v in ptm_to_hf_bert(encoder.state_dict(), config.num_layers).items()
        }
        mlm = take_head_group(groups, _MLM_NAMES, used)
        pair = take_head_group(groups, _PAIR_NAMES, used, {"cls.seq_relationship.weight": 2})
        state.update(mlm)
        state.update(pair)
        if mlm and pair:
            architecture, auto = "BertForPreTraining", "AutoModelForPreTraining"
        elif mlm:
            architecture, auto = "BertForMaskedLM", "AutoModelForMaskedLM"
        else:
            architecture, auto = "BertModel", "AutoModel"
    else:
        module = registry.hf_encoder_family(family)
        assert module is not None, family
        hf_config = module.config_to_hf(config)
        encoder_state = module.state_to_hf(encoder.state_dict(), config)
        if hasattr(module, "hf_export_state"):  # roberta, xlm-roberta, distilbert
            state, architecture, auto = module.hf_export_state(encoder_state, config, groups, used)
        elif family == "albert":
            state = {f"albert.{k}": v for k, v in encoder_state.items()}
            mlm = take_head_group(groups, _ALBERT_MLM_NAMES, used)
            if mlm:
                mlm["predictions.decoder.bias"] = mlm["predictions.bias"].clone()
            sop = take_head_group(
                groups, _ALBERT_SOP_NAMES, used, {"sop_classifier.classifier.weight": 2}
            )
            state.update(mlm)
            state.update(sop)
            architecture, auto = (
                ("AlbertForPreTraining", "AutoModelForPreTraining")
                if mlm and sop
                else ("AlbertForMaskedLM", "AutoModelForMaskedLM")
                if mlm
                else ("AlbertModel", "AutoModel")
            )
        elif family == "electra":
            state = {f"electra.{k}": v for k, v in encoder_state.items()}
            discriminator: dict[str, Tensor] = {}
            # The RTD objective's tensors hold the generator too: take its discriminator.
            for objective, tensors in groups.items():
                if set(_ELECTRA_NAMES) <= set(tensors):
                    used.append(objective)
                    discriminator = {t: tensors[o] for o, t in _ELECTRA_NAMES.items()}
                    generator_folder = electra_hf.generator_export(
                        encoder.state_dict(), config, tensors
                    )
                    break
            state.update(discriminator)
            generator = {} if discriminator else take_head_group(groups, _ELECTRA_MLM_NAMES, used)
            state.update(generator)
            architecture, auto = (
                ("ElectraForPreTraining", "AutoModelForPreTraining")
                if discriminator
                else ("ElectraForMaskedLM", "AutoModelForMaskedLM")
                if generator
                else ("ElectraModel", "AutoModel")
            )
        else:  # xlnet
            state = {f"transformer.{k}": v for k, v in encoder_state.items()}
            head = take_head_group(groups, _XLNET_NAMES, used)
            if head:
                head["lm_loss.weight"] = encoder_state["word_embedding.weight"].clone()
            state.update(head)
            architecture, auto = (
                ("XLNetLMHeadModel", "AutoModelForCausalLM")
                if head
                else ("XLNetModel", "AutoModel")
            )
    hf_config["architectures"] = [architecture]
    _write_model(directory, hf_config, state)
    max_length = None if family == "xlnet" else config.max_positions
    if tokenizer is not None:
        write_hf_tokenizer_files(tokenizer, directory, model_max_length=max_length)
    skipped = [name for name in groups if name not in used]
    also: dict[str, str] = {}
    if generator_folder is not None:
        # ELECTRA's generator: transformers' ElectraForMaskedLM, beside the discriminator.
        _write_model(directory / electra_hf.GENERATOR_DIR, *generator_folder)
        if tokenizer is not None:
            write_hf_tokenizer_files(
                tokenizer, directory / electra_hf.GENERATOR_DIR, model_max_length=max_length
            )
        also[electra_hf.GENERATOR_DIR] = "ElectraForMaskedLM"
    return HFExport(directory, family, architecture, auto, heads=used, skipped=skipped, also=also)


def _write_model(directory: Path, hf_config: dict[str, Any], state: dict[str, Tensor]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
    save_file(
        {k: v.detach().contiguous() for k, v in state.items()},
        str(directory / "model.safetensors"),
        metadata={"format": "pt"},
    )


def _move_into(written: Path, tmp: Path) -> None:
    for path in written.iterdir():
        shutil.move(str(path), str(tmp / path.name))
    written.rmdir()


def _export_seq2seq(source: Path, target: Path, tokenizer_dir: Path | None) -> HFExport:
    from ptm_core.checkpoints.hf.bart import save_bart
    from ptm_core.checkpoints.hf.t5 import save_t5
    from ptm_core.checkpoints.seq2seq import load_seq2seq

    model = load_seq2seq(source)
    config = model.config
    family = "t5" if config.position_encoding == "t5_buckets" else "bart"
    write_tokenizer = _tokenizer_writer(
        tokenizer_dir, None if family == "t5" else config.max_positions
    )
    with atomic_directory(target, kind="export") as tmp:
        try:
            if family == "t5":
                save_t5(model, tmp / "model")
            else:
                save_bart(model, tmp / "model")
        except CheckpointError as exc:
            raise _unsupported(source, str(exc)) from None
        _move_into(tmp / "model", tmp)
        write_tokenizer(tmp)
    architecture = (
        "T5ForConditionalGeneration" if family == "t5" else "BartForConditionalGeneration"
    )
    return HFExport(target, family, architecture, "AutoModelForSeq2SeqLM", heads=["lm_head"])


def _export_task(
    source: Path, target: Path, tokenizer_dir: Path | None, peft_adapter: bool = False
) -> HFExport:
    from ptm_core.checkpoints.hf.bert_tasks import auto_class, export_hf_task_model, hf_task_export
    from ptm_core.checkpoints.hf.peft_export import prepare_peft_export, write_adapter_folder
    from ptm_core.finetune.model import load_task_model

    record = read_json_object(source / TASK_JSON)
    if record.get("seq2seq"):  # a BART/T5 fine-tune, whole or with an adapter
        from ptm_core.checkpoints.hf.seq2seq_task_export import export_seq2seq_task

        done = export_seq2seq_task(
            source,
            target,
            record,
            lambda length: _tokenizer_writer(tokenizer_dir, length),
            peft_adapter=peft_adapter,
        )
        return HFExport(target, done.family, done.architecture, done.auto_class, done.heads)
    if record.get("recipe") not in (None, "core") or record.get("feature_based"):
        what = "feature-based tagger" if record.get("feature_based") else record.get("recipe")
        raise _unsupported(source, f"task.json describes a {what} fine-tuned model")
    config = read_json_object(source / "config.json")
    if "ptm_format" not in config:
        raise _unsupported(source, "a fine-tuned model on a non-BERT encoder")
    if "peft" in record:  # base + adapter: merged, or the adapter as a peft folder
        model, adapter = prepare_peft_export(source, record, adapter=peft_adapter)
        task = record
    elif peft_adapter:
        raise CheckpointError(
            f"{source}: --peft-adapter is for a finetune.peft=lora|ia3 final/; this model was "
            "fine-tuned whole: leave the flag out"
        )
    else:
        model, task = load_task_model(source)
    try:
        family, row, _ = hf_task_export(model)
    except CheckpointError as exc:
        raise _unsupported(source, str(exc)) from None
    max_length = None if family == "xlnet" else model.encoder.config.max_positions
    write_tokenizer = _tokenizer_writer(tokenizer_dir, max_length)
    with atomic_directory(target, kind="export") as tmp:
        try:
            export_hf_task_model(model, tmp / "model")
        except CheckpointError as exc:
            raise _unsupported(source, str(exc)) from None
        _move_into(tmp / "model", tmp)
        write_tokenizer(tmp)
        if peft_adapter:
            prefix = str(getattr(registry.hf_encoder_family(family), "HF_PREFIX", ""))
            write_adapter_folder(tmp, adapter, record, prefix, str(Path(target).resolve()))
    kind = str(task["kind"])
    return HFExport(target, family, row.architecture, auto_class(kind), heads=[f"task:{kind}"])
