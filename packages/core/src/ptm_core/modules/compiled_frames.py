"""``torch.compile`` with one dynamo frame per name, and a clean give-up at its limit.

Dynamo keeps its compiled graphs on the *code object* of the compiled function, and
gives that code object at most ``torch._dynamo.config.recompile_limit`` (8) graphs. Past
that it runs the function eagerly, with no message beyond a log line. For compiled
``flex_attention`` that is a 55x-140x slowdown (measured on an H200: eager flex
materialises the scores), and the limit is easy to reach: every mask kind is a new
``mask_mod`` (a guard on its code), and with ``dynamic=False`` every new sequence length
was a new graph too.

So each named use here gets:

* **its own frame**: a copy of the function with its own code object (named after the
  use, which is also what ``TORCH_LOGS=recompiles`` prints), so one mask kind's graphs
  do not use up another kind's budget. (A ``*args`` trampoline around the function would
  do the same, but on CPU its dynamic recompile of flex hit an inductor C++ codegen error,
  ``cur_qSplitSize9 was not declared``, with torch 2.15; the copy keeps the signature);
* **automatic dynamic shapes** (``torch.compile``'s default): the first shape compiles
  static, a second one recompiles once with symbolic sizes, and later lengths and batch
  sizes reuse that graph;
* ``fullgraph=True``, so reaching the limit raises instead of falling to eager; the
  caller is told (``None``) and takes its own fallback (SDPA with a boolean mask for
  attention; eager ``create_block_mask`` for block masks), with one warning per name. A
  compile that fails (a graph break, a backend error such as the one above) takes the
  same fallback with its first line in the warning, instead of stopping the run.

Inside a compiled model (``trainer.compile``), :func:`compiled_or_none` is a graph break
(``torch.compiler.disable``), so the named frame runs as a graph of its own. Inlined into
the model's graph instead (as before this module, and as dynamo does with a nested
compiled function), inductor fused the next op into the flex template, which its CPU
backend refuses (``Unsupported for epilogue_nodes in CppFlexAttentionTemplate``, torch
2.15).
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable
from typing import Any

import torch

_COMPILED: dict[str, Any] = {}
_GAVE_UP: set[str] = set()


def _limit_errors() -> tuple[type[BaseException], ...]:
    from torch._dynamo import exc

    names = ("FailOnRecompileLimitHit", "FailOnCacheLimitHit")  # newer / older torch
    return tuple(getattr(exc, name) for name in names if hasattr(exc, name))


def own_frame(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A copy of the plain function ``fn`` with a code object of its own, named ``name``
    (dynamo's cache and recompile budget belong to the code object)."""
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def compiled(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(fn, fullgraph=True)`` in a frame of its own, built once per name."""
    if name not in _COMPILED:
        _COMPILED[name] = torch.compile(own_frame(fn, name), fullgraph=True)
    return _COMPILED[name]


def gave_up(name: str) -> bool:
    """Whether ``name`` reached the recompile limit or failed to compile in this process
    (it then runs its caller's fallback)."""
    return name in _GAVE_UP


@torch.compiler.disable
def compiled_or_none(
    name: str, fn: Callable[..., Any], fallback: str, *args: Any, **kwargs: Any
) -> Any:
    """``compiled(name, fn)(*args, **kwargs)``, or ``None`` once ``name`` has reached
    dynamo's recompile limit or failed to compile (warned about once; the caller runs
    ``fallback``, which the warning names)."""
    from torch._dynamo.exc import TorchDynamoException

    if name in _GAVE_UP:
        return None
    try:
        return compiled(name, fn)(*args, **kwargs)
    except _limit_errors():
        config = torch._dynamo.config  # older torch names it cache_size_limit
        limit = getattr(config, "recompile_limit", getattr(config, "cache_size_limit", "?"))
        why = (
            f"reached dynamo's recompile limit ({limit} graphs). TORCH_LOGS=recompiles "
            "shows what changed between calls; if the process really needs more shapes, "
            "raise torch._dynamo.config.recompile_limit before the first call"
        )
    except TorchDynamoException as error:  # a graph break, a backend that failed to build
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        why = f"failed ({type(error).__name__}: {first[:300]})"
    _GAVE_UP.add(name)
    warnings.warn(
        f"torch.compile of {name} {why}. From now on this process runs {fallback} "
        "instead (same outputs).",
        RuntimeWarning,
        stacklevel=3,
    )
    return None
