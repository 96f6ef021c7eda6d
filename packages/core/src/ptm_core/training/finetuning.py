"""The fine-tuning switches of ULMFiT and ELECTRA, as pure building blocks.

- :func:`layer_index` / :func:`parameter_depths`: which depth of the network a parameter
  belongs to (embeddings 0, layer ``i`` at ``i + 1``, everything above the encoder at
  ``num_layers + 1``).
- :func:`discriminative_param_groups`: AdamW groups with one learning rate per depth
  (ULMFiT's discriminative fine-tuning, ELECTRA's layer-wise LR decay).
- :func:`slanted_triangular`: ULMFiT's slanted triangular learning-rate schedule.
- :class:`GradualUnfreezing`: ULMFiT's top-down unfreezing, deterministic from the step.
- :class:`LayerGroups`: the hook for a model that is not one encoder at ``encoder.``
  (BART/T5, XLM): it names its own top depth and each parameter's depth, and every
  function here follows it; :func:`encoder_decoder_depth` is that rule for an
  encoder-decoder.

Nothing here knows the Trainer; the recipe passes the groups to ``torch.optim.AdamW``, the
schedule to the loop, and calls :meth:`GradualUnfreezing.on_step_begin` before each step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol, runtime_checkable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

#: Layer-wise LR decay constants of the two papers, for ``layer_decay=<name>``.
#: ELECTRA (Clark et al., 2020, Appendix A): 0.8 (0.9 for Large).
#: ULMFiT (Howard & Ruder, 2018, Sec. 3.2): ``eta^{l-1} = eta^l / 2.6``.
LAYER_DECAY_PRESETS: dict[str, float] = {"electra": 0.8, "ulmfit": 1 / 2.6}

_LAYER = re.compile(r"layers\.(\d+)\.")
# Input side of the stack: token/position/segment tables, the E -> D projection (ALBERT,
# ELECTRA) and XLNet's learned query-stream start vector.
_INPUT_SIDE = ("embeddings.", "embedding_projection.", "query_embedding")
# Used inside every layer (T5's bucketed position bias): the top-most layer it serves.
_EVERY_LAYER = ("relative_position_bias.",)
# After the last layer (pre-LN's final norm): with the head.
_ABOVE_LAYERS = ("final_norm.",)


def layer_index(name: str, num_layers: int, *, prefix: str = "encoder.") -> int:
    """The depth of one parameter of a model whose encoder is at ``prefix``.

    ``0`` = embeddings (``embeddings.*``, ``embedding_projection.*``, XLNet's
    ``query_embedding``); ``i + 1`` = ``layers.{i}.*``; ``num_layers`` = T5's
    ``relative_position_bias`` (added inside every layer, so it sits at the top-most layer
    it serves); ``num_layers + 1`` = everything not under ``prefix`` (task head, pooler,
    CRF, ...) and the encoder's ``final_norm``.

    The name alone cannot see sharing: ALBERT's shared layer is reported by
    ``named_parameters()`` only under ``layers.0``. :func:`parameter_depths` resolves a
    shared or tied parameter to the top-most depth it appears at.

    Args:
        name: A name from ``model.named_parameters()``, e.g. ``"encoder.layers.3.ffn_norm.weight"``.
        num_layers: The encoder's number of layers ``L``.
        prefix: Where the encoder sits in ``model`` (``"encoder."`` for a ``TaskModel``,
            ``""`` for a bare ``TransformerEncoder``).

    Returns:
        The depth, in ``0 .. num_layers + 1``.

    Raises:
        ValueError: For a parameter under ``prefix`` that is none of the known parts, or a
            layer index ``>= num_layers``.
    """
    top = num_layers + 1
    if not name.startswith(prefix):
        return top
    rest = name[len(prefix) :]
    if rest.startswith(_INPUT_SIDE):
        return 0
    if rest.startswith(_EVERY_LAYER):
        return num_layers
    if rest.startswith(_ABOVE_LAYERS):
        return top
    match = _LAYER.match(rest)
    if match:
        index = int(match.group(1))
        if index >= num_layers:
            raise ValueError(
                f"parameter {name!r} is in layer {index} but num_layers is {num_layers}; "
                "pass the encoder's config.num_layers"
            )
        return index + 1
    raise ValueError(
        f"parameter {name!r} is under the encoder prefix {prefix!r} but is none of "
        "embeddings.*, embedding_projection.*, query_embedding, layers.<i>.*, "
        "relative_position_bias.*, final_norm.*; layer-wise rates and gradual unfreezing "
        "need a TransformerEncoder-shaped encoder (turn the switches off for this model, or "
        "give its parts a depth in ptm_core/training/finetuning.py)"
    )


@runtime_checkable
class LayerGroups(Protocol):
    """A model that says the depth of each of its parameters (the "layer groups" hook).

    The functions of this module find depths under ``<prefix>layers`` of one encoder;
    a model of another shape (an encoder-decoder, XLM's encoder with its language table
    beside the stack) implements these two methods instead, and
    :func:`parameter_depths`, :func:`discriminative_param_groups` and
    :class:`GradualUnfreezing` use them whenever ``num_layers`` is not given.
    Depth ``0`` is the input side, :meth:`depth_top` the task head; a rate is
    ``lr * decay ** (top - depth)`` and unfreezing goes from the top down.
    """

    def depth_top(self) -> int:
        """The head's depth (every depth lies in ``0 .. depth_top()``)."""
        ...

    def parameter_depth(self, name: str) -> int:
        """The depth of the parameter called ``name`` in ``named_parameters()``."""
        ...


