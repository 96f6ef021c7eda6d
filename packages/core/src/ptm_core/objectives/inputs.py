"""What an objective is built from: numbers and the module it ties to, read in one place.

An objective's constructor names what it needs among :data:`OBJECTIVE_INPUTS`
(``hidden_size``, ``vocab_size``, ``tie_to``, the head's ``activation`` and
``layer_norm_eps``, and, for the few that need an architecture, ``encoder_config`` or the
``encoder`` module itself) next to ``vocab`` and its own switches. :func:`build_objective`
reads those from any :class:`TextBackbone` and passes exactly the ones the factory takes,
so a Hydra ``_partial_`` objective and a plain class are built the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from torch import nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.tokenization import VocabInfo

OBJECTIVE_INPUTS = (
    "hidden_size",
    "vocab_size",
    "tie_to",
    "activation",
    "layer_norm_eps",
    "encoder_config",
    "encoder",
)


@runtime_checkable
class TextBackbone(Protocol):
    """A network whose token states objectives read.

    ``hidden_size``, ``vocab_size`` and ``word_embeddings`` are its width and token table;
    ``text_config`` is the :class:`EncoderConfig` of its text stack (the core encoder the
    token states come from; for a plain encoder, its own config).
    """

    @property
    def hidden_size(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def word_embeddings(self) -> nn.Embedding: ...

    @property
    def text_config(self) -> EncoderConfig: ...


def objective_inputs(model: TextBackbone) -> dict[str, Any]:
    """The numbers and modules an objective may take, read from ``model``.

    ``activation``, ``layer_norm_eps`` and ``encoder_config`` come from the model's
    ``text_config``, so a head keeps the activation of the encoder it sits on (GELU for
    BERT, ``gelu_new`` for ALBERT).
    """
    config = model.text_config
    return {
        "hidden_size": model.hidden_size,
        "vocab_size": model.vocab_size,
        "tie_to": model.word_embeddings,
        "encoder": model,
        "activation": config.activation,
        "layer_norm_eps": config.layer_norm_eps,
        "encoder_config": config,
    }


def build_objective(
    make: Callable[..., Any], model: TextBackbone, vocab: VocabInfo | None, **kwargs: Any
) -> Any:
    """Call an objective factory with ``vocab``, the inputs from ``model`` it names, and
    ``kwargs``."""
    accepted = _parameter_names(make)
    given = {k: v for k, v in objective_inputs(model).items() if k in accepted}
    return make(vocab=vocab, **given, **kwargs)


def _parameter_names(make: Callable[..., Any]) -> set[str]:
    signature = inspect.signature(make)
    return {
        name
        for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
