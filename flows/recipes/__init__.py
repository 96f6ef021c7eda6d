"""Recipes: turn a composed config into a call of a package's public training function.

The config's ``recipe`` key names one; each lives in its own module with a
``run(cfg: DictConfig) -> result`` function (the result has ``output_dir``, ``metrics_path``,
``last_checkpoint``, ``final_metrics`` and ``encoder_dir``). Modules are imported lazily so
that the CLI only loads the packages a run needs.
"""

from __future__ import annotations

import importlib
from typing import Any

from omegaconf import DictConfig

RECIPES: dict[str, str] = {
    "text": "flows.recipes.text",
    "distill": "flows.recipes.distill",
    "xlm": "flows.recipes.xlm",
    "visualbert": "flows.recipes.visualbert",
    "vilbert": "flows.recipes.vilbert",
    "ernie_baidu": "flows.recipes.ernie_baidu",
    "ernie_thu": "flows.recipes.ernie_thu",
    "cogqa": "flows.recipes.cogqa",
    "kbert": "flows.recipes.kbert",
    "seq2seq": "flows.recipes.seq2seq",
}


def run_recipe(cfg: DictConfig) -> Any:
    """Run the recipe named by ``cfg.recipe``.

    Raises:
        ValueError: unknown recipe name; the message lists the valid ones.
    """
    name = cfg.get("recipe", "text")
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; valid recipes: {', '.join(sorted(RECIPES))}")
    module = importlib.import_module(RECIPES[name])
    return module.run(cfg)