def encoder_decoder_depth(
    name: str,
    *,
    encoder_layers: int,
    decoder_layers: int,
    prefix: str = "model.",
    lm_head_depth: int | None = None,
) -> int:
    """The depth of one parameter of a task model on an encoder-decoder (BART/T5).

    The order follows the data flow from the output down: the head reads the decoder,
    every decoder layer reads the encoder's last state (cross-attention), and both stacks
    read the token table. So, from the top (with ``E = encoder_layers``,
    ``D = decoder_layers``, top ``= E + D + 1``)::

        top            the task head (everything not under ``prefix``), decoder final_norm
        E + D .. E + 1 decoder layers D-1 .. 0 (decoder relative_position_bias: E + D)
        E .. 1         encoder layers E-1 .. 0 (encoder final_norm and
                       relative_position_bias: E, the layer they finish / serve)
        0              embeddings of both sides (shared token table, positions), and
                       a soft prompt (``prompt``; the model then sits one ``model.`` deeper)

    This is ULMFiT's rule (Howard & Ruder, 2018, sections 3.2-3.3: layers farther from
    the output hold more general features, so they get smaller rates and are unfrozen
    later) and ELECTRA's layer-wise decay by distance from the output (Clark et al.,
    2020, appendix A), with the distance measured along the path the gradient of the
    head takes: through all decoder layers before it reaches the encoder.

    Args:
        name: a name from ``named_parameters()``.
        encoder_layers: ``E``.
        decoder_layers: ``D``.
        prefix: where the :class:`~ptm_core.encoders.encoder_decoder.EncoderDecoderModel`
            sits in the task model.
        lm_head_depth: the depth of ``lm_head.*`` (default: top; a classifier that never
            uses the LM head passes 0, so a tied token table stays at the bottom).

    Returns:
        The depth, in ``0 .. E + D + 1``.

    Raises:
        ValueError: a parameter under ``prefix`` that is none of the known parts.
    """
    top = encoder_layers + decoder_layers + 1
    if not name.startswith(prefix):
        return top
    rest = name[len(prefix) :]
    if rest == "prompt":  # a soft prompt (finetune.peft=prompt) is input: the embeddings' depth
        return 0
    if rest.startswith("model."):  # the encoder-decoder inside a soft-prompt wrapper
        return encoder_decoder_depth(
            name,
            encoder_layers=encoder_layers,
            decoder_layers=decoder_layers,
            prefix=prefix + "model.",
            lm_head_depth=lm_head_depth,
        )
    if rest.startswith("lm_head."):
        return top if lm_head_depth is None else lm_head_depth
    if rest.startswith("encoder."):
        if rest.startswith("encoder.final_norm."):
            return encoder_layers
        return layer_index(rest, encoder_layers, prefix="encoder.")
    if rest.startswith("decoder."):
        depth = layer_index(rest, decoder_layers, prefix="decoder.")
        # layer_index gives 0 (embeddings), i + 1 (layer i), D (bias), D + 1 (final_norm).
        return depth if depth == 0 else encoder_layers + depth
    raise ValueError(
        f"parameter {name!r} is under the encoder-decoder prefix {prefix!r} but is none of "
        "encoder.*, decoder.*, lm_head.*; give it a depth in "
        "ptm_core/training/finetuning.py:encoder_decoder_depth"
    )


