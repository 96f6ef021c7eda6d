"""Check a Hugging Face model file tensor by tensor, by the names in the file.

A missing tensor, a shape that is not the one ``config.json`` describes (another
``vocab_size``), or a tensor no part of the model is refused in one line that names the file
and the tensor as the file spells it, before any weight is copied.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.factory import encoder_from_config

logger = logging.getLogger(__name__)


def expected_tensors(
    family: ModuleType | Any, config: EncoderConfig
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The encoder tensors ``family``'s file holds for ``config``: by :func:`file_name`,
    ``(the name transformers writes, shape)``. Built on the meta device: no memory."""
    prefix = str(getattr(family, "HF_PREFIX", ""))
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        reference = encoder_from_config(config)
        state = family.state_to_hf(reference.state_dict(), config)
    return {file_name(k, prefix): (prefix + k, tuple(v.shape)) for k, v in state.items()}


def file_name(name: str, prefix: str) -> str:
    """A tensor's name as the family's converter sees it (encoder prefix and TF-era
    ``gamma``/``beta`` LayerNorm names normalised)."""
    name = name.removeprefix(prefix)
    return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )


def check_file_tensors(
    weights: dict[str, Tensor],
    expected: dict[str, tuple[str, tuple[int, ...]]],
    *,
    prefix: str,
    leftover: set[str],
    strict: bool,
    weights_path: Path,
    config_path: Path,
    architecture: str,
    warn: bool = True,
) -> None:
    """Raise, naming the file and the tensor, unless ``weights`` is what ``expected`` says.

    ``leftover``: tensors of the family's other heads (a pooler or pre-training head saved
    with an older ``transformers``), which are left out, with a warning when ``warn``, as
    ``transformers`` does.
    """
    found = {
        file_name(k, prefix): (k, tuple(v.shape))
        for k, v in weights.items()
        if not k.endswith("position_ids")  # a buffer older files hold
    }
    for name, (display, shape) in expected.items():
        if name not in found:
            if strict:
                hint = f"fix 'architectures' in {config_path} or export the model again"
                if sum(n in found for n in expected) < len(expected) / 2:
                    hint = f"so are most others: is model_type in {config_path} right?"
                raise CheckpointError(
                    f"{weights_path}: tensor {display!r} is missing; {architecture} needs it "
                    f"({hint})"
                )
            continue
        original, actual = found[name]
        if actual != shape:
            raise CheckpointError(
                f"{weights_path}: tensor {original!r} has shape {actual} but {config_path} "
                f"describes {shape}; the weights and config.json come from different models "
                "(another vocab_size or width?)"
            )
    extra = sorted(n for n in found if n not in expected and n not in leftover)
    if strict and extra:
        raise CheckpointError(
            f"{weights_path}: unknown tensor(s) {', '.join(found[n][0] for n in extra)}, not "
            f"part of {architecture} (fix 'architectures' in {config_path}, or pass "
            "strict=False to load what fits)"
        )
    dropped = sorted(found[n][0] for n in found if n in leftover and n not in expected)
    if dropped and warn:
        logger.warning(
            "%s: left out %s, which %s does not use", weights_path, ", ".join(dropped), architecture
        )
