"""Hugging Face BART/T5 checkpoints (moving to :mod:`ptm_core.checkpoints.hf`).

The encoder families and export live in :mod:`ptm_core.checkpoints.hf`.
"""
