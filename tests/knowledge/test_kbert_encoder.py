"""K-BERT's Mask-Transformer through the real encoder: isolation, ablations, heads, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from knowledge_sample_paths import VOCAB

from ptm_core import TransformerEncoder
from ptm_core.encoders import bert_encoder
from ptm_core.finetune.model import build_task_model
from ptm_core.objectives import IGNORE_INDEX
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.kbert import (
    KBertFeaturizer,
    knowledge_from_graph,
    mask_transformer,
    segment_words,
)
from ptm_knowledge.kbert.tsv import LabeledSentence

SENTENCES = [
    "Marie Curie moved to Paris in 1891 .",
    "The Danube flows through Vienna and Budapest .",
]


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB)


@pytest.fixture(scope="module")
def knowledge(sample_kg) -> dict[str, list[str]]:
    return knowledge_from_graph(sample_kg)


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _encoder(tokenizer: WordPieceTokenizer, num_layers: int = 2) -> TransformerEncoder:
    torch.manual_seed(0)
    return bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=num_layers,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    ).eval()


def _batch(featurizer: KBertFeaturizer, texts: list[str]) -> dict[str, torch.Tensor]:
    return featurizer.collate([featurizer.encode(segment_words(t)) for t in texts])


def _swap_first_branch(featurizer, tokenizer):
    """The batch of SENTENCES[0], a copy with its first branch replaced, and trunk masks."""
    batch = _batch(featurizer, SENTENCES[:1])
    tree = featurizer.tree(segment_words(SENTENCES[0]))
    branch = tree.is_knowledge.nonzero().flatten()
    assert len(branch) > 0, "the sample KG must give Marie Curie / Paris branches"
    first = branch[tree.word_index[branch] == tree.word_index[branch[0]]]
    # Words of pair_words: 0 [CLS], 1 Marie, 2 Curie, ...; the subject "Marie Curie" owns it.
    assert int(tree.word_index[branch[0]]) == 2
    owner = (tree.word_index == 1) | (tree.word_index == 2)
    changed = {**batch, "input_ids": batch["input_ids"].clone()}
    changed["input_ids"][0, first] = tokenizer.token_to_id("bread")
    return batch, changed, ~tree.is_knowledge & ~owner, ~tree.is_knowledge & owner


def _layers(encoder, batch) -> tuple[torch.Tensor, ...]:
    mask = batch.get("visible_matrix")
    with torch.no_grad():
        out = encoder(
            batch["input_ids"],
            attention_mask=mask if mask is not None else batch["attention_mask"],
            position_ids=batch["position_ids"],
            token_type_ids=batch["token_type_ids"],
            output_hidden_states=True,
        )
    return tuple(h[0] for h in out.hidden_states)


def test_branch_tokens_never_reach_trunk_tokens_of_other_words(
    tokenizer, knowledge, one_thread
) -> None:
    # One Mask-Transformer layer: the encoder output of every other word is unchanged.
    encoder = _encoder(tokenizer, num_layers=1)
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_entities=2, max_length=64)
    batch, changed, other_trunk, own_trunk = _swap_first_branch(featurizer, tokenizer)
    with torch.no_grad():
        before = mask_transformer(encoder, batch)[0]
        after = mask_transformer(encoder, changed)[0]
    torch.testing.assert_close(after[other_trunk], before[other_trunk], atol=1e-6, rtol=0)
    # The test can fail: the branch's own word does change, and without the matrix all do.
    assert not torch.allclose(after[own_trunk], before[own_trunk], atol=1e-4)
    off = KBertFeaturizer(tokenizer, knowledge, max_length=64, visible_matrix="off")
    off_batch = _batch(off, SENTENCES[:1])
    off_changed = {**off_batch, "input_ids": changed["input_ids"]}
    with torch.no_grad():
        leak = mask_transformer(encoder, off_changed)[0] - mask_transformer(encoder, off_batch)[0]
    assert leak[other_trunk].abs().max() > 1e-4


def test_deeper_layers_reach_other_words_only_through_the_entity(
    tokenizer, knowledge, one_thread
) -> None:
    # By the matrix rules [CLS] never sees "Apple", but sees "Cook", which saw "Apple" one
    # layer earlier. So with 2 layers the first layer isolates other words exactly and the second
    # carries the knowledge on through the entity's own trunk tokens.
    encoder = _encoder(tokenizer, num_layers=2)
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_entities=2, max_length=64)
    batch, changed, other_trunk, own_trunk = _swap_first_branch(featurizer, tokenizer)
    before, after = _layers(encoder, batch), _layers(encoder, changed)
    torch.testing.assert_close(after[1][other_trunk], before[1][other_trunk], atol=1e-6, rtol=0)
    assert not torch.allclose(after[1][own_trunk], before[1][own_trunk], atol=1e-4)
    assert not torch.allclose(after[2][other_trunk], before[2][other_trunk], atol=1e-6)


def test_kg_none_equals_plain_bert(tokenizer, knowledge, one_thread) -> None:
    encoder = _encoder(tokenizer)
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_length=64, kg="none")
    batch = _batch(featurizer, SENTENCES)
    assert "visible_matrix" not in batch and not batch["is_knowledge"].any()
    for b, text in enumerate(SENTENCES):
        ids = tokenizer.encode(text).input_ids
        n = len(ids)
        assert batch["input_ids"][b, :n].tolist() == ids
        with torch.no_grad():
            plain = encoder(torch.tensor([ids])).last_hidden_state[0]
            kbert = mask_transformer(encoder, batch)[b, :n]
        torch.testing.assert_close(kbert, plain, atol=1e-5, rtol=0)


def test_no_knowledge_visible_matrix_equals_padding_mask(tokenizer, one_thread) -> None:
    # With an empty KG the [B, L, L] matrix path gives BERT's outputs on real tokens.
    encoder = _encoder(tokenizer)
    featurizer = KBertFeaturizer(tokenizer, {}, max_length=64)
    batch = _batch(featurizer, SENTENCES)
    assert "visible_matrix" in batch
    plain_batch = {k: v for k, v in batch.items() if k != "visible_matrix"}
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        a = mask_transformer(encoder, batch)[real]
        b = mask_transformer(encoder, plain_batch)[real]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_works_on_a_hugging_face_bert_checkpoint(tokenizer, knowledge, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(1)
    hf = transformers.BertModel(config).eval()
    hf.save_pretrained(tmp_path / "hf")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    # kg=none on the loaded checkpoint is the Hugging Face model itself.
    plain = KBertFeaturizer(tokenizer, knowledge, max_length=64, kg="none")
    batch = _batch(plain, SENTENCES[:1])
    with torch.no_grad():
        ours = mask_transformer(encoder, batch)
        theirs = hf(input_ids=batch["input_ids"]).last_hidden_state
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
    # With knowledge: soft positions and the matrix reach HF's own attention too.
    full = KBertFeaturizer(tokenizer, knowledge, max_length=64)
    batch = _batch(full, SENTENCES[:1])
    mask = batch["visible_matrix"][:, None].float()
    extended = (1.0 - mask) * torch.finfo(torch.float32).min
    with torch.no_grad():
        ours = mask_transformer(encoder, batch)
        theirs = hf(
            input_ids=batch["input_ids"],
            position_ids=batch["position_ids"],
            token_type_ids=batch["token_type_ids"],
            attention_mask=extended,
        ).last_hidden_state
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_classifier_forward_and_loss(tokenizer, knowledge) -> None:
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_length=64)
    rows = [LabeledSentence(segment_words(t), i) for i, t in enumerate(SENTENCES)]
    model = build_task_model(_encoder(tokenizer), "classification", 2)
    out = model(featurizer.featurize(rows))
    assert out.logits.shape == (2, 2)
    assert out.loss is not None and out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()


def test_tagger_excludes_branch_tokens(tokenizer, knowledge) -> None:
    featurizer = KBertFeaturizer(tokenizer, knowledge, max_entities=2, max_length=64)
    words = segment_words(SENTENCES[0])
    tags = [1 if w in ("Marie", "Curie", "Paris") else 0 for w in words]
    item = featurizer.encode(words, word_labels=tags)
    assert item["is_knowledge"].any()
    assert (item["labels"][item["is_knowledge"]] == IGNORE_INDEX).all()
    # One label per word, on its first trunk piece, in word order.
    assert item["labels"][item["labels"] != IGNORE_INDEX].tolist() == tags
    collated = featurizer.collate(
        [item, featurizer.encode(segment_words(SENTENCES[1]), word_labels=[0] * 8)]
    )
    batch = featurizer.task_batch(collated)
    # The labelled positions are exactly each word's first trunk piece.
    assert torch.equal(batch["labels"] != IGNORE_INDEX, collated["word_start"])
    model = build_task_model(_encoder(tokenizer), "tagging", 2).eval()
    logits = model(batch).logits
    assert logits.shape[:2] == batch["input_ids"].shape
    assert [int(r.sum()) for r in batch["word_start"]] == [len(words), 8]
    # A label put on a branch token by mistake is still not trained on.
    poisoned = dict(collated)
    poisoned["labels"] = collated["labels"].masked_fill(collated["is_knowledge"], 1)
    assert (poisoned["labels"][collated["is_knowledge"]] == 1).all()
    torch.testing.assert_close(model(featurizer.task_batch(poisoned)).loss, model(batch).loss)


def test_ablation_arguments_are_checked(tokenizer) -> None:
    with pytest.raises(ValueError, match="kg must be"):
        KBertFeaturizer(tokenizer, {}, kg="off")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="visible_matrix must be"):
        KBertFeaturizer(tokenizer, {}, visible_matrix="none")  # type: ignore[arg-type]
