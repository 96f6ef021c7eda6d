"""One module per Hugging Face format; each only translates names and configs.

Encoder families (``bert``, ``albert``, ``electra``, ``xlnet``) expose ``config_from_hf``,
``config_to_hf``, ``state_from_hf`` and ``state_to_hf`` with the same signatures and are
found through :mod:`ptm_core.checkpoints.registry` by ``model_type``. Head maps
(``bert_heads``, ``pretraining_heads``), fine-tuned task models (``bert_tasks``), tokenizer
files and ``ptm export`` (``export``) sit beside them.
"""
