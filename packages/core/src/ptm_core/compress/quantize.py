"""Post-training quantisation of the linear layers: dynamic int8, weight-only int8/int4.

What torch 2.15 offers, on the CPU, without torchao (which is not a ptm dependency):

* **Dynamic int8** (Jacob et al., 2018; what ``torch.ao.quantization.quantize_dynamic`` and
  Optimum's ORT dynamic quantisation do): weights are stored as int8 with one scale per
  output channel (symmetric), activations are quantised to uint8 on the fly per batch, and
  the GEMM runs in int8 (fbgemm/onednn kernels). This is the mode that makes a BERT faster
  on a CPU. ``torch.ao.quantization`` is deprecated in favour of torchao's ``quantize_``
  (the warning says "will be removed in 2.10", yet 2.15 still ships and runs it); the
  warnings are silenced around the one call, and :func:`quantize_dynamic_int8` is the one
  place to change when it goes.
* **Weight-only int8 / int4** (the gpt-fast / torchao ``int8_weight_only`` and
  ``int4_weight_only`` schemes): weights stored as int8 with one scale per output channel,
  or as int4 in groups of ``group_size`` input channels with a scale and a zero per group;
  activations stay float. The CPU kernels are ``aten._weight_int8pack_mm`` and
  ``aten._weight_int4pack_mm_for_cpu``. They shrink the file and the weight memory (4x /
  about 7x); on a CPU at BERT sizes they are not faster than fp32 GEMMs (they are made for
  memory-bound decoding), see ``benchmarks/results/compression.md``.

Embeddings and LayerNorms stay float in every mode (as in Optimum's and torch's dynamic
quantisation); the embedding table is then most of a quantised small model's file.

A quantised directory keeps the encoder's ``config.json`` with ``ptm_quantization`` added,
so a float loader refuses it by name; :func:`~ptm_core.compress.load_compressed` reads it.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

WeightBits = Literal[4, 8]
DEFAULT_GROUP_SIZE = 32
# Group sizes aten._weight_int4pack_mm_for_cpu accepts.
INT4_GROUP_SIZES = (32, 64, 128, 256)


@contextlib.contextmanager
def _quiet_ao() -> Iterator[None]:
    """Silence torch.ao's deprecation warnings (see the module docstring)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization is deprecated.*")
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor, torch\.quantize_per.*")
        yield


