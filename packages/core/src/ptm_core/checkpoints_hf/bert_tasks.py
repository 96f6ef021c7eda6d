"""Temporary: ``bart_tasks`` reads :func:`label_names_from_config` from here until it moves
to :mod:`ptm_core.checkpoints.hf` (#17's seq2seq part); removed at that merge."""

from ptm_core.checkpoints.hf.bert_tasks import label_names_from_config

__all__ = ["label_names_from_config"]
