"""``ptm export --format hf FINAL_DIR OUT_DIR``: a ptm ``final/`` as a Hugging Face folder.

The conversion is the ``export`` hook of the folder's family (its ``"ptm_model"`` kind, or
the family that recognises an older folder): :func:`ptm_core.checkpoints.hf.export.export_hf`
for the core families and ERNIE-THU, ``ptm_multilingual.hf_export`` for XLM,
``ptm_multimodal.hf_export`` for VisualBERT and LXMERT. This module checks the command's
arguments and prints what was written and how to load it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ptm_core.atomic import check_output_directory
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import HFExport, export_hf
from ptm_core.checkpoints.hf.knowledge_export import NOTE_FILE

FORMATS = ("hf",)
# Any one of these makes a folder loadable by AutoTokenizer.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)


def export(
    source: str | Path,
    target: str | Path,
    *,
    format: str = "hf",
    overwrite: bool = False,
    text_layers_only: bool = False,
    peft_adapter: bool = False,
) -> HFExport:
    """Export ``source`` to ``target`` in ``format`` and print a short summary.

    Args:
        source: a ``final/`` folder written by ``ptm pretrain`` or ``ptm finetune``.
        target: the folder to write: a new or empty one, or (with ``overwrite``) a folder
            ptm wrote before (it has ptm's marker); a user's folder is never replaced.
        format: ``"hf"`` (Hugging Face ``transformers``), the only format for now.
        overwrite: replace ``target`` when it holds an earlier ptm output.
        text_layers_only: ERNIE-THU only: export its text layers without the knowledge
            layers (refused without it), with a note of what was left out.
        peft_adapter: a ``finetune.peft=lora|ia3`` run: write its adapter as a ``peft``
            adapter folder (``<target>/adapter``) beside the base model instead of merging
            it into the weights (the default).

    Returns:
        What was written (:class:`~ptm_core.checkpoints.hf.export.HFExport`).

    Raises:
        ValueError: an unknown format, ``target`` inside ``source``, a ``target`` that may
            not be replaced (:class:`~ptm_core.atomic.OutputExistsError`), or a folder that
            cannot be exported (a :class:`~ptm_core.checkpoints.CheckpointError` that names
            it and the supported kinds).
    """
    if format not in FORMATS:
        raise ValueError(f"--format {format!r} is not known; valid: {', '.join(FORMATS)}")
    source, target = Path(source), Path(target)
    if target.resolve() == source.resolve() or source.resolve() in target.resolve().parents:
        raise ValueError(
            f"{target}: the output folder must not be {source} or inside it; give another one"
        )
    check_output_directory(target, kind="export", overwrite=overwrite, option="--overwrite")
    options = {"peft_adapter": True} if peft_adapter else {}  # core's export_hf only
    result = exporter(source)(source, target, text_layers_only=text_layers_only, **options)
    print(f"exported       {source} -> {result.directory}")
    print(f"family         {result.family}")
    print(f"architecture   {result.architecture}")
    print(f"heads          {', '.join(result.heads) or '(none)'}")
    if result.family == "xlm":
        print("note           XLM pre-training saves the encoder only: exported as XLMModel")
    if result.skipped:
        print(f"not exported   {', '.join(result.skipped)} (no Hugging Face counterpart)")
    for folder, architecture in result.also.items():
        print(f"also           {Path(result.directory) / folder}: {architecture}")
    if text_layers_only:
        print(f"note           {result.directory / NOTE_FILE} lists what was left out")
    model_line = f"transformers.{result.auto_class}.from_pretrained({str(target)!r})"
    if peft_adapter:
        adapter = str(Path(target) / "adapter")
        print(f"adapter        {adapter} (peft; the weights in {target} are the base's)")
        model_line = f"peft.PeftModel.from_pretrained({model_line}, {adapter!r})"
    if any((Path(result.directory) / name).is_file() for name in TOKENIZER_FILES):
        print(f"load with      {model_line}, AutoTokenizer.from_pretrained({str(target)!r})")
    else:
        print(f"load with      {model_line}")
        print(
            f"tokenizer      none: {source} holds no tokenizer, so none was exported and "
            f"AutoTokenizer cannot load {target}; save the tokenizer the model was trained "
            "with into it (tokenizer.save_pretrained)"
        )
    return result


def exporter(source: Path) -> Callable[..., HFExport]:
    """The ``export`` hook of the family ``source`` belongs to.

    A folder no family claims (a Hugging Face folder, a broken one) goes to core's
    :func:`export_hf`, whose refusal names what the folder is.

    Raises:
        CheckpointError: the folder's family has no Hugging Face export (the message names
            the family and the ones that have one).
    """
    from flows.config_errors import ConfigError
    from flows.runner import family_of_folder
    from ptm_core.families import families

    try:
        spec = family_of_folder(source)
    except ConfigError as exc:  # a kind no installed family knows
        raise CheckpointError(str(exc)) from None
    if spec is None:
        return export_hf
    if not spec.has("export"):
        exporting = sorted(s.name for s in families().values() if s.has("export"))
        raise CheckpointError(
            f"{source}: a {spec.name} model has no Hugging Face counterpart to export to; "
            f"families that export: {', '.join(exporting)}"
        )
    hook: Callable[..., HFExport] = spec.hook("export")
    return hook
