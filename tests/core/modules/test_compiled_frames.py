"""Compiled flex per structure signature: no recompile per length, and a clean fallback
at dynamo's recompile limit (on an H200 the silent eager fallback ran 55x-140x slower).

Compiled flex runs forward-only on CPU (torch 2.15 has no CPU flex backward), so these
run under ``no_grad``; each compile takes a few seconds here.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from ptm_core.modules import compiled_frames
from ptm_core.modules.attention_backends import attend
from ptm_core.modules.attention_structure import AttentionStructure

pytestmark = pytest.mark.slow

HEADS, DIM = 2, 16


@pytest.fixture(autouse=True)
def fresh_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test compiles into new frames (a new code object has an empty dynamo cache)."""
    monkeypatch.setattr(compiled_frames, "_COMPILED", {})
    monkeypatch.setattr(compiled_frames, "_GAVE_UP", set())


def structure(kind: str, length: int, seed: int = 0) -> AttentionStructure:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 2, length + 1, (3,), generator=g)
    lengths[0] = length
    padding = torch.arange(length)[None, :] < lengths[:, None]
    if kind == "prefix":
        types = (torch.arange(length)[None, :] >= lengths[:, None] // 2).long()
        return AttentionStructure.prefix(padding, types)
    if kind == "documents":
        starts = torch.rand(3, length, generator=g) < 0.05
        return AttentionStructure.documents(starts.long().cumsum(-1).masked_fill(~padding, -1))
    return AttentionStructure.causal(padding, reverse=kind == "causal_reverse")


def qkv(length: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(3, HEADS, length, DIM, generator=g) for _ in range(3))


def check_against_sdpa(kind: str, length: int, seed: int) -> None:
    mask = structure(kind, length, seed)
    query, key, value = qkv(length, seed)
    with torch.no_grad():
        out = attend(query, key, value, mask, backend="flex", compiled=True)
        expected = attend(query, key, value, mask, backend="dense")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_each_signature_has_its_own_frame_and_new_lengths_reuse_its_graph() -> None:
    """With a budget of 2 graphs per frame (a static first shape, then one with symbolic
    sizes), two signatures at four lengths each fit: one shared frame, or a graph per
    length, would reach the limit, warn, and fail here."""
    with torch._dynamo.config.patch(recompile_limit=2), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for seed, length in enumerate((128, 256, 200, 384)):
            for kind in ("prefix", "causal_reverse"):
                check_against_sdpa(kind, length, seed)
    assert set(compiled_frames._COMPILED) == {
        "flex_attention_prefix",
        "flex_attention_causal_reverse",
    }
    assert not compiled_frames._GAVE_UP


def test_past_the_recompile_limit_flex_warns_once_and_runs_sdpa() -> None:
    with torch._dynamo.config.patch(recompile_limit=1):
        check_against_sdpa("documents", 128, 0)  # the one graph the budget allows
        with pytest.warns(RuntimeWarning, match=r"flex_attention_documents reached dynamo's"):
            check_against_sdpa("documents", 256, 1)  # a new shape: past the limit
        assert compiled_frames.gave_up("flex_attention_documents")
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # warned once only
            check_against_sdpa("documents", 384, 2)
            check_against_sdpa("prefix", 128, 3)  # another signature: its own budget


def test_compiled_block_masks_equal_eager_ones_and_fall_back_at_the_limit() -> None:
    from torch.nn.attention.flex_attention import create_block_mask

    def same_blocks(mask: AttentionStructure, built: object) -> bool:
        batch, length = mask.shape
        eager = create_block_mask(mask.mask_mod, batch, None, length, length, device="cpu")
        return all(
            torch.equal(a, b)
            for a, b in zip(built.as_tuple()[2:6], eager.as_tuple()[2:6], strict=True)  # type: ignore[attr-defined]
        )

    with torch._dynamo.config.patch(recompile_limit=1):
        first = structure("prefix", 128)
        assert same_blocks(first, first.block_mask(compiled=True))
        second = structure("prefix", 256, seed=1)
        with pytest.warns(RuntimeWarning, match="create_block_mask_prefix reached"):
            built = second.block_mask(compiled=True)
        assert same_blocks(second, built)  # the eager construction, same blocks


@pytest.mark.gpu
def test_on_cuda_every_kind_trains_compiled_at_every_length() -> None:
    """What the H200 suite tripped over: several kinds at several lengths in one process,
    forward and backward, with dynamo's default limit: no fallback, outputs as dense."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for seed, length in enumerate((128, 512, 200, 384)):
            for kind in ("prefix", "causal_reverse", "documents"):
                mask = structure(kind, length, seed).to("cuda")
                query, key, value = (t.cuda().requires_grad_() for t in qkv(length, seed))
                out = attend(query, key, value, mask, backend="auto")
                out.square().sum().backward()
                expected = attend(*(t.detach() for t in (query, key, value)), mask, backend="dense")
                torch.testing.assert_close(out.detach(), expected, atol=1e-4, rtol=0)
    assert not compiled_frames._GAVE_UP


def test_a_compile_that_fails_warns_with_its_first_line_and_runs_sdpa(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(name: str, fn: object) -> object:
        def run(*args: object, **kwargs: object) -> object:
            raise torch._dynamo.exc.TorchDynamoException("C++ compile error\n(details)")

        return run

    monkeypatch.setattr(compiled_frames, "compiled", broken)
    with pytest.warns(RuntimeWarning, match=r"flex_attention_prefix failed \(TorchDynamoExc"):
        check_against_sdpa("prefix", 128, 0)
    assert compiled_frames.gave_up("flex_attention_prefix")


@pytest.mark.parametrize("frame_first", [False, True])
def test_flex_inside_a_compiled_model_runs_in_its_own_graph(frame_first: bool) -> None:
    """trainer.compile around a structured mask: flex used to be inlined into the model's
    graph, where inductor fused the next op into its template and refused it on CPU
    (``Unsupported for epilogue_nodes in CppFlexAttentionTemplate``). Whether or not the
    flex frame was compiled before the model, it stays a graph of its own."""
    mask = structure("prefix", 128)
    query, key, value = qkv(128, 0)
    if frame_first:
        with torch.no_grad():
            attend(query, key, value, mask, backend="flex", compiled=True)

    def model(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attend(q, k, v, mask, backend="flex", compiled=True) * 2

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = torch.compile(model)(query, key, value)
        expected = attend(query, key, value, mask, backend="dense") * 2
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
