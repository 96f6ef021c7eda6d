"""Attention-head pruning by importance (Michel et al., 2019) and layer dropping.

Michel, Levy and Neubig (2019), "Are Sixteen Heads Really Better than One?": multiply each
head's output by a gate ``xi_h`` (all 1) and score the head by how much the loss moves with
the gate, ``I_h = E_x |dL(x) / d xi_h|`` over a dev set; scores are normalised per layer
(l2, after Molchanov et al., 2017). The least important heads are removed globally: a pruned
model is physically smaller (the head's rows of the fused Q/K/V projection and its columns of
the output projection are sliced away), so layers may keep different numbers of heads
(:class:`~ptm_core.compress.pruned.PrunedEncoderConfig`). Removing a head gives exactly what gating it to 0 gives.

Layer dropping (Sajjad et al., 2020, "Poor Man's BERT"; Fan et al., 2020, LayerDrop at
inference) keeps a chosen subset of layers: ``bottom:K`` (drop the top layers, Sajjad et
al.'s best strategy without re-training), ``top:K``, ``every-other`` (keep 0, 2, 4, ...), or
explicit indices ``0,1,3``.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.compress.pruned import PrunedEncoderConfig
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import TaskModel
from ptm_core.modules.attention import MultiHeadSelfAttention

LossFn = Callable[[nn.Module, dict[str, Tensor]], Tensor]


def encoder_of(model: nn.Module) -> TransformerEncoder:
    """The :class:`TransformerEncoder` of a task model, or the model itself."""
    encoder = model.encoder if isinstance(model, TaskModel) else model
    if not isinstance(encoder, TransformerEncoder):
        raise TypeError(
            f"expected a TransformerEncoder or a TaskModel on one, got {type(model).__name__}"
        )
    return encoder


def attention_modules(encoder: TransformerEncoder) -> list[MultiHeadSelfAttention]:
    """Each layer's self-attention, refusing encoders whose heads cannot be told apart.

    Raises:
        ValueError: shared layers (ALBERT: one module serves every layer) or relative /
            bucketed positions (XLNet, T5: other attention modules or a bias shared by all
            layers' heads).
    """
    config = encoder.config
    if config.share_layers != "none" or config.position_encoding != "absolute":
        raise ValueError(
            "head importance and pruning need one attention module per layer with absolute "
            f"positions; this encoder has share_layers={config.share_layers!r}, "
            f"position_encoding={config.position_encoding!r}. Use drop-layers or int8 instead"
        )
    modules = []
    for layer in encoder.layers:
        attention = getattr(layer, "attention", None)
        if not isinstance(attention, MultiHeadSelfAttention):
            raise ValueError(
                f"layer attention is {type(attention).__name__}, not MultiHeadSelfAttention"
            )
        modules.append(attention)
    return modules


@contextlib.contextmanager
def head_mask(encoder: TransformerEncoder, mask: Sequence[Tensor]) -> Iterator[None]:
    """Gate every head's output by ``mask[layer][head]`` while the context is open.

    The gate multiplies the head's context vectors before the output projection, which is
    Michel et al.'s ``xi_h``: ``MHA(x) = sum_h xi_h Att_h(x)``.

    Args:
        encoder: the encoder.
        mask: one tensor ``(h_l,)`` per layer (float; may require grad).
    """
    modules = attention_modules(encoder)
    if len(mask) != len(modules):
        raise ValueError(f"mask has {len(mask)} layers, the encoder {len(modules)}")
    handles = []
    for attention, gate in zip(modules, mask, strict=True):
        if gate.shape != (attention.num_heads,):
            raise ValueError(
                f"a layer with {attention.num_heads} heads needs a mask of shape "
                f"({attention.num_heads},), got {tuple(gate.shape)}"
            )

        def hook(
            module: nn.Module,
            args: tuple[Tensor, ...],
            gate: Tensor = gate,
            heads: int = attention.num_heads,
        ) -> tuple[Tensor, ...]:
            context = args[0]  # (B, L, h*d)
            gated = context.unflatten(-1, (heads, -1)) * gate[:, None].to(context.dtype)
            return (gated.flatten(-2), *args[1:])

        handles.append(attention.out_proj.register_forward_pre_hook(hook))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def task_loss_fn(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    """The default loss: a :class:`TaskModel`'s own loss on a labelled batch."""
    loss = model(batch).loss
    if loss is None:
        raise ValueError(
            "head importance needs labelled batches (the task loss); pass dev data with labels "
            "or a loss_fn"
        )
    return loss


def head_importance(
    model: nn.Module,
    batches: Iterable[dict[str, Tensor]],
    loss_fn: LossFn = task_loss_fn,
    *,
    normalize_layers: bool = True,
) -> list[Tensor]:
    """Michel et al. (2019) head importance, ``I_h = mean_batches |dL / d xi_h|``.

    Michel et al. take the expectation of the absolute gradient per example; with batches of
    one example this is exactly theirs, with larger batches it is the absolute gradient of
    each batch's mean loss (as transformers' bertology example computes it). The model runs
    in eval mode (no dropout); its parameters receive no gradient.

    Args:
        model: a :class:`TaskModel` or :class:`TransformerEncoder` (with ``loss_fn``).
        batches: dev batches (dicts of tensors ``loss_fn`` understands).
        loss_fn: ``(model, batch) -> 0-d loss``; default the task model's loss.
        normalize_layers: divide each layer's scores by their l2 norm (Michel et al.,
            following Molchanov et al., 2017), which makes layers comparable for the global
            ranking.

    Returns:
        One tensor ``(h_l,)`` per layer, non-negative.
    """
    encoder = encoder_of(model)
    modules = attention_modules(encoder)
    gates = [torch.ones(m.num_heads, requires_grad=True) for m in modules]
    totals = [torch.zeros(m.num_heads) for m in modules]
    count = 0
    was_training = model.training
    model.eval()
    try:
        with head_mask(encoder, gates):
            for batch in batches:
                loss = loss_fn(model, batch)
                grads = torch.autograd.grad(loss, gates, allow_unused=True)
                for total, grad in zip(totals, grads, strict=True):
                    if grad is not None:
                        total += grad.detach().abs()
                count += 1
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("head importance needs at least one batch of dev data")
    scores = [total / count for total in totals]
    if normalize_layers:
        scores = [s / s.norm().clamp(min=1e-20) for s in scores]
    return scores


def select_heads_to_prune(
    importance: Sequence[Tensor], fraction: float, *, min_heads_per_layer: int = 1
) -> dict[int, list[int]]:
    """The ``round(fraction * total)`` least important heads, ranked globally.

    Args:
        importance: per layer ``(h_l,)`` scores (:func:`head_importance`).
        fraction: share of all heads to remove, in ``[0, 1)``.
        min_heads_per_layer: heads every layer keeps (a layer with no head would need a
            special attention-free path; Michel et al. allow it, ptm keeps >= 1).

    Returns:
        ``{layer: [head indices to remove]}`` (layers with nothing to remove left out).
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1), got {fraction!r} (e.g. 0.3 = 30% of heads)")
    ranked = sorted(
        (float(score), layer, head)
        for layer, scores in enumerate(importance)
        for head, score in enumerate(scores.tolist())
    )
    target = round(fraction * len(ranked))
    left = [len(scores) for scores in importance]
    chosen: dict[int, list[int]] = {}
    for _, layer, head in ranked:
        if sum(len(v) for v in chosen.values()) >= target:
            break
        if left[layer] <= min_heads_per_layer:
            continue
        chosen.setdefault(layer, []).append(head)
        left[layer] -= 1
    return {layer: sorted(heads) for layer, heads in sorted(chosen.items())}


def _slice_attention(attention: MultiHeadSelfAttention, keep: list[int]) -> MultiHeadSelfAttention:
    """A smaller copy of ``attention`` with only the heads ``keep``."""
    heads, d = attention.num_heads, attention.head_dim
    hidden = attention.qkv_proj.in_features
    bias = attention.qkv_proj.bias is not None
    new = MultiHeadSelfAttention(
        hidden, len(keep), attention.dropout, bias=bias, scale=attention.scale is None, head_dim=d
    )
    head_rows = torch.tensor([h * d + i for h in keep for i in range(d)])
    # Fused rows are [q (h*d), k (h*d), v (h*d)], each head's d rows contiguous.
    qkv_rows = torch.cat([part * heads * d + head_rows for part in range(3)])
    with torch.no_grad():
        new.qkv_proj.weight.copy_(attention.qkv_proj.weight[qkv_rows])
        new.out_proj.weight.copy_(attention.out_proj.weight[:, head_rows])
        if bias:
            new.qkv_proj.bias.copy_(attention.qkv_proj.bias[qkv_rows])
            new.out_proj.bias.copy_(attention.out_proj.bias)
    new.scale = attention.scale
    return new


def prune_heads(encoder: TransformerEncoder, heads: dict[int, list[int]]) -> TransformerEncoder:
    """A copy of ``encoder`` without the attention heads ``heads`` (``{layer: [head]}``).

    Args:
        encoder: an absolute-position encoder without layer sharing.
        heads: head indices (within each layer's current heads) to remove.

    Returns:
        The smaller encoder; ``config.heads_per_layer`` records each layer's heads. Its
        output equals the original's with those heads gated to 0 (:func:`head_mask`).
    """
    modules = attention_modules(encoder)
    pruned = copy.deepcopy(encoder)
    counts = [m.num_heads for m in modules]
    for layer, remove in heads.items():
        if not 0 <= layer < len(modules):
            raise ValueError(f"layer {layer} does not exist (the encoder has {len(modules)})")
        bad = [h for h in remove if not 0 <= h < modules[layer].num_heads]
        if bad:
            raise ValueError(f"layer {layer} has {modules[layer].num_heads} heads; no head {bad}")
        keep = [h for h in range(modules[layer].num_heads) if h not in set(remove)]
        if not keep:
            raise ValueError(f"pruning every head of layer {layer}; keep at least one per layer")
        pruned.layers[layer].attention = _slice_attention(modules[layer], keep)
        counts[layer] = len(keep)
    # A pruned encoder has no Hugging Face class, so the imported model type is dropped.
    values = {k: v for k, v in encoder.config.to_dict().items() if k != "hf_model_type"}
    values["heads_per_layer"] = counts
    pruned.config = PrunedEncoderConfig.from_dict(values)
    return pruned


def replace_encoder(model: nn.Module, encoder: TransformerEncoder) -> nn.Module:
    """``model`` with its encoder swapped (a task model keeps its head), or ``encoder``."""
    if isinstance(model, TaskModel):
        new = TaskModel(
            encoder, model.head, model.kind, model.num_labels, label_names=model.label_names
        )
        return new.train(model.training)
    return encoder


def layers_to_keep(spec: str | Sequence[int], num_layers: int) -> list[int]:
    """Parse a layer-dropping choice into sorted layer indices.

    Args:
        spec: ``"bottom:K"`` (the K lowest layers), ``"top:K"`` (the K highest),
            ``"every-other"`` (0, 2, 4, ...), ``"0,2,3"``, or a sequence of indices.
        num_layers: layers of the encoder.

    Returns:
        The kept indices, ascending, at least one.
    """
    if not isinstance(spec, str):
        keep = sorted(set(int(i) for i in spec))
    elif spec == "every-other":
        keep = list(range(0, num_layers, 2))
    elif spec.startswith(("bottom:", "top:")):
        where, _, count_text = spec.partition(":")
        try:
            count = int(count_text)
        except ValueError:
            raise ValueError(f"--keep {spec!r}: {where}:K needs an integer K") from None
        if not 1 <= count <= num_layers:
            raise ValueError(
                f"--keep {spec!r}: K must be in 1..{num_layers} (the encoder's layers)"
            )
        keep = (
            list(range(count)) if where == "bottom" else list(range(num_layers - count, num_layers))
        )
    else:
        try:
            keep = sorted(set(int(part) for part in spec.split(",") if part.strip()))
        except ValueError:
            raise ValueError(
                f"--keep {spec!r}: expected bottom:K, top:K, every-other or comma-separated "
                "layer indices such as 0,2,3"
            ) from None
    bad = [i for i in keep if not 0 <= i < num_layers]
    if bad or not keep:
        raise ValueError(
            f"--keep {spec!r}: layers {bad or 'none'} out of range; the encoder has layers "
            f"0..{num_layers - 1}"
        )
    return keep


def drop_layers(encoder: TransformerEncoder, keep: Sequence[int]) -> TransformerEncoder:
    """A copy of ``encoder`` with only the layers ``keep`` (in order), weights unchanged.

    Embeddings, the final norm and every kept layer's weights are copied as they are; with
    pruned heads the kept layers' ``heads_per_layer`` entries follow them. Shared layers
    (ALBERT) keep their shared module.
    """
    config = encoder.config
    values: dict[str, Any] = {**config.to_dict(), "num_layers": len(keep)}
    if isinstance(config, PrunedEncoderConfig):
        values["heads_per_layer"] = [config.heads_per_layer[i] for i in keep]
    new = encoder_from_config(EncoderConfig.from_dict(values))
    new.load_state_dict(
        {k: v for k, v in encoder.state_dict().items() if not k.startswith("layers.")},
        strict=False,
    )
    for target, source in enumerate(keep):
        new.layers[target].load_state_dict(encoder.layers[source].state_dict())
    return new.train(encoder.training)


def parameter_count(model: nn.Module) -> int:
    """Number of parameters (shared tensors once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
