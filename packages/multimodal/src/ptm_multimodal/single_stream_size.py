"""The sizes of a single-stream vision-language encoder, in one frozen dataclass.

VisualBERT, VL-BERT and ImageBERT put the caption and the regions through one core BERT
encoder; their builders (:func:`~ptm_multimodal.visualbert.build_visualbert`,
:func:`~ptm_multimodal.vlbert.build_vlbert`, :func:`~ptm_multimodal.imagebert.build_imagebert`)
take a :class:`SingleStreamSize` and only the switches that make the family.
:func:`flat_size_builder` gives such a builder the flat keyword face that the Hydra configs
(``model/visualbert_*``: ``hidden_size: 64``, ``model.hidden_size=32`` on the command line)
and callers use: every field of :class:`SingleStreamSize` is a keyword argument.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ptm_core.encoders.builders import TransformerSize

Model = TypeVar("Model")


@dataclass(frozen=True)
class SingleStreamSize(TransformerSize):
    """The numbers of a single-stream encoder: a core :class:`TransformerSize` whose
    ``max_positions`` and ``type_vocab_size`` are the text's (the encoder gets the regions'
    rows on top: :meth:`encoder_size`), and the width of a region feature.

    Attributes:
        visual_embedding_dim: the region features' width (the data's, at run time).
        type_vocab_size: the text's segment rows.
    """

    visual_embedding_dim: int = 2048
    type_vocab_size: int = 2

    def encoder_size(self, extra_positions: int) -> TransformerSize:
        """The core encoder's size: these numbers with ``extra_positions`` position rows
        after the text's (the regions' rows)."""
        return TransformerSize.pick(
            dataclasses.asdict(self), max_positions=self.max_positions + extra_positions
        )


SIZE_FIELDS = tuple(f.name for f in dataclasses.fields(SingleStreamSize))


def flat_size_builder(build: Callable[..., Model]) -> Callable[..., Model]:
    """``build(size: SingleStreamSize, *, <switches>)`` as ``f(**sizes, **switches)``.

    The returned function takes each field of :class:`SingleStreamSize` (defaults as
    there) and ``build``'s own keyword switches, all by keyword; its signature and type
    hints say so, so the config schema checks a YAML node's keys and types against them.

    Raises:
        TypeError: (from the returned function) an unknown keyword; the message lists the
            valid ones.
    """
    name = build.__name__.removeprefix("build_")
    own = list(inspect.signature(build).parameters.values())[1:]  # after ``size``
    own_names = {p.name for p in own}
    hints = typing.get_type_hints(SingleStreamSize)
    sizes = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(SingleStreamSize)
    ]  # fmt: skip

    @functools.wraps(build)
    def flat(**given: Any) -> Model:
        unknown = sorted(set(given) - set(SIZE_FIELDS) - own_names)
        if unknown:
            valid = ", ".join([*SIZE_FIELDS, *(p.name for p in own)])
            raise TypeError(f"{name}() got unknown arguments {unknown}; valid: {valid}")
        size = SingleStreamSize(**{k: v for k, v in given.items() if k in SIZE_FIELDS})
        return build(size, **{k: v for k, v in given.items() if k in own_names})

    flat.__name__ = flat.__qualname__ = name
    flat.__doc__ = (
        f"{name}(**sizes, **switches): :func:`{build.__name__}` with the fields of "
        f":class:`~ptm_multimodal.single_stream_size.SingleStreamSize` as keyword arguments "
        f"(the Hydra ``_target_`` of ``model/{name}_*``).\n\n{build.__doc__ or ''}"
    )
    parameters = [*sizes, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own)]
    signature = inspect.signature(build)
    flat.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    flat.__annotations__ = {
        **{p.name: p.annotation for p in sizes},
        **{k: v for k, v in build.__annotations__.items() if k in own_names or k == "return"},
    }
    return flat


__all__ = ["SIZE_FIELDS", "SingleStreamSize", "flat_size_builder"]
