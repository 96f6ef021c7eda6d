"""AttentionStructure: every mask kind equals its dense builder, every backend the dense path."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from ptm_core.encoders import bert_tiny
from ptm_core.modules import MultiHeadSelfAttention
from ptm_core.modules.attention_backends import (
    ATTENTION_BACKENDS,
    attend,
    resolve_backend,
)
from ptm_core.modules.attention_masks import (
    block_diagonal_mask,
    left_to_right_mask,
    padding_to_visibility,
    permutation_masks,
    right_to_left_mask,
    seq2seq_mask,
    to_sdpa_mask,
    unilm_mask,
)
from ptm_core.modules.attention_structure import AttentionStructure, unilm_structure
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings
from ptm_knowledge.kbert.sentence_tree import visible_matrix

BATCH = 4


def random_padding(generator: torch.Generator, length: int) -> torch.Tensor:
    """``[B, L]`` right padding: a full row, an all-padding row, random lengths."""
    lengths = torch.randint(1, length + 1, (BATCH,), generator=generator)
    lengths[0], lengths[1] = length, 0
    return (torch.arange(length)[None, :] < lengths[:, None]).long()


def case(kind: str, length: int, seed: int) -> tuple[AttentionStructure, torch.Tensor]:
    """A random structure of ``kind`` and the existing builder's ``[B, L, L]`` mask."""
    g = torch.Generator().manual_seed(seed)
    padding = random_padding(g, length)
    real = padding.bool()
    if kind == "padding":
        return AttentionStructure.padding(padding), padding_to_visibility(padding)
    if kind == "causal":
        return AttentionStructure.causal(padding), left_to_right_mask(padding)
    if kind == "causal_reverse":
        return AttentionStructure.causal(padding, reverse=True), right_to_left_mask(padding)
    if kind == "prefix":
        source = torch.randint(0, length + 1, (BATCH, 1), generator=g)
        types = (torch.arange(length)[None, :] >= source).long()
        return AttentionStructure.prefix(padding, types), seq2seq_mask(types, padding)
    if kind == "documents":
        starts = torch.rand(BATCH, length, generator=g) < 0.2
        ids = starts.long().cumsum(-1).masked_fill(~real, -1)
        return AttentionStructure.documents(ids), block_diagonal_mask(ids)
    if kind == "kbert":
        knowledge = (torch.rand(BATCH, length, generator=g) < 0.4) & real
        subject = torch.randint(0, 4, (BATCH, length), generator=g).masked_fill(~real, -1)
        branch = torch.randint(0, 5, (BATCH, length), generator=g).masked_fill(~knowledge, -1)
        dense = torch.stack(
            [visible_matrix(knowledge[b], subject[b], branch[b], real[b]) for b in range(BATCH)]
        )
        return AttentionStructure.kbert(knowledge, subject, branch, real), dense
    if kind in ("xlnet_content", "xlnet_query"):
        # Ties included: XLNet puts every non-target token at one rank.
        ranks = torch.randint(0, max(2, length // 3), (BATCH, length), generator=g)
        ranks = ranks.masked_fill(~real, length)
        content, query = permutation_masks(ranks, padding)
        stream = kind.removeprefix("xlnet_")
        structure = AttentionStructure.permutation(ranks, padding, stream=stream)
        return structure, content if stream == "content" else query
    raise AssertionError(kind)


KINDS = [
    "padding",
    "causal",
    "causal_reverse",
    "prefix",
    "documents",
    "kbert",
    "xlnet_content",
    "xlnet_query",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("length", [1, 7, 33])
def test_dense_equals_the_existing_builder_exactly(kind: str, length: int) -> None:
    for seed in range(3):
        structure, expected = case(kind, length, seed)
        dense = structure.dense()
        assert dense.shape == (BATCH, length, length) and dense.dtype == torch.bool
        assert torch.equal(dense, expected), (kind, length, seed)
        # The blind-row fix is the one to_sdpa_mask applies to the dense tensor.
        fixed = to_sdpa_mask(expected, length)
        assert fixed is not None
        assert torch.equal(structure.reference_mask(), fixed)
        sdpa = structure.sdpa_mask()
        reference = fixed if kind != "padding" else to_sdpa_mask(structure.real, length)
        assert (sdpa is None and reference is None) or torch.equal(sdpa, reference)


def test_unilm_structures_equal_unilm_masks() -> None:
    structure, _ = case("prefix", 12, 0)
    padding, types = structure.real.long(), structure.token_type_ids
    for kind in ("bidirectional", "left_to_right", "right_to_left", "seq2seq"):
        assert torch.equal(
            unilm_structure(kind, padding, types).dense(), unilm_mask(kind, padding, types)
        )
    with pytest.raises(ValueError, match="valid kinds"):
        unilm_structure("sideways", padding)


def qkv(length: int, seed: int, heads: int = 2, dim: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(BATCH, heads, length, dim, generator=g) for _ in range(3)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("backend", ["flex", "sdpa", "dense", "auto"])
def test_every_backend_equals_the_dense_path(kind: str, backend: str) -> None:
    # Eager flex re-traces per shape (seconds each): one length, several seeds.
    cases = ((19, 1),) if backend == "flex" else ((5, 0), (19, 1), (40, 2))
    for length, seed in cases:
        structure, dense = case(kind, length, seed)
        query, key, value = qkv(length, seed)
        expected = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=to_sdpa_mask(dense, length)
        )
        out = attend(query, key, value, structure, backend=backend)
        assert not out.isnan().any()
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_flex_runs_flex_and_sdpa_runs_is_causal_where_it_can() -> None:
    query = qkv(8, 0)[0]
    full = torch.ones(BATCH, 8, dtype=torch.long)
    causal, prefix = AttentionStructure.causal(full), AttentionStructure.prefix(full, full)
    assert causal.is_plain_causal
    assert resolve_backend(prefix, "flex", query) == "flex"
    assert resolve_backend(prefix, "auto", query) == "sdpa"  # CPU: SDPA measured faster
    assert resolve_backend(causal, "auto", query) == "sdpa"
    assert resolve_backend(prefix, "flex", query, dropout=0.1) == "sdpa"  # flex: no dropout
    trained = query.clone().requires_grad_()
    assert resolve_backend(prefix, "flex", trained) == "sdpa"  # torch 2.15: no CPU backward
    assert resolve_backend(torch.ones(BATCH, 1, 1, 8, dtype=torch.bool), "flex", query) == (
        "tensor"
    )


def test_gradients_through_a_structure_equal_the_dense_path() -> None:
    structure, dense = case("kbert", 17, 3)
    grads = []
    for mask in (structure, to_sdpa_mask(dense, 17)):
        query, key, value = (t.requires_grad_() for t in qkv(17, 3))
        attend(query, key, value, mask, backend="flex").square().sum().backward()
        grads.append([t.grad for t in (query, key, value)])
    for ours, reference in zip(*grads, strict=True):
        torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["causal", "kbert", "xlnet_query"])
def test_self_attention_module_takes_a_structure(kind: str) -> None:
    torch.manual_seed(0)
    attention = MultiHeadSelfAttention(16, 2).eval()
    structure, dense = case(kind, 11, 5)
    hidden = torch.randn(BATCH, 11, 16)
    expected = attention(hidden, to_sdpa_mask(dense, 11))
    expected_scores = attention(hidden, to_sdpa_mask(dense, 11), return_scores=True)
    for backend in ("flex", "sdpa", "dense"):
        attention.attention_backend = backend
        torch.testing.assert_close(attention(hidden, structure), expected, atol=1e-5, rtol=0)
        _, scores = attention(hidden, structure, return_scores=True)
        assert torch.equal(scores, expected_scores[1])
    with pytest.raises(ValueError, match="is for 11 tokens but the input has 10"):
        attention(hidden[:, :10], structure)


Builder = Callable[[torch.Tensor], tuple[AttentionStructure, torch.Tensor]]


def test_whole_encoder_with_a_structure_equals_the_dense_tensor() -> None:
    torch.manual_seed(0)
    encoder = bert_tiny().eval()
    length = 24
    ids = torch.randint(5, 100, (BATCH, length))
    for kind in ("padding", "prefix", "documents", "kbert"):
        structure, dense = case(kind, length, 7)
        tensor_mask = structure.real.long() if kind == "padding" else dense
        with torch.no_grad():
            expected = encoder(ids, attention_mask=tensor_mask, output_attention_scores=True)
            for backend in ("flex", "sdpa", "dense", "auto"):
                apply_execution_settings(encoder, ExecutionSettings(attention_backend=backend))
                out = encoder(ids, attention_mask=structure)
                torch.testing.assert_close(
                    out.last_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=0
                )
            scored = encoder(ids, attention_mask=structure, output_attention_scores=True)
        assert scored.attention_scores is not None and expected.attention_scores is not None
        for ours, reference in zip(scored.attention_scores, expected.attention_scores, strict=True):
            torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0)
    apply_execution_settings(encoder, ExecutionSettings(attention_backend="auto"))


def test_unknown_backend_names_the_valid_ones() -> None:
    encoder = bert_tiny()
    with pytest.raises(ValueError, match="flex, sdpa, dense"):
        apply_execution_settings(encoder, ExecutionSettings(attention_backend="flash"))
    query, key, value = qkv(4, 0)
    with pytest.raises(ValueError, match="valid backends: auto"):
        attend(query, key, value, None, backend="fast")
    assert ATTENTION_BACKENDS == ("auto", "flex", "sdpa", "dense")
    attention = encoder.layers[0].attention
    assert isinstance(attention, MultiHeadSelfAttention)
    assert attention.attention_backend == "auto"


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match="padding_mask must be a \\[B, L\\] tensor"):
        AttentionStructure.causal(torch.ones(4))
    with pytest.raises(ValueError, match="token_type_ids has shape"):
        AttentionStructure.prefix(torch.ones(2, 5), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="valid: content, query"):
        AttentionStructure.permutation(torch.zeros(2, 5), torch.ones(2, 5), stream="both")