def dynamic_linear_type() -> type[nn.Module]:
    """The module class :func:`quantize_dynamic_int8` puts in place of ``nn.Linear``."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    return DynamicQuantizedLinear


def quantize_dynamic_int8(model: nn.Module, *, inplace: bool = False) -> nn.Module:
    """Dynamic int8 quantisation of every ``nn.Linear`` (per-channel symmetric weights).

    Args:
        model: a float model in eval mode (encoder or task model), on the CPU.
        inplace: change ``model`` itself instead of a deep copy.

    Returns:
        The model with each ``nn.Linear`` replaced by
        ``torch.ao.nn.quantized.dynamic.Linear`` (int8 weights, dynamic uint8
        activations). CPU only.
    """
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    target = model if inplace else copy.deepcopy(model)
    with _quiet_ao():
        quantize_dynamic(
            target.eval(), {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True
        )
    return target


def dynamic_int8_state(model: nn.Module) -> dict[str, Tensor]:
    """The tensors of a :func:`quantize_dynamic_int8` model, safetensors-ready.

    Each quantised linear ``N`` becomes ``N.weight_int8`` ``(out, in)`` int8,
    ``N.weight_scale`` ``(out,)`` float32, ``N.weight_zero_point`` ``(out,)`` int32 and
    ``N.bias``; every other tensor keeps its ``state_dict`` name.
    """
    quantised = dynamic_linear_type()
    state: dict[str, Tensor] = {}
    prefixes = []
    for name, module in model.named_modules():
        if isinstance(module, quantised):
            prefixes.append(name + ".")
            weight, bias = module._weight_bias()  # type: ignore[operator]
            state[f"{name}.weight_int8"] = weight.int_repr().contiguous()
            state[f"{name}.weight_scale"] = weight.q_per_channel_scales().float().contiguous()
            state[f"{name}.weight_zero_point"] = (
                weight.q_per_channel_zero_points().to(torch.int32).contiguous()
            )
            if bias is not None:
                state[f"{name}.bias"] = bias.detach().contiguous()
    for name, tensor in model.state_dict().items():
        if not name.startswith(tuple(prefixes)) and isinstance(tensor, Tensor):
            state[name] = tensor.detach().contiguous()
    return state


def load_dynamic_int8_state(model: nn.Module, state: dict[str, Tensor], *, source: str) -> None:
    """Fill a :func:`quantize_dynamic_int8` model from :func:`dynamic_int8_state`'s tensors.

    Raises:
        ValueError: missing, unknown or misshapen tensors, listed with ``source``.
    """
    quantised = dynamic_linear_type()
    used: set[str] = set()
    problems: list[str] = []
    for name, module in model.named_modules():
        if not isinstance(module, quantised):
            continue
        keys = [f"{name}.weight_int8", f"{name}.weight_scale", f"{name}.weight_zero_point"]
        if any(k not in state for k in keys):
            problems.append(f"{name}: int8 weight, scale or zero point missing")
            continue
        weight = state[keys[0]]
        expected = (module.out_features, module.in_features)
        if tuple(weight.shape) != expected:
            problems.append(f"{keys[0]}: file {tuple(weight.shape)} vs model {expected}")
            continue
        with _quiet_ao():
            qweight = torch._make_per_channel_quantized_tensor(
                weight, state[keys[1]].double(), state[keys[2]].long(), 0
            )
        bias = state.get(f"{name}.bias")
        module.set_weight_bias(qweight, bias)  # type: ignore[operator]
        used.update(keys)
        if bias is not None:
            used.add(f"{name}.bias")
    rest = {k: v for k, v in state.items() if k not in used}
    prefixes = tuple(n + "." for n, m in model.named_modules() if isinstance(m, quantised))
    expected_rest = {k for k in model.state_dict() if not k.startswith(prefixes)}
    problems += [f"{k}: missing from the file" for k in sorted(expected_rest - set(rest))]
    problems += [f"{k}: unknown to the model" for k in sorted(set(rest) - expected_rest)]
    if problems:
        raise ValueError(f"{source}: does not fit the int8 model:\n  " + "\n  ".join(problems))
    # The quantised modules' own entries (packed weights, set above) go back in unchanged,
    # in the model's own state dict: its version metadata tells their loader the layout.
    full = model.state_dict()
    full.update(rest)
    model.load_state_dict(full)


class WeightOnlyLinear(nn.Module):
    """A linear layer with int8 or int4 weights and float activations (CPU kernels).

    ``bits=8``: ``W ~ q * s`` with ``q`` int8 ``(N, K)`` and one scale per output row
    (symmetric); ``aten._weight_int8pack_mm``. ``bits=4``: asymmetric per group of
    ``group_size`` input columns, tinygemm's convention ``W ~ (q - 8) * s + z`` with ``q`` in
    ``0..15`` stored two per byte ``(N, K / 2)`` and ``scales_and_zeros`` ``(K / G, N, 2)``;
    ``aten._weight_int4pack_mm_for_cpu`` on a packed copy made on first use.

    Args:
        in_features: ``K``.
        out_features: ``N``.
        bias: whether there is a (float) bias.
        bits: 8 or 4.
        group_size: ``G`` for ``bits=4`` (``K`` must be divisible by it).

    Shapes:
        ``(..., K) -> (..., N)``, float32.
    """

    weight_int8: Tensor
    weight_scale: Tensor
    weight_int4: Tensor
    scales_and_zeros: Tensor

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        bits: WeightBits = 8,
        group_size: int = DEFAULT_GROUP_SIZE,
    ) -> None:
        super().__init__()
        if bits not in (4, 8):
            raise ValueError(f"bits must be 4 or 8, got {bits!r}")
        if bits == 4 and in_features % group_size:
            raise ValueError(
                f"int4 weights need in_features={in_features} divisible by group_size="
                f"{group_size}; choose a group size that divides it"
            )
        self.in_features, self.out_features = in_features, out_features
        self.bits, self.group_size = bits, group_size
        if bits == 8:
            self.register_buffer(
                "weight_int8", torch.zeros(out_features, in_features, dtype=torch.int8)
            )
            self.register_buffer("weight_scale", torch.ones(out_features))
        else:
            self.register_buffer(
                "weight_int4", torch.zeros(out_features, in_features // 2, dtype=torch.uint8)
            )
            self.register_buffer(
                "scales_and_zeros", torch.zeros(in_features // group_size, out_features, 2)
            )
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        self._packed: Tensor | None = None

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, bits: WeightBits = 8, group_size: int = DEFAULT_GROUP_SIZE
    ) -> WeightOnlyLinear:
        """Quantise a float ``nn.Linear`` (round to nearest)."""
        module = cls(
            linear.in_features, linear.out_features, linear.bias is not None, bits, group_size
        )
        weight = linear.weight.detach().float()  # (N, K)
        if bits == 8:
            scale = (weight.abs().amax(dim=1) / 127).clamp(min=1e-12)
            module.weight_int8.copy_((weight / scale[:, None]).round().clamp(-128, 127))
            module.weight_scale.copy_(scale)
        else:
            groups = weight.view(linear.out_features, -1, group_size)  # (N, K/G, G)
            low, high = groups.amin(-1), groups.amax(-1)  # (N, K/G)
            scale = ((high - low) / 15).clamp(min=1e-12)
            q = ((groups - low[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.uint8)
            q = q.view(linear.out_features, linear.in_features)
            module.weight_int4.copy_(q[:, 0::2] | (q[:, 1::2] << 4))
            zero = low + 8 * scale
            module.scales_and_zeros.copy_(torch.stack([scale, zero], dim=-1).transpose(0, 1))
        if linear.bias is not None:
            assert module.bias is not None
            module.bias.data.copy_(linear.bias.detach().float())
        return module

    def _unpacked_int4(self) -> Tensor:
        low = self.weight_int4 & 0xF
        high = self.weight_int4 >> 4
        return torch.stack([low, high], dim=-1).view(self.out_features, self.in_features)

    def dequantized_weight(self) -> Tensor:
        """The float ``(N, K)`` weight the integers stand for."""
        if self.bits == 8:
            return self.weight_int8.float() * self.weight_scale[:, None]
        q = self._unpacked_int4().float().view(self.out_features, -1, self.group_size)
        scale, zero = self.scales_and_zeros.transpose(0, 1).unbind(-1)  # (N, K/G) each
        return ((q - 8) * scale[..., None] + zero[..., None]).view(
            self.out_features, self.in_features
        )

    def _apply(self, fn: Any, recurse: bool = True) -> WeightOnlyLinear:
        self._packed = None  # re-pack on the new device / after loading
        return super()._apply(fn, recurse)

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        self._packed = None
        super()._load_from_state_dict(*args, **kwargs)

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, self.in_features).float().contiguous()  # (M, K)
        if self.bits == 8:
            out = torch.ops.aten._weight_int8pack_mm(flat, self.weight_int8, self.weight_scale)
        else:
            if self._packed is None:
                self._packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
                    self._unpacked_int4().to(torch.int32), 2
                )
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                flat, self._packed, self.group_size, self.scales_and_zeros
            )
        if self.bias is not None:
            out = out + self.bias
        return out.view(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        group = f", group_size={self.group_size}" if self.bits == 4 else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}{group}"


def _linears(model: nn.Module) -> Iterator[tuple[str, nn.Module, str, nn.Linear]]:
    """``(name, parent, attribute, linear)`` for every ``nn.Linear`` of ``model``."""
    for name, module in list(model.named_modules()):
        for child_name, child in module.named_children():
            if isinstance(child, nn.Linear):
                full = f"{name}.{child_name}" if name else child_name
                yield full, module, child_name, child


def quantize_weight_only(
    model: nn.Module,
    bits: WeightBits = 8,
    group_size: int = DEFAULT_GROUP_SIZE,
    *,
    inplace: bool = False,
) -> tuple[nn.Module, list[str], list[str]]:
    """Replace every ``nn.Linear`` by a :class:`WeightOnlyLinear` where the CPU kernel runs.

    Each candidate is checked once on a random input against its own dequantised weight;
    a layer whose shape the kernel refuses (int4: ``K`` not divisible by ``group_size``)
    stays float and is listed.

    Args:
        model: a float model (encoder or task model) on the CPU.
        bits: 8 or 4.
        group_size: int4 group size.
        inplace: change ``model`` itself instead of a deep copy.

    Returns:
        ``(model, quantised, skipped)``: the model and the names of the linears that were
        and were not quantised (with the reason).
    """
    if bits == 4 and group_size not in INT4_GROUP_SIZES:
        raise ValueError(
            f"group_size={group_size}: the CPU int4 kernel takes groups of "
            f"{', '.join(map(str, INT4_GROUP_SIZES))} input channels; pick one of them"
        )
    target = model if inplace else copy.deepcopy(model)
    quantised: list[str] = []
    skipped: list[str] = []
    probe = torch.Generator().manual_seed(0)
    for name, parent, attribute, linear in list(_linears(target)):
        try:
            module = WeightOnlyLinear.from_linear(linear, bits, group_size)
            x = torch.randn(3, linear.in_features, generator=probe)
            expected = F.linear(x, module.dequantized_weight(), module.bias)
            if not torch.allclose(module(x), expected, atol=1e-3, rtol=1e-3):
                raise RuntimeError("kernel output differs from the dequantised weight")
        except (RuntimeError, ValueError) as exc:
            skipped.append(f"{name} ({str(exc).splitlines()[0]})")
            continue
        setattr(parent, attribute, module)
        quantised.append(name)
    return target.eval(), quantised, skipped


def weight_only_shell(
    model: nn.Module, names: list[str], bits: WeightBits, group_size: int
) -> None:
    """Put empty :class:`WeightOnlyLinear` modules at ``names`` (the loader's skeleton)."""
    by_name = {
        name: (parent, attribute, linear) for name, parent, attribute, linear in _linears(model)
    }
    for name in names:
        if name not in by_name:
            raise ValueError(f"{name}: no such linear layer in the model")
        parent, attribute, linear = by_name[name]
        setattr(
            parent,
            attribute,
            WeightOnlyLinear(
                linear.in_features, linear.out_features, linear.bias is not None, bits, group_size
            ),
        )


def is_quantized_linear(module: nn.Module) -> bool:
    """Whether ``module`` is one of the quantised linears this module makes."""
    return isinstance(module, WeightOnlyLinear | dynamic_linear_type())
