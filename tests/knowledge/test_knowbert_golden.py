"""Golden test: KnowBERT's KAR and linker against allenai/kb's construction.

The reference below transcribes, in plain torch/numpy, what allenai/kb (commit 4c37bbc)
computes in ``kb/knowbert.py`` (``DotAttentionWithPrior``, ``EntityDisambiguator.forward``,
``SolderedKG.forward`` and ``_init_kg_to_bert_projection``, ``KnowBert.forward``'s layer
loop), ``kb/span_attention_layer.py`` (``SpanWordAttention``, ``SpanAttention``,
``SpanAttentionLayer`` on pytorch_pretrained_bert's ``BertSelfOutput``/``BertIntermediate``/
``BertOutput``, extended -10000 mask) and the AllenNLP fork it pins
(matt-peters/allennlp@2d7ba1c: ``SelfAttentiveSpanExtractor.forward`` with
``masked_softmax(memory_efficient=True, mask_fill_value=-1000)``). Hand-made candidates;
the same weights are loaded into ptm's modules and the outputs agree within 1e-6.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_knowledge.knowbert.kar import KnowledgeAttentionRecontextualization
from ptm_knowledge.knowbert.model import KarSpec, KnowBertEncoder

D, E, HEADS, FF, MLP = 8, 12, 3, 20, 7  # E >= D: the reference's inverse exists


# ----------------------------------------------------------------- the reference (allenai/kb)


def bert_layer_norm(x, weight, bias, eps):
    # pytorch_pretrained_bert.modeling.BertLayerNorm
    u = x.mean(-1, keepdim=True)
    s = (x - u).pow(2).mean(-1, keepdim=True)
    return weight * ((x - u) / torch.sqrt(s + eps)) + bias


def linear(x, w, b):
    return x @ w.T + b


def gelu(x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def ref_span_extractor(sequence, spans, w, b):
    # allennlp SelfAttentiveSpanExtractor.forward (the fork kb pins)
    starts, ends = spans.split(1, dim=-1)
    widths = ends - starts
    max_width = widths.max().item() + 1
    logits_all = linear(sequence, w, b)  # (B, L, 1)
    rng = torch.arange(max_width).view(1, 1, -1)
    mask = (rng <= widths).float()
    raw = ends - rng
    mask = mask * (raw >= 0).float()
    idx = torch.relu(raw.float()).long()
    bsz, seq = sequence.shape[:2]
    flat = (idx + torch.arange(bsz).view(-1, 1, 1) * seq).view(-1)
    emb = sequence.reshape(-1, sequence.shape[-1])[flat].view(*idx.shape, -1)
    logits = logits_all.reshape(-1, 1)[flat].view(*idx.shape, 1).squeeze(-1)
    weights = torch.softmax(logits.masked_fill((1 - mask).bool(), -1000.0), dim=-1)
    out = (weights.unsqueeze(-1) * emb).sum(-2)
    span_mask = (spans[:, :, 0] > -1).long()
    return out * span_mask.unsqueeze(-1).float()


def ref_kar(p, hidden, spans, entities, priors, table, threshold=None):
    # EntityDisambiguator.forward
    cand = bert_layer_norm(table[entities], p["kg_ln.w"], p["kg_ln.b"], 1e-5)
    projected = linear(hidden, p["proj.w"], p["proj.b"])
    span_repr = ref_span_extractor(projected, spans, p["span.w"], p["span.b"])
    span_repr = bert_layer_norm(span_repr, p["span_ln.w"], p["span_ln.b"], 1e-5)
    if "se.q.w" in p:  # EntityDisambiguator._run_span_encoders: a BertEncoder over the spans
        span_mask = spans[:, :, 0] > -1
        span_repr = ref_bert_layer(p, "se.", span_repr, span_repr, span_mask)
    # DotAttentionWithPrior.forward
    scores = (span_repr.unsqueeze(-2) * cand).sum(-1) / math.sqrt(cand.shape[-1])
    feats = torch.cat([scores.unsqueeze(-1), priors.unsqueeze(-1)], dim=-1)
    link = linear(torch.relu(linear(feats, p["o1.w"], p["o1.b"])), p["o2.w"], p["o2.b"]).squeeze(-1)
    link = link.masked_fill(~(entities > 0), -10000.0)
    s = link
    if threshold is not None:
        below = s < threshold
        s = s.masked_fill(below, -10000.0)
    weighted = (torch.softmax(s, -1).unsqueeze(-1) * cand).sum(2)
    if threshold is not None:
        all_below = below.long().sum(-1) == s.shape[-1]
        weighted[all_below] = table[1]
    # SolderedKG.forward (dropout off)
    with_entities = bert_layer_norm(span_repr + weighted, p["w_ln.w"], p["w_ln.b"], 1e-5)
    entity_mask = spans[:, :, 0] > -1
    # SpanAttentionLayer: queries from the projected tokens, keys/values from the spans
    layer_out = ref_bert_layer(p, "", projected, with_entities, entity_mask)
    back = linear(layer_out, p["back.w"], p["back.b"])
    new = bert_layer_norm(hidden + back, p["out_ln.w"], p["out_ln.b"], 1e-5)
    return new, link


def ref_bert_layer(p, pre, queries, keys, key_mask):
    """pytorch_pretrained_bert's BertLayer (kb's SpanAttentionLayer when keys differ from
    queries): attention with the extended -10000 mask, BertSelfOutput, BertIntermediate,
    BertOutput (dropout off)."""
    q = linear(queries, p[pre + "q.w"], p[pre + "q.b"])
    k = linear(keys, p[pre + "k.w"], p[pre + "k.b"])
    v = linear(keys, p[pre + "v.w"], p[pre + "v.b"])

    def heads(x):
        return x.view(*x.shape[:-1], HEADS, E // HEADS).permute(0, 2, 1, 3)

    att = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(E // HEADS)
    att = att + (1.0 - key_mask[:, None, None, :].float()) * -10000.0
    ctx = (torch.softmax(att, -1) @ heads(v)).permute(0, 2, 1, 3).reshape(*q.shape)
    a_out = bert_layer_norm(
        linear(ctx, p[pre + "ao.w"], p[pre + "ao.b"]) + queries,
        p[pre + "a_ln.w"], p[pre + "a_ln.b"], 1e-12,
    )  # fmt: skip
    inter = gelu(linear(a_out, p[pre + "i.w"], p[pre + "i.b"]))
    return bert_layer_norm(
        linear(inter, p[pre + "out.w"], p[pre + "out.b"]) + a_out,
        p[pre + "o_ln.w"], p[pre + "o_ln.b"], 1e-12,
    )  # fmt: skip


def ref_inverse(proj_w, proj_b):
    # SolderedKG._init_kg_to_bert_projection (numpy)
    w = proj_w.detach().numpy()
    w_inv = np.dot(np.linalg.inv(np.dot(w.T, w)), w.T)
    b_inv = np.dot(w_inv, proj_b.detach().numpy())
    return torch.tensor(w_inv), torch.tensor(b_inv)


# ----------------------------------------------------------------- hand-made candidates


def _table(generator: torch.Generator) -> torch.Tensor:
    table = torch.randn(6, E, generator=generator)
    table[0] = 0.0  # padding row
    return table


# Two rows, L = 7. Row 0: spans [1, 2] (two candidates) and [4, 4] (three, one of them the
# null row), a padded span. Row 1: one overlapping pair [1, 3] / [2, 3], a padded span.
SPANS = torch.tensor([[[1, 2], [4, 4], [-1, -1]], [[1, 3], [2, 3], [-1, -1]]])
ENTITIES = torch.tensor([[[2, 3, 0], [4, 1, 5], [0, 0, 0]], [[5, 0, 0], [3, 2, 4], [0, 0, 0]]])
PRIORS = torch.tensor(
    [
        [[0.7, 0.3, 0.0], [0.5, 0.25, 0.25], [0.0, 0.0, 0.0]],
        [[1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 0.0]],
    ]
)


def _randomise(module: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)


def _params(kar: KnowledgeAttentionRecontextualization) -> dict[str, torch.Tensor]:
    """ptm's weights under the reference's names (the mapping a kb checkpoint would take)."""
    linker, span = kar.linker, kar.span_attention_layer
    kv_w, kv_b = span.attention.kv_proj.weight, span.attention.kv_proj.bias
    return {
        "kg_ln.w": linker.kg_layer_norm.weight, "kg_ln.b": linker.kg_layer_norm.bias,
        "proj.w": linker.bert_to_kg_projector.weight, "proj.b": linker.bert_to_kg_projector.bias,
        "span.w": linker.span_extractor.global_attention.weight,
        "span.b": linker.span_extractor.global_attention.bias,
        "span_ln.w": linker.projected_span_layer_norm.weight,
        "span_ln.b": linker.projected_span_layer_norm.bias,
        "o1.w": linker.scorer.out_layer_1.weight, "o1.b": linker.scorer.out_layer_1.bias,
        "o2.w": linker.scorer.out_layer_2.weight, "o2.b": linker.scorer.out_layer_2.bias,
        "w_ln.w": kar.weighted_entity_layer_norm.weight,
        "w_ln.b": kar.weighted_entity_layer_norm.bias,
        "q.w": span.attention.q_proj.weight, "q.b": span.attention.q_proj.bias,
        "k.w": kv_w[:E], "k.b": kv_b[:E], "v.w": kv_w[E:], "v.b": kv_b[E:],
        "ao.w": span.attention.out_proj.weight, "ao.b": span.attention.out_proj.bias,
        "a_ln.w": span.attention_norm.weight, "a_ln.b": span.attention_norm.bias,
        "i.w": span.feed_forward.w_in.weight, "i.b": span.feed_forward.w_in.bias,
        "out.w": span.feed_forward.w_out.weight, "out.b": span.feed_forward.w_out.bias,
        "o_ln.w": span.ffn_norm.weight, "o_ln.b": span.ffn_norm.bias,
        "back.w": kar.kg_to_bert_projection.weight, "back.b": kar.kg_to_bert_projection.bias,
        "out_ln.w": kar.output_layer_norm.weight, "out_ln.b": kar.output_layer_norm.bias,
        **_span_encoder_params(kar),
    }  # fmt: skip


def _span_encoder_params(kar: KnowledgeAttentionRecontextualization) -> dict[str, torch.Tensor]:
    if not len(kar.linker.span_encoder):
        return {}
    layer = kar.linker.span_encoder[0]
    qkv_w, qkv_b = layer.attention.qkv_proj.weight, layer.attention.qkv_proj.bias
    return {
        "se.q.w": qkv_w[:E], "se.q.b": qkv_b[:E],
        "se.k.w": qkv_w[E : 2 * E], "se.k.b": qkv_b[E : 2 * E],
        "se.v.w": qkv_w[2 * E :], "se.v.b": qkv_b[2 * E :],
        "se.ao.w": layer.attention.out_proj.weight, "se.ao.b": layer.attention.out_proj.bias,
        "se.a_ln.w": layer.attention_norm.weight, "se.a_ln.b": layer.attention_norm.bias,
        "se.i.w": layer.feed_forward.w_in.weight, "se.i.b": layer.feed_forward.w_in.bias,
        "se.out.w": layer.feed_forward.w_out.weight, "se.out.b": layer.feed_forward.w_out.bias,
        "se.o_ln.w": layer.ffn_norm.weight, "se.o_ln.b": layer.ffn_norm.bias,
    }  # fmt: skip


def _kar(generator: torch.Generator, threshold: float | None = None, span_encoder: int = 0):
    table = _table(generator)
    kar = KnowledgeAttentionRecontextualization(
        D, table, num_heads=HEADS, intermediate_size=FF, scorer_hidden=MLP, threshold=threshold,
        span_encoder_layers=span_encoder,
    )  # fmt: skip
    _randomise(kar, generator)
    return kar.eval(), table


@pytest.mark.parametrize(("threshold", "span_encoder"), [(None, 0), (0.0, 0), (None, 1)])
def test_kar_and_linker_equal_allenai_kb(threshold: float | None, span_encoder: int) -> None:
    generator = torch.Generator().manual_seed(0)
    kar, table = _kar(generator, threshold, span_encoder)
    hidden = torch.randn(2, 7, D, generator=generator)
    with torch.no_grad():
        out = kar(hidden, SPANS, ENTITIES, PRIORS)
        expected, scores = ref_kar(_params(kar), hidden, SPANS, ENTITIES, PRIORS, table, threshold)
    assert out.hidden.shape == (2, 7, D)
    assert out.linker.linking_scores.shape == (2, 3, 3)
    assert out.linker.projected_span_representations.shape == (2, 3, E)
    assert out.linker.weighted_entity_embeddings.shape == (2, 3, E)
    torch.testing.assert_close(out.linker.linking_scores, scores, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.hidden, expected, atol=1e-6, rtol=0)
    if threshold is not None:  # the threshold must matter on these candidates
        again, _ = ref_kar(_params(kar), hidden, SPANS, ENTITIES, PRIORS, table, None)
        assert not torch.allclose(again, expected, atol=1e-4)


def test_span_pooling_equals_allennlp() -> None:
    generator = torch.Generator().manual_seed(1)
    kar, _ = _kar(generator)
    sequence = torch.randn(2, 7, E, generator=generator)
    extractor = kar.linker.span_extractor
    with torch.no_grad():
        ours = extractor(sequence, SPANS)
        ref = ref_span_extractor(
            sequence, SPANS, extractor.global_attention.weight, extractor.global_attention.bias
        )
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)
    assert torch.equal(ours[:, 2], torch.zeros(2, E))  # padded spans are zeros


def test_projection_back_starts_as_the_pseudo_inverse() -> None:
    torch.manual_seed(2)
    kar = KnowledgeAttentionRecontextualization(D, _table(torch.Generator().manual_seed(2)))
    w, b = ref_inverse(kar.linker.bert_to_kg_projector.weight, kar.linker.bert_to_kg_projector.bias)
    torch.testing.assert_close(kar.kg_to_bert_projection.weight, w.float(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(kar.kg_to_bert_projection.bias, b.float(), atol=1e-5, rtol=1e-4)


def test_soldered_layers_run_as_knowbert_forward() -> None:
    """KnowBert.forward: BERT layers up to the soldered index, the KG, the next KG, the
    rest. ptm runs it through the encoder's seams; the reference loops the layers."""
    generator = torch.Generator().manual_seed(3)
    config = EncoderConfig(
        vocab_size=30, hidden_size=D, num_layers=4, num_heads=2, intermediate_size=16,
        max_positions=16, dropout=0.0, attention_dropout=0.0,
    )  # fmt: skip
    text = TransformerEncoder(config)
    tables = {"wordnet": _table(generator), "wiki": _table(generator)}
    specs = {
        "wordnet": KarSpec(layer=2, num_heads=HEADS, intermediate_size=FF, scorer_hidden=MLP),
        "wiki": KarSpec(layer=1, num_heads=HEADS, intermediate_size=FF, scorer_hidden=MLP),
    }
    model = KnowBertEncoder(text, tables, specs).eval()
    for kar in model.kars.values():
        _randomise(kar, generator)
    assert model.kg_names == ("wiki", "wordnet")  # by layer
    ids = torch.randint(1, 30, (2, 7), generator=generator)
    mask = torch.ones(2, 7, dtype=torch.long)
    spans = torch.stack([SPANS, SPANS.flip(1)], dim=1)  # (B, K, S, 2)
    entities = torch.stack([ENTITIES, ENTITIES.flip(1)], dim=1)
    priors = torch.stack([PRIORS, PRIORS.flip(1)], dim=1)
    with torch.no_grad():
        out = model(
            ids, mask, candidate_spans=spans, candidate_entities=entities, candidate_priors=priors
        )
        hidden = text.embed(ids)
        soldered = [(1, "wiki", 0), (2, "wordnet", 1), (3, None, None)]
        start = 0
        for layer, key, k in soldered:
            for block in text.layers[start : layer + 1]:
                hidden = block(hidden, None)
            start = layer + 1
            if key is not None:
                p = _params(model.kars[key])
                hidden, _ = ref_kar(
                    p, hidden, spans[:, k], entities[:, k], priors[:, k], tables[key]
                )
    torch.testing.assert_close(out.last_hidden_state, hidden, atol=1e-5, rtol=0)
    assert [s.shape for s in out.linking_scores] == [(2, 3, 3), (2, 3, 3)]