def test_block_mask_is_block_sparse_and_cached() -> None:
    """A causal 512-token mask keeps only block indices: 4 x 4 blocks of 128, 6 of them
    above the diagonal skipped; nothing the size of [B, L, L] is stored."""
    length = 512
    structure = AttentionStructure.causal(torch.ones(2, length, dtype=torch.long))
    block_mask = structure.block_mask()
    assert block_mask is structure.block_mask()  # cached per structure
    assert block_mask.shape == (2, 1, length, length)
    assert block_mask.kv_num_blocks.tolist() == [[[1, 1, 1, 1]]] * 2  # the diagonal: partial
    assert block_mask.full_kv_num_blocks.tolist() == [[[0, 1, 2, 3]]] * 2  # below it: full
    assert block_mask.sparsity() == pytest.approx(37.5)
    stored = [t for t in block_mask.as_tuple() if isinstance(t, torch.Tensor)]
    assert max(t.numel() for t in stored) <= 2 * 4 * 4


def test_structure_moves_with_to() -> None:
    structure, _ = case("documents", 6, 0)
    assert structure.to("cpu") is structure
    assert structure.to(torch.device("meta")).document_ids.device.type == "meta"


@pytest.mark.gpu
def test_flex_on_cuda_equals_the_dense_path() -> None:
    structure, dense = case("kbert", 256, 0)
    query, key, value = (t.cuda() for t in qkv(256, 0, heads=4, dim=64))
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=to_sdpa_mask(dense.cuda(), 256)
    )
    assert resolve_backend(structure, "auto", query) == "flex"
    out = attend(query, key, value, structure.to("cuda"), backend="flex")
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=0)


