"""Compose ptm's Hydra config tree (the same tree for the CLI, the flows and the tests)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

REPO_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A config cannot be composed; the message names the key or group and the fix."""


def config_dir() -> Path:
    """The ``configs/`` directory (``PTM_CONFIG_DIR`` overrides the repository's)."""
    return Path(os.environ.get("PTM_CONFIG_DIR", REPO_ROOT / "configs")).resolve()


def project_root() -> Path:
    """Root that relative paths in configs (``${ptm_root:}``) are resolved against."""
    return Path(os.environ.get("PTM_ROOT", REPO_ROOT)).resolve()


if not OmegaConf.has_resolver("ptm_root"):
    OmegaConf.register_new_resolver("ptm_root", lambda: str(project_root()))


def compose_config(overrides: Sequence[str] = (), *, config_name: str = "config") -> DictConfig:
    """Compose the config with command-line style overrides, fully resolved.

    Args:
        overrides: e.g. ``["experiment=bert_tiny", "trainer.max_steps=50"]``.
        config_name: the root config file (without ``.yaml``).

    Raises:
        ConfigError: unknown group option, unknown key, or a bad interpolation; Hydra's
            message (which lists the valid options) is kept.
    """
    directory = config_dir()
    if not directory.is_dir():
        raise ConfigError(
            f"config directory {directory} not found; run from a ptm checkout or set "
            "PTM_CONFIG_DIR to the configs/ folder"
        )
    try:
        with initialize_config_dir(config_dir=str(directory), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=list(overrides))
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"cannot compose the config with {list(overrides)}: {exc}") from None
    return cfg
