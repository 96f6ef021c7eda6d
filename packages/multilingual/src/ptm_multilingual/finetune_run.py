"""The ``finetune`` hook of the ``xlm`` family: zero-shot cross-lingual transfer.

``init_from`` is an XLM ``final/`` (``ptm pretrain experiment=xlm_tlm_tiny``); the
``xlm_finetune`` block (``configs/experiment/xlm_zero_shot.yaml``, typed by
:class:`~ptm_multilingual.settings.XLMFinetune`) names the training file and language and
the dev files per language.
"""

from __future__ import annotations

from pathlib import Path

from ptm_core.families.runner import FinetuneRun
from ptm_core.peft import PeftConfig
from ptm_multilingual.finetune import XLMFinetuneResult, finetune_xlm_classifier
from ptm_multilingual.settings import XLMSettings


def finetune_xlm(run: FinetuneRun) -> XLMFinetuneResult:
    """Fine-tune ``run.init_from`` on ``xlm_finetune.train_file`` and score every dev language.

    Raises:
        FileNotFoundError: ``init_from`` is not given or not a folder.
        ValueError: ``xlm_finetune.train_file`` is not set.
    """
    init_from = run.init_from
    if not init_from or not Path(init_from).is_dir():
        raise FileNotFoundError(
            f"init_from={init_from}: experiment=xlm_zero_shot fine-tunes a pre-trained XLM; "
            "give init_from=<final/ of ptm pretrain experiment=xlm_tlm_tiny (or xlm_mlm_tiny)>"
        )
    settings: XLMSettings = run.settings
    options = settings.xlm_finetune
    if options.train_file is None:
        raise ValueError(
            "xlm_finetune.train_file is not set; give the labelled training file "
            "(experiment=xlm_zero_shot sets the English sample)"
        )
    peft = PeftConfig.from_options(
        options, block="xlm_finetune", max_length_key="xlm_finetune.max_length"
    )
    return finetune_xlm_classifier(
        init_from,
        train=(options.train_file, options.train_lang),
        dev=dict(options.dev),
        trainer=run.trainer,
        batch_size=options.batch_size,
        eval_batch_size=options.eval_batch_size,
        max_length=options.max_length,
        dropout=options.dropout,
        seed=run.seed,
        random_init=options.random_init,
        freeze=options.freeze,
        peft=peft,
        provenance={"init_from": str(init_from), "experiment": str(settings.experiment_name)},
    )


__all__ = ["finetune_xlm"]