def _mlm_examples(count: int = 7) -> list[dict]:
    gen = torch.Generator().manual_seed(3)
    out = []
    for _ in range(count):
        n = int(torch.randint(3, 14, (1,), generator=gen))
        ids = torch.randint(5, 60, (n,), generator=gen).tolist()
        out.append(
            {
                "input_ids": [2, *ids, 3],
                "token_type_ids": [0] * (n // 2 + 1) + [1] * (n - n // 2 + 1),
                "special_tokens_mask": [1] + [0] * n + [1],
            }
        )
    return out


def test_producers_emit_structures_with_the_same_loss() -> None:
    """Packed batches and UniLM batches with ``structured_masks``: same visibility, same loss."""
    from ptm_core import bert_encoder
    from ptm_core.data import PretrainingBatches, pack_examples
    from ptm_core.models import PretrainingModel
    from ptm_core.objectives import MaskedLMObjective, ObjectiveMix, UniLMObjective
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.seeding import generator_for
    from ptm_core.tokenization import VocabInfo
    from ptm_core.training.batch_cursor import count_tokens

    vocab = VocabInfo(vocab_size=60, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=60, hidden_size=32, num_layers=2, num_heads=4).eval()
    mlm = build_objective(MaskedLMObjective, encoder, vocab, mode="static")
    examples = [mlm.prepare_example(e, generator_for(0, "static")) for e in _mlm_examples()]
    rows = pack_examples(examples, 40)
    batches = [
        next(
            PretrainingBatches(
                rows, len(rows), pad_id=0, shuffle=False, structured_masks=structured
            ).iter_batches(0)
        )
        for structured in (False, True)
    ]
    dense, structured = batches
    assert isinstance(structured["attention_mask"], AttentionStructure)
    assert torch.equal(structured["attention_mask"].dense(), dense["attention_mask"])
    assert count_tokens(structured) == count_tokens(dense)
    model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm})).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(structured).loss, model(dense).loss, atol=1e-5, rtol=0)

    for kind in ("bidirectional", "seq2seq", "left_to_right", "right_to_left"):
        losses = []
        unilm = build_objective(UniLMObjective, encoder, vocab, proportions={kind: 1.0})
        for flag in (False, True):
            unilm.structured_masks = flag
            padded = next(
                PretrainingBatches(examples, len(examples), pad_id=0, shuffle=False).iter_batches(0)
            )
            batch = unilm.collate(padded, torch.Generator().manual_seed(1))
            if flag:
                assert isinstance(batch["attention_mask"], AttentionStructure)
                assert torch.equal(batch["attention_mask"].dense(), losses[0][1])
            with torch.no_grad():
                loss = PretrainingModel(encoder, ObjectiveMix({"unilm": unilm})).eval()(batch).loss
            losses.append((loss, batch["attention_mask"]))
        torch.testing.assert_close(losses[1][0], losses[0][0], atol=1e-5, rtol=0)
    assert build_objective(UniLMObjective, encoder, vocab, structured_masks=True).structured_masks


