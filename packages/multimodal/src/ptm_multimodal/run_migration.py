"""Resume a VisualBERT/ViLBERT/LXMERT run folder written before the family spec (#32).

The multimodal pre-training wrapper named its network ``model``; the generic
:class:`~ptm_core.models.pretraining.PretrainingModel` names it ``encoder``. A run stopped
before the upgrade holds checkpoints with ``model.*`` tensors and a fingerprint whose
``model.architecture`` hashes those names, so it would be refused as "a run of other
settings" and would not load. :func:`rename_network_tensors` renames both, once and
atomically, when they are exactly that older naming of this very network; then the run
resumes where it stopped.
"""

from __future__ import annotations

import logging
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

from ptm_core.atomic import save_safetensors
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.training.run_folder import architecture_hash, read_fingerprint, write_fingerprint
from ptm_multimodal.checkpoint_kinds import current_names
from ptm_multimodal.families import INPUT_KEYS

logger = logging.getLogger(__name__)


def _older_wrapper(network: nn.Module, objectives: ObjectiveMix) -> nn.Module:
    wrapper = nn.Module()
    wrapper.model = network  # the older attribute order and names: model, then objectives
    wrapper.objectives = objectives
    return wrapper


def rename_network_tensors(output_dir: Path, network: nn.Module, objectives: ObjectiveMix) -> None:
    """Rename an older run folder's ``model.*`` checkpoint tensors and fingerprint to the
    generic wrapper's names (nothing to do for a new or current folder)."""
    checkpoints = Path(output_dir) / "checkpoints"
    if not checkpoints.is_dir():
        return
    recorded = read_fingerprint(Path(output_dir))
    keys = dict(recorded["keys"]) if recorded is not None else {}
    if keys.get("model.architecture") == architecture_hash(_older_wrapper(network, objectives)):
        current = PretrainingModel(network, objectives, input_keys=INPUT_KEYS)
        keys["model.architecture"] = architecture_hash(current)
        write_fingerprint(Path(output_dir), keys)
        logger.info("%s: fingerprint renamed to the family spec's tensor names", output_dir)
    for weights in sorted(checkpoints.glob("*/model.safetensors")):
        with safe_open(str(weights), "pt") as handle:
            old = any(k.startswith("model.") for k in handle.keys())  # noqa: SIM118
            metadata = handle.metadata()
        if old:
            save_safetensors(current_names(load_file(str(weights))), weights, metadata)
            logger.info("%s: tensors renamed model.* -> encoder.*", weights)
