"""TagLM: static word vectors beside frozen LM embeddings (biLM or Transformer) in a tagger."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from ptm_classic.finetune.taglm import TagLMTagger, WordBatches
from ptm_classic.finetune.taglm_io import load_word_model, save_word_model
from ptm_classic.finetune.word_classifier import WordClassifier
from ptm_classic.finetune.word_features import (
    BiLMWordFeatures,
    CharCNNFeatures,
    EncoderWordFeatures,
    StaticWordEmbedding,
    WordFeatures,
    load_vector_table,
)
from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.presets import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer

WORDS = ["the", "cat", "sat", "on", "mat", "paris", "rome", "anna", "bob", "in", "met"]
PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "un", "##aff", "##able"]
TAGS = ["O", "B-PER", "B-LOC"]


class FakeBiLM(nn.Module):
    """What ``ptm_classic.recurrent.bilm.BiLM`` offers the tagger: ``layer_states``, 2 LSTM
    layers over a bag of character embeddings, ``2 * projection`` wide."""

    def __init__(self, projection: int = 6) -> None:
        super().__init__()
        self.chars = nn.EmbeddingBag(262, 2 * projection, mode="mean")
        self.forward_lstm = nn.LSTM(2 * projection, projection, num_layers=1, batch_first=True)
        self.backward_lstm = nn.LSTM(2 * projection, projection, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(0.5)

    def layer_states(self, char_ids: Tensor, mask: Tensor) -> list[Tensor]:
        batch, length, chars = char_ids.shape
        token = self.chars(char_ids.reshape(-1, chars)).view(batch, length, -1)
        token = self.dropout(token) * mask.unsqueeze(-1)
        forward, _ = self.forward_lstm(token)
        backward, _ = self.backward_lstm(token.flip(1))
        return [token, torch.cat([forward, backward.flip(1)], -1)]


def tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{p}\n" for p in PIECES))
    return WordPieceTokenizer.from_vocab(vocab)


def encoder_features(tmp_path: Path, hidden: int = 16) -> EncoderWordFeatures:
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=len(PIECES),
        hidden_size=hidden,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=32,
    )
    return EncoderWordFeatures(encoder, tokenizer(tmp_path))


def static_table(dim: int = 8) -> StaticWordEmbedding:
    vectors = torch.randn(len(WORDS), dim, generator=torch.Generator().manual_seed(1))
    return StaticWordEmbedding(WORDS, vectors)


def planted(count: int, seed: int) -> tuple[list[list[str]], list[list[int]]]:
    """Names after "met" are people, after "in" places; the tag is planted in the context."""
    generator = torch.Generator().manual_seed(seed)
    names = ["paris", "rome", "anna", "bob"]
    sentences, tags = [], []
    for _ in range(count):
        words, row = [], []
        for _ in range(int(torch.randint(1, 4, (1,), generator=generator))):
            cue = ["met", "in"][int(torch.randint(0, 2, (1,), generator=generator))]
            name = names[int(torch.randint(0, 4, (1,), generator=generator))]
            words += ["the", "cat", cue, name]
            row += [0, 0, 0, 1 if cue == "met" else 2]
        sentences.append(words)
        tags.append(row)
    return sentences, tags


def test_concatenated_width_is_static_plus_lm(tmp_path: Path) -> None:
    for lm in (encoder_features(tmp_path), BiLMWordFeatures(FakeBiLM())):
        features = WordFeatures(static=static_table(), lm=lm)
        assert features.output_dim == 8 + lm.hidden_size
        out = features(features.encode([["the", "cat"], ["anna", "met", "bob", "in", "rome"]]))
        assert out.shape == (2, 5, 8 + lm.hidden_size)
    with_chars = WordFeatures(static=static_table(), chars=CharCNNFeatures(5), lm=lm)
    assert with_chars(with_chars.encode([["rome"]])).shape == (1, 1, 8 + 5 + 12)


def test_first_pieces_align_words_with_the_encoder(tmp_path: Path) -> None:
    lm = encoder_features(tmp_path).eval()
    batch = lm.encode([["the", "unaffable", "cat"], ["rome"]])
    pieces = lm.tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist())
    assert pieces == ["[CLS]", "the", "un", "##aff", "##able", "cat", "[SEP]"]
    assert batch["first_piece_mask"][0].tolist() == [False, True, True, False, False, True, False]
    assert batch["first_piece_mask"][1].tolist() == [False, True, False] + [False] * 4
    assert batch["attention_mask"][1].tolist() == [1, 1, 1, 0, 0, 0, 0]
    words = lm(batch["input_ids"], batch["attention_mask"], batch["first_piece_mask"], 3)
    mixed = lm.frozen(batch["input_ids"], batch["attention_mask"])
    torch.testing.assert_close(words[0], mixed[0, [1, 2, 5]])
    torch.testing.assert_close(words[1, 0], mixed[1, 1])
    assert torch.equal(words[1, 1:], torch.zeros(2, 16))


def test_only_the_task_model_learns(tmp_path: Path) -> None:
    for lm in (encoder_features(tmp_path), BiLMWordFeatures(FakeBiLM())):
        torch.manual_seed(0)
        model = TagLMTagger(WordFeatures(static=static_table(), lm=lm), 3, label_names=TAGS)
        frozen_module = lm.frozen.encoder if isinstance(lm, EncoderWordFeatures) else lm.bilm
        frozen = copy.deepcopy(frozen_module.state_dict())
        static_before = model.features.static.embedding.weight.detach().clone()  # type: ignore[union-attr]
        lstm_before = model.lstm.weight_ih_l0.detach().clone()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.01)
        model.train()
        sentences, tags = planted(8, 0)
        loss = model(model.encode(sentences, tags)).loss
        assert loss is not None
        loss.backward()
        assert all(p.grad is None for p in frozen_module.parameters())
        assert not any(p.requires_grad for p in frozen_module.parameters())
        assert lm.mix.scalars.grad is not None and model.lstm.weight_ih_l0.grad is not None
        optimizer.step()
        for name, value in frozen_module.state_dict().items():
            assert torch.equal(value, frozen[name]), name
        assert not frozen_module.training  # no dropout inside the frozen LM
        assert torch.equal(model.features.static.embedding.weight, static_before)  # type: ignore[union-attr]
        assert not torch.equal(model.lstm.weight_ih_l0, lstm_before)


def test_tagger_loss_falls_on_a_planted_task(tmp_path: Path) -> None:
    torch.manual_seed(0)
    features = WordFeatures(static=static_table(), lm=BiLMWordFeatures(FakeBiLM()))
    model = TagLMTagger(features, 3, label_names=TAGS, lstm_hidden=16, dropout=0.1)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.02)
    data = WordBatches(model.encode, *planted(64, 1), batch_size=16, seed=0)
    losses = []
    for epoch in range(6):
        for batch in data.iter_batches(epoch):
            loss = model(batch).loss
            assert loss is not None
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    assert sum(losses[-4:]) / 4 < 0.25 * sum(losses[:4]) / 4
    model.eval()
    sentences, tags = planted(16, 2)
    predicted = model.tag(sentences)
    right = sum(
        p == t for ps, ts in zip(predicted, tags, strict=True) for p, t in zip(ps, ts, strict=True)
    )
    assert right / sum(len(t) for t in tags) > 0.95


def test_save_load_round_trip_predicts_the_same(tmp_path: Path) -> None:
    torch.manual_seed(0)
    features = WordFeatures(
        static=StaticWordEmbedding(WORDS, torch.randn(len(WORDS), 8), freeze=False),
        chars=CharCNNFeatures(4),
        lm=encoder_features(tmp_path),
    )
    tagger = TagLMTagger(features, 3, label_names=TAGS, lstm_hidden=8)
    nn.init.normal_(tagger.crf.transitions)  # type: ignore[union-attr]
    classifier = WordClassifier(
        WordFeatures(static=static_table(), lm=encoder_features(tmp_path)), 2, lstm_hidden=8
    )
    sentences = [["anna", "met", "bob"], ["the", "unaffable", "cat", "in", "oslo"]]
    for model, name in ((tagger, "tagger"), (classifier, "classifier")):
        model.eval()
        before = model(model.encode(sentences)).logits
        saved = save_word_model(model, tmp_path / name, task_config={"task": "toy"})
        assert sorted(p.name for p in saved.iterdir()) == [
            ".ptm-output.json",
            "lm",
            "static_vocab.txt",
            "taglm.json",
            "taglm.safetensors",
        ]
        loaded, record = load_word_model(saved)
        loaded.eval()
        assert type(loaded) is type(model) and record["task"] == "toy"
        assert torch.equal(loaded(loaded.encode(sentences)).logits, before)
    assert loaded.features.lm is not None
    assert not any(p.requires_grad for p in loaded.features.lm.parameters() if p.dim() > 1)


def test_clear_errors_for_mismatch_and_missing_table(tmp_path: Path) -> None:
    model = TagLMTagger(WordFeatures(static=static_table(), lm=encoder_features(tmp_path)), 3)
    saved = save_word_model(model, tmp_path / "tagger")
    (tmp_path / "wide").mkdir()
    wider = encoder_features(tmp_path / "wide", hidden=24)
    with pytest.raises(CheckpointError, match=r"taglm.json: features.lm.hidden_size is 16 .* 24"):
        load_word_model(saved, lm=wider)
    (saved / "static_vocab.txt").unlink()
    with pytest.raises(CheckpointError, match=r"static_vocab\.txt: missing"):
        load_word_model(saved)
    with pytest.raises(FileNotFoundError, match=r"no-table: no vector table here \(missing "):
        load_vector_table(tmp_path / "no-table")
    with pytest.raises(ValueError, match=r"3 words but its vectors have shape \(2, 4\)"):
        StaticWordEmbedding(["a", "b", "c"], torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"BiLMWordFeatures\.from_final"):
        save_word_model(
            TagLMTagger(WordFeatures(lm=BiLMWordFeatures(FakeBiLM())), 3), tmp_path / "x"
        )


def test_elmo_bilm_tagger_saves_with_its_final(tmp_path: Path) -> None:
    from ptm_classic.recurrent.bilm import BiLM, BiLMConfig, save_bilm

    torch.manual_seed(0)
    config = BiLMConfig(
        vocab_size=8,
        filters=[[1, 4], [2, 4]],
        num_highway=1,
        cell_size=8,
        projection_dim=4,
        softmax="full",
    )
    final = save_bilm(BiLM(config), tmp_path / "final", [f"w{i}" for i in range(8)])
    lm = BiLMWordFeatures.from_final(final)
    assert lm.hidden_size == 8 and lm.layers == [0, 1, 2]
    model = TagLMTagger(WordFeatures(static=static_table(), lm=lm), 3, label_names=TAGS).eval()
    sentences = [["anna", "met", "bob"], ["rome"]]
    before = model(model.encode(sentences)).logits
    saved = save_word_model(model, tmp_path / "tagger")
    assert (saved / "lm" / "model.safetensors").is_file()
    loaded, _ = load_word_model(saved)
    loaded.eval()
    torch.testing.assert_close(loaded(loaded.encode(sentences)).logits, before)


class ScaledBiLM(nn.Module):
    """A FakeBiLM whose states are multiplied by ``scale`` (and shifted by ``shift``)."""

    def __init__(self, inner: nn.Module, scale: float, shift: float = 0.0) -> None:
        super().__init__()
        self.inner, self.scale, self.shift = inner, scale, shift

    def layer_states(self, char_ids: Tensor, mask: Tensor) -> list[Tensor]:
        states = self.inner.layer_states(char_ids, mask)
        return [(s * self.scale + self.shift) * mask.unsqueeze(-1) for s in states]


def test_bilm_features_are_unit_scale_whatever_the_biLMs_scale() -> None:
    # The tiny gain biLM's raw states have mean norms 48 / 17 / 22 (word2vec: 2.1); mixed raw,
    # they swamped the static vectors and scored below random vectors. Layer-normalised
    # states make the features independent of the biLM's scale.
    torch.manual_seed(0)
    inner = FakeBiLM()
    sentences = [["anna", "met", "bob", "in", "rome"], ["the", "cat"]]
    outputs = {}
    for scale, shift in ((1.0, 0.0), (50.0, 3.0)):
        lm = BiLMWordFeatures(ScaledBiLM(inner, scale, shift))
        features = WordFeatures(lm=lm)
        batch = features.encode(sentences)
        outputs[scale] = features(batch)
    mask = batch["word_mask"]
    torch.testing.assert_close(outputs[50.0], outputs[1.0], atol=1e-4, rtol=1e-4)
    # (words, D): a convex mix (gamma = 1) of per-word normalised layers: mean 0, variance <= 1
    real = outputs[50.0][mask]
    torch.testing.assert_close(real.mean(-1), torch.zeros(len(real)), atol=1e-4, rtol=0)
    variance = real.var(-1, unbiased=False)
    assert bool((variance <= 1 + 1e-4).all()) and bool((variance > 0.2).all()), variance
    one = BiLMWordFeatures(ScaledBiLM(inner, 50.0, 3.0), layers=[1])
    single = WordFeatures(lm=one)(batch)[mask]  # one layer: exactly unit variance
    torch.testing.assert_close(
        single.var(-1, unbiased=False), torch.ones(len(single)), atol=1e-3, rtol=0
    )
    assert outputs[50.0][~mask].abs().max() == 0  # padding words stay 0
    raw = WordFeatures(lm=BiLMWordFeatures(ScaledBiLM(inner, 50.0, 3.0), normalize=None))
    assert raw(raw.encode(sentences))[mask].norm(dim=-1).mean() > 20 * real.norm(dim=-1).mean()


def test_real_bilm_features_do_not_depend_on_the_batch() -> None:
    # ELMo's biLM adds <S>/</S> itself and packs by length: a sentence's word vectors must be
    # the same alone and beside a longer sentence, under every normalisation.
    from ptm_classic.recurrent.bilm import BiLM, BiLMConfig

    torch.manual_seed(0)
    config = BiLMConfig(
        vocab_size=8, filters=[[1, 4], [2, 4]], num_highway=1, cell_size=8, projection_dim=4
    )
    bilm = BiLM(config)
    long, short = ["anna", "met", "bob", "in", "rome"], ["the", "cat"]
    for normalize in (None, "layer", "mix"):
        features = WordFeatures(lm=BiLMWordFeatures(bilm, normalize=normalize)).train()
        together = features(features.encode([long, short]))
        alone = features(features.encode([short]))
        torch.testing.assert_close(together[1, :2], alone[0], atol=1e-5, rtol=1e-5)
        assert together[1, 2:].abs().max() == 0
    mixed = WordFeatures(lm=BiLMWordFeatures(ScaledBiLM(bilm, 30.0), normalize="mix"))
    real = mixed(mixed.encode([long]))[0]
    torch.testing.assert_close(real.var(-1, unbiased=False), torch.ones(5), atol=1e-3, rtol=0)
    with pytest.raises(ValueError, match="normalize must be one of"):
        BiLMWordFeatures(FakeBiLM(), normalize="batch")