def test_xlnet_encoder_takes_a_content_structure_on_its_dense_path() -> None:
    from ptm_core.encoders import xlnet_encoder

    torch.manual_seed(0)
    encoder = xlnet_encoder(
        vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64
    ).eval()
    structure, content = case("xlnet_content", 9, 4)
    ids = torch.randint(5, 50, (BATCH, 9))
    with torch.no_grad():
        expected = encoder(ids, attention_mask=content).last_hidden_state
        out = encoder(ids, attention_mask=structure).last_hidden_state
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def test_masks_normalise_without_graph_breaks_under_compile() -> None:
    """``to_sdpa_mask`` has no data-dependent branch when traced (fullgraph would raise on a
    graph break), and where any key is real it keeps the eager mask's keys."""
    from ptm_core.modules.attention_masks import to_sdpa_mask

    padding = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    compiled = torch.compile(to_sdpa_mask, backend="eager", fullgraph=True)
    traced = compiled(padding, 4)
    eager = to_sdpa_mask(padding, 4)
    assert traced is not None and eager is not None
    assert traced.shape == (3, 1, 1, 4)
    # eager: a [B, 1, L, L] matrix (a row is all padding); traced: [B, 1, 1, L] keys
    assert torch.equal(traced[:2].expand(-1, -1, 4, -1), eager[:2])
    # the all-padding sequence sees every key (eager: itself only); outputs ignored alike
    assert bool(traced[2].all())
    visibility = padding.bool()[:, None, :].expand(-1, 4, -1)
    torch.testing.assert_close(compiled(visibility, 4), to_sdpa_mask(visibility, 4), rtol=0, atol=0)
