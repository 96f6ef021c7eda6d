"""Recipes: turn a composed config into a call of a package's public training function.

Being replaced by family specs (:mod:`flows.runner`): a ``recipe`` name that a registered
family claims runs through the family's spec; the table below holds the ones not moved yet.

The config's ``recipe`` key names one; each lives in its own module with a
``run(cfg: DictConfig) -> result`` function (the result has ``output_dir``, ``metrics_path``,
``last_checkpoint``, ``final_metrics`` and ``encoder_dir``). Modules are imported lazily so
that the CLI only loads the packages a run needs.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
from typing import Any

from hydra.errors import InstantiationException
from omegaconf import DictConfig

from flows.config import ConfigError

RECIPES: dict[str, str] = {
    # word2vec, GloVe, NNLM: trained outside the Trainer (gensim), not by a plan.
    "static_embeddings": "flows.recipes.static_embeddings",
}


def run_recipe(cfg: DictConfig) -> Any:
    """Run the recipe named by ``cfg.recipe``.

    Raises:
        ValueError: unknown recipe name; the message lists the valid ones.
        ConfigError: a config node cannot be built (``trainer.max_steps=abc``): the message
            names the node and keeps the builder's own reason, without Hydra's wrapping.
    """
    from flows import runner
    from ptm_core.families import registry

    name = cfg.get("recipe", "text")
    claimed = bool(cfg.get("family")) or any(
        name in spec.recipes for spec in registry.families().values()
    )
    if not claimed and name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; valid recipes: {', '.join(sorted(RECIPES))}")
    from flows.run_identity import config_identity
    from ptm_core.training.run_folder import locked_run_folder, run_identity

    output_dir = cfg.get("trainer", {}).get("output_dir")
    try:
        with contextlib.ExitStack() as stack:
            # One writer per run folder from the recipe's first write (tokenizer, caches)
            # to final/; under torchrun rank 0 holds it for all.
            if output_dir and os.environ.get("RANK", "0") == "0":
                stack.enter_context(locked_run_folder(output_dir))
            # The run folder's fingerprint covers the whole config (model, data, settings).
            stack.enter_context(run_identity(config_identity(cfg)))
            if claimed:  # a family spec runs it (flows.runner)
                return runner.run(cfg)
            return importlib.import_module(RECIPES[name]).run(cfg)
    except InstantiationException as exc:
        raise ConfigError(instantiation_message(exc)) from None


def instantiation_message(exc: InstantiationException) -> str:
    """One line for a config node that failed to build: ``<key>: <the builder's reason>``."""
    found = re.search(r"^full_key: (\S+)$", str(exc), flags=re.MULTILINE)
    key = found.group(1) if found else "config"
    cause = exc.__cause__
    reason = str(cause) if cause is not None else str(exc).splitlines()[0]
    # One line however the builder worded it (a multi-line reason is joined).
    return f"bad config at {key}: {' '.join(reason.split())}"