def _depth_rule(
    model: nn.Module, num_layers: int | None, prefix: str
) -> tuple[int, Callable[[str], int]]:
    """``(top depth, name -> depth)``: the model's own :class:`LayerGroups` when it has
    them and ``num_layers`` is not given, else :func:`layer_index` under ``prefix``."""
    if num_layers is None and isinstance(model, LayerGroups):
        return model.depth_top(), model.parameter_depth
    layers = num_layers if num_layers is not None else _infer_num_layers(model, prefix)
    return layers + 1, lambda name: layer_index(name, layers, prefix=prefix)


def _infer_num_layers(model: nn.Module, prefix: str) -> int:
    encoder = model.get_submodule(prefix.rstrip(".")) if prefix else model
    layers = getattr(encoder, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(
            f"cannot find the encoder's layers at {prefix or '<model>'}layers of "
            f"{type(model).__name__}; pass num_layers= and the right prefix="
        )
    return len(layers)


def parameter_depths(
    model: nn.Module, num_layers: int | None = None, *, prefix: str = "encoder."
) -> Iterator[tuple[str, nn.Parameter, int]]:
    """Every distinct parameter of ``model`` with its depth (see :func:`layer_index`).

    A parameter registered under several names (ALBERT's shared layer appears in every
    ``layers.{i}``; an output layer tied to the token table) is yielded once, under its
    first name, at the **top-most** depth among its names: it serves that depth too, so
    it takes that depth's rate and is unfrozen together with it. With ALBERT's
    ``share_layers="all"`` the whole shared layer is at depth ``num_layers``.

    Args:
        model: The model (e.g. a ``TaskModel``).
        num_layers: The encoder's ``L``; default ``len(model.<prefix>layers)``.
        prefix: Where the encoder sits in ``model``.

    A model with :class:`LayerGroups` (and ``num_layers=None``) gives the depths itself.

    Yields:
        ``(name, parameter, depth)`` in ``named_parameters()`` order.
    """
    _, depth_of = _depth_rule(model, num_layers, prefix)
    first: dict[int, tuple[str, nn.Parameter]] = {}
    depth: dict[int, int] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        d = depth_of(name)
        key = id(param)
        if key not in first:
            first[key] = (name, param)
            depth[key] = d
        else:
            depth[key] = max(depth[key], d)
    for key, (name, param) in first.items():
        yield name, param, depth[key]


def _resolve_decay(layer_decay: float | str | None) -> float:
    if layer_decay is None:
        return 1.0
    if isinstance(layer_decay, str):
        if layer_decay not in LAYER_DECAY_PRESETS:
            raise ValueError(
                f"unknown layer_decay preset {layer_decay!r}; valid: "
                f"{', '.join(sorted(LAYER_DECAY_PRESETS))}, or a number in (0, 1]"
            )
        return LAYER_DECAY_PRESETS[layer_decay]
    if not 0.0 < layer_decay <= 1.0:
        raise ValueError(
            f"layer_decay must be in (0, 1] (1 = one rate for all), got {layer_decay}; "
            "ULMFiT's divisor 2.6 is layer_decay=1/2.6 or 'ulmfit'"
        )
    return float(layer_decay)


def discriminative_param_groups(
    model: nn.Module,
    *,
    learning_rate: float,
    weight_decay: float,
    layer_decay: float | str | None = None,
    num_layers: int | None = None,
    prefix: str = "encoder.",
) -> list[dict[str, Any]]:
    """AdamW parameter groups with one learning rate per depth.

    Depth ``d`` (see :func:`parameter_depths`; top = ``num_layers + 1`` = the task head)
    gets ``learning_rate * layer_decay ** (top - d)``. This one rule is

    - ULMFiT's discriminative fine-tuning (Howard & Ruder, 2018, Eq. 2 and Sec. 3.2:
      ``eta^{l-1} = eta^l / 2.6``): ``layer_decay="ulmfit"`` = ``1 / 2.6``;
    - ELECTRA's layer-wise learning-rate decay (Clark et al., 2020, Appendix A):
      ``layer_decay="electra"`` = ``0.8``. (ELECTRA's released code puts the task head
      at depth ``L + 2``, one empty depth above the last layer, so there every encoder
      rate carries one extra factor ``0.8``; here the head sits right above layer ``L``.)

    BERT's weight-decay rule is kept: parameters with ``ndim < 2`` (biases, norms) get
    ``weight_decay = 0``. Tied and shared parameters appear once. Frozen parameters
    (``requires_grad=False``) are **kept** in the groups, so that
    :class:`GradualUnfreezing` can enable them later; AdamW skips a parameter whose
    ``grad`` is ``None``. Groups are ordered top depth first, so ``param_groups[0]`` holds
    the peak rate (what a trainer logs as ``lr``).

    Each group has ``params``, ``lr`` (the group's own peak rate), ``weight_decay``,
    ``depth`` and ``lr_scale`` (``layer_decay ** (top - depth)``). A ``LambdaLR`` built on
    the optimizer stores each group's ``lr`` as its ``initial_lr`` and multiplies it by the
    schedule, so every schedule keeps the per-depth ratios.

    A model with :class:`LayerGroups` (BART/T5, XLM) sets the depths and the top itself.

    Args:
        model: The model; its encoder at ``prefix`` (``TaskModel.encoder``).
        learning_rate: The top (head) rate.
        weight_decay: Decoupled weight decay for parameters with ``ndim >= 2``.
        layer_decay: Factor per depth in ``(0, 1]``, a preset name
            (:data:`LAYER_DECAY_PRESETS`: ``"electra"``, ``"ulmfit"``), or ``None`` (= 1:
            one rate for all, BERT's fine-tuning).
        num_layers: The encoder's ``L``; default ``len(model.<prefix>layers)``.
        prefix: Where the encoder sits in ``model``.

    Returns:
        The list of groups for ``torch.optim.AdamW(groups, lr=learning_rate, ...)``.

    Raises:
        ValueError: On an unknown preset or a decay outside ``(0, 1]``.
    """
    decay = _resolve_decay(layer_decay)
    top, _ = _depth_rule(model, num_layers, prefix)
    buckets: dict[tuple[int, bool], list[nn.Parameter]] = {}
    for _, param, depth in parameter_depths(model, num_layers, prefix=prefix):
        buckets.setdefault((depth, param.ndim >= 2), []).append(param)
    groups: list[dict[str, Any]] = []
    for (depth, decays), params in sorted(
        buckets.items(), key=lambda kv: (-kv[0][0], not kv[0][1])
    ):
        scale = decay ** (top - depth)
        groups.append(
            {
                "params": params,
                "lr": learning_rate * scale,
                "weight_decay": weight_decay if decays else 0.0,
                "depth": depth,
                "lr_scale": scale,
            }
        )
    return groups


def slanted_triangular(
    optimizer: torch.optim.Optimizer,
    total_steps: int,
    cut_frac: float = 0.1,
    ratio: float = 32.0,
) -> LambdaLR:
    """ULMFiT's slanted triangular learning rate (Howard & Ruder, 2018, Eq. 3).

    With ``T = total_steps`` and ``cut = floor(T * cut_frac)``, at scheduler step ``t``::

        p  = t / cut                                   if t < cut
           = 1 - (t - cut) / (cut * (1 / cut_frac - 1))  otherwise
        lr = lr_max * (1 + p * (ratio - 1)) / ratio

    a short linear rise from ``lr_max / ratio`` to ``lr_max`` at ``t = cut``, then a long
    linear decay back to ``lr_max / ratio`` at ``t = T``. The paper's defaults are
    ``cut_frac = 0.1``, ``ratio = 32``. Eq. 3 is followed exactly whenever ``T *
    cut_frac`` is a whole number; when the floor makes the decay reach ``lr_max / ratio``
    before ``T`` (or once ``t > T``), ``p`` is held at 0 instead of turning the rate
    negative. Each group's ``lr`` is its ``lr_max`` (per-depth rates from
    :func:`discriminative_param_groups` keep their ratios). Call ``scheduler.step()`` once
    per optimizer step.

    Args:
        optimizer: The optimizer; each group's ``lr`` is its peak.
        total_steps: ``T``, the number of optimizer steps.
        cut_frac: Fraction of steps spent increasing, in ``(0, 1)``.
        ratio: How much smaller the lowest rate is than the peak, ``>= 1``.

    Returns:
        A ``LambdaLR`` over all groups.

    Raises:
        ValueError: If ``total_steps * cut_frac < 1`` (no warm-up step) or an argument is
            out of range.
    """
    if not 0.0 < cut_frac < 1.0:
        raise ValueError(f"cut_frac must be in (0, 1), got {cut_frac} (ULMFiT uses 0.1)")
    if ratio < 1.0:
        raise ValueError(f"ratio must be >= 1, got {ratio} (ULMFiT uses 32)")
    cut = math.floor(total_steps * cut_frac)
    if cut < 1:
        raise ValueError(
            f"the slanted triangular schedule needs total_steps * cut_frac >= 1, got "
            f"{total_steps} * {cut_frac}; train for at least {math.ceil(1 / cut_frac)} steps "
            "or raise cut_frac"
        )
    decay_length = cut * (1.0 / cut_frac - 1.0)

    def multiplier(step: int) -> float:
        p = step / cut if step < cut else 1.0 - (step - cut) / decay_length
        return (1.0 + max(p, 0.0) * (ratio - 1.0)) / ratio

    return LambdaLR(optimizer, multiplier)


class GradualUnfreezing:
    """ULMFiT's gradual unfreezing (Howard & Ruder, 2018, Sec. 3.3), top down by depth.

    At step 0 only the top depth (``num_layers + 1``: the task head, and anything else above
    the encoder) trains; every ``every_steps`` optimizer steps one more depth below is
    unfrozen (layer ``L``, then ``L - 1``, ..., then the embeddings), until all train:
    at step ``s`` the depths ``>= top - s // every_steps`` train. ULMFiT unfreezes one
    layer group per epoch: pass ``every_steps = batches_per_epoch``.

    The state is a function of the step alone: :meth:`apply` (``s``) sets ``requires_grad``
    for the step about to run, so calling it with the step restored from a checkpoint
    gives the same state and resume stays bit-identical. Only parameters that were
    trainable when this object was built are ever touched (a frozen feature encoder stays
    frozen).

    Interplay with AdamW: a parameter with ``requires_grad=False`` gets ``grad = None`` and
    AdamW skips it entirely, **including its decoupled weight decay**, so a frozen depth is
    bit-identical until it is unfrozen, and its Adam moments start at its first step.
    Build the optimizer over all parameters (:func:`discriminative_param_groups` keeps the
    frozen ones) *before* the first :meth:`apply`, since ``build_optimizer`` drops
    parameters that do not require grad.

    Two ways to freeze, ``mode``:

    - ``"requires_grad"`` (default): :meth:`on_step_begin` toggles ``requires_grad``, so the
      frozen part builds no graph (cheaper backward). Not for DDP (its reducer is fixed at
      wrap time) and it makes ``torch.compile`` recompile at each unfreezing.
    - ``"grad_mask"``: everything keeps ``requires_grad``; :meth:`on_after_backward` drops
      (``grad = None``) the gradients of frozen depths. Call it after the last backward of
      the step and before gradient clipping; works under DDP and ``torch.compile``.

    A model with :class:`LayerGroups` sets the depths itself (BART/T5: head, decoder
    layers top down, encoder layers top down, embeddings; see
    :func:`encoder_decoder_depth`).

    Args:
        model: The model; its encoder at ``prefix``.
        num_layers: The encoder's ``L``; ``None`` = ``len(model.<prefix>layers)``.
        every_steps: Optimizer steps between two unfreezings, ``>= 1``.
        prefix: Where the encoder sits in ``model``.
        mode: ``"requires_grad"`` or ``"grad_mask"``.

    Example:
        >>> unfreeze = GradualUnfreezing(model, every_steps=len(train_batches))
        >>> for step in range(start, total):
        ...     unfreeze.on_step_begin(step)
        ...     model(batch).loss.backward()
        ...     unfreeze.on_after_backward(step)
        ...     optimizer.step(); optimizer.zero_grad(set_to_none=True)
    """

    def __init__(
        self,
        model: nn.Module,
        num_layers: int | None = None,
        *,
        every_steps: int,
        prefix: str = "encoder.",
        mode: Literal["requires_grad", "grad_mask"] = "requires_grad",
    ) -> None:
        if every_steps < 1:
            raise ValueError(f"every_steps must be >= 1, got {every_steps}")
        if mode not in ("requires_grad", "grad_mask"):
            raise ValueError(f"mode must be 'requires_grad' or 'grad_mask', got {mode!r}")
        self.top, _ = _depth_rule(model, num_layers, prefix)
        self.num_layers = self.top - 1
        self.every_steps = every_steps
        self.mode = mode
        self._params = [
            (param, depth)
            for _, param, depth in parameter_depths(model, num_layers, prefix=prefix)
            if param.requires_grad
        ]

    @property
    def fully_unfrozen_at(self) -> int:
        """The first step at which every depth trains."""
        return self.top * self.every_steps

    def lowest_trainable_depth(self, step: int) -> int:
        """The lowest depth that trains at optimizer step ``step`` (0-based)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        return max(0, self.top - step // self.every_steps)

    def is_trainable(self, depth: int, step: int) -> bool:
        """Whether depth ``depth`` trains at optimizer step ``step``."""
        return depth >= self.lowest_trainable_depth(step)

    def apply(self, step: int) -> None:
        """Set ``requires_grad`` of every managed parameter for optimizer step ``step``."""
        lowest = self.lowest_trainable_depth(step)
        for param, depth in self._params:
            param.requires_grad_(depth >= lowest)

    def on_step_begin(self, step: int) -> None:
        """Before the forward passes of optimizer step ``step`` (the number of steps done).

        ``"requires_grad"`` mode: :meth:`apply`. ``"grad_mask"`` mode: nothing.
        """
        if self.mode == "requires_grad":
            self.apply(step)

    def on_after_backward(self, step: int) -> None:
        """After the last backward of step ``step``, before clipping and the optimizer step.

        ``"grad_mask"`` mode: sets ``grad = None`` on every frozen parameter, so neither the
        clipped norm nor AdamW (nor its weight decay) sees it. ``"requires_grad"`` mode:
        nothing (frozen parameters have no gradient).
        """
        if self.mode != "grad_mask":
            return
        lowest = self.lowest_trainable_depth(step)
        for param, depth in self._params:
            if depth < lowest:
                param.grad = None
