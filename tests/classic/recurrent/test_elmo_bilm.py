"""ELMo's biLM: directions see only their side, char CNN, published size, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from flows.config import compose_config
from ptm_classic.recurrent.bilm import (
    BiLM,
    BiLMConfig,
    ElmoFeatures,
    bilm_on_meta,
    load_bilm,
    read_vocabulary,
    save_bilm,
)
from ptm_classic.recurrent.char_cnn import CharacterCNN, Highway, characters_to_ids, word_to_ids
from ptm_classic.recurrent.lstmp import LstmpLayer, reverse_padded
from ptm_core.checkpoints import CheckpointError
from ptm_core.modules.scalar_mix import ScalarMix


def tiny_config(**overrides: object) -> BiLMConfig:
    values: dict[str, object] = dict(
        vocab_size=40,
        filters=[[1, 4], [2, 4], [3, 8]],
        num_highway=2,
        num_layers=2,
        cell_size=24,
        projection_dim=8,
        cell_clip=None,
        proj_clip=None,
        dropout=0.0,
        softmax="full",
    )
    values.update(overrides)
    return BiLMConfig(**values)  # type: ignore[arg-type]


SENTENCES = [
    ["The", "river", "flows", "to", "the", "sea", "."],
    ["Curie", "won", "twice"],
]


def _inputs(sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = characters_to_ids(sentences)
    return ids, ids[..., 0] != 0


@pytest.mark.parametrize("clip", [None, 3.0])
def test_forward_never_sees_future_and_backward_never_sees_past(clip: float | None) -> None:
    bilm = BiLM(tiny_config(cell_clip=clip, proj_clip=clip)).eval()
    ids, mask = _inputs(SENTENCES)
    t = 3
    perturbed = [list(s) for s in SENTENCES]
    perturbed[0][t] = "Zanzibar"
    ids2, mask2 = _inputs(perturbed)
    with torch.no_grad():
        before = bilm.layer_states(ids, mask)
        after = bilm.layer_states(ids2, mask2)
    p = bilm.config.projection_dim
    assert len(before) == 3 and all(s.shape == (2, 7, 2 * p) for s in before)
    for layer, (a, b) in enumerate(zip(before, after, strict=True)):
        fa, fb, ba, bb = a[0, :, :p], b[0, :, :p], a[0, :, p:], b[0, :, p:]
        assert torch.equal(fa[:t], fb[:t]), f"layer {layer}: forward saw a future word"
        assert torch.equal(ba[t + 1 :], bb[t + 1 :]), f"layer {layer}: backward saw a past word"
        assert not torch.equal(fa[t], fb[t]) and not torch.equal(ba[t], bb[t])
        if layer > 0:  # the change does propagate the other way
            assert not torch.equal(fa[t + 1 :], fb[t + 1 :])
            assert not torch.equal(ba[:t], bb[:t])
        # the other sentence of the batch is untouched
        assert torch.equal(a[1], b[1])
    # layer 0 is the token representation duplicated; padding is zero
    assert torch.equal(before[0][..., :p], before[0][..., p:])
    assert torch.all(before[2][1, 3:] == 0)


def test_padding_does_not_change_a_sentence_states() -> None:
    bilm = BiLM(tiny_config()).eval()
    alone = bilm.layer_states(*_inputs(SENTENCES[1:]))
    batched = bilm.layer_states(*_inputs(SENTENCES))
    for a, b in zip(alone, batched, strict=True):
        torch.testing.assert_close(a[0], b[1, :3], rtol=1e-5, atol=1e-6)


def test_char_ids_follow_elmo_byte_mapping() -> None:
    ids = characters_to_ids([["é", "ab"], ["x"]], max_characters=6)
    assert ids.shape == (2, 2, 6)
    # BOW 258, bytes of é (0xc3 0xa9), EOW 259, pad 260, all + 1
    assert ids[0, 0].tolist() == [259, 0xC3 + 1, 0xA9 + 1, 260, 261, 261]
    assert ids[1, 1].tolist() == [0] * 6  # a padding word
    long = word_to_ids("a" * 100)
    assert len(long) == 50 and long[0] == 259 and long[-1] == 260


def test_char_cnn_handles_unseen_words() -> None:
    torch.manual_seed(1)
    cnn = CharacterCNN([[1, 4], [2, 6], [3, 8]], num_highway=2, output_dim=10).eval()
    words = ["river", "Zyxqvórtlemberg", "river", "🦜", "x" * 80]
    ids = characters_to_ids([words])
    out = cnn(ids)[0]
    assert out.shape == (5, 10) and torch.isfinite(out).all()
    assert torch.equal(out[0], out[2])
    distinct = [out[i] for i in (0, 1, 3, 4)]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not torch.allclose(distinct[i], distinct[j])


def test_highway_shapes_and_gate_start() -> None:
    layer = Highway(12, num_layers=3)
    assert len(layer.layers) == 3
    assert all(lin.weight.shape == (24, 12) for lin in layer.layers)
    assert all(torch.equal(lin.bias[12:], torch.ones(12)) for lin in layer.layers)
    assert layer(torch.randn(2, 5, 12)).shape == (2, 5, 12)


def test_original_configuration_has_the_published_size() -> None:
    # allennlp's elmo_2x4096_512_2048cnn_2xhighway: "93.6M" = char CNN (embedding, 2048
    # filters, 2 highway, projection) + 4 LSTMP layers, softmax excluded. torch's LSTM keeps
    # two bias vectors per layer (allennlp one): +4 * 16384 = +65,536 (0.07 %).
    # configs/model/elmo_original.yaml, built on the meta device (no memory).
    cfg = compose_config(["experiment=elmo_tiny", "model=elmo_original"])
    bilm = bilm_on_meta(instantiate(cfg.model)(vocab_size=793_471))
    assert bilm.config == BiLMConfig(vocab_size=793_471)  # the yaml is the dataclass default
    assert bilm.softmax.weight.shape == (793_471, 512)
    count = bilm.num_parameters()
    assert abs(count - 93.6e6) / 93.6e6 < 0.01, count
    assert bilm.token_encoder.num_filters == 2048
    assert count == 93_666_400
    assert count - 4 * 4 * 4096 == 93_600_864  # with allennlp's single LSTM bias


def test_clipped_loop_matches_cudnn_path_without_clipping() -> None:
    layer = LstmpLayer(6, 16, 5)
    x = torch.randn(3, 7, 6)
    torch.testing.assert_close(layer.clipped(x), layer(x), rtol=1e-5, atol=1e-6)
    layer.cell_clip, layer.proj_clip = 0.01, 0.01
    assert layer(x).abs().max() <= 0.01 + 1e-7


def test_reverse_padded_reverses_within_length() -> None:
    x = torch.arange(8).view(2, 4, 1)
    out = reverse_padded(x, torch.tensor([4, 2]))
    assert out[..., 0].tolist() == [[3, 2, 1, 0], [5, 4, 6, 7]]


@pytest.mark.parametrize("softmax", ["full", "sampled"])
def test_loss_falls_on_a_tiny_corpus(softmax: str) -> None:
    torch.manual_seed(0)
    bilm = BiLM(tiny_config(vocab_size=12, softmax=softmax, num_samples=6))
    ids, mask = _inputs(SENTENCES)
    targets = torch.tensor([[3, 4, 5, 6, 3, 7, 8], [9, 10, 11, 0, 0, 0, 0]])

    def exact_loss() -> float:
        bilm.eval()
        with torch.no_grad():
            out = bilm.lm_loss(ids, mask, targets)
        bilm.train()
        assert out.exact and out.num_predictions == 7 + 1 + 3 + 1
        return float(out.loss)

    before = exact_loss()
    assert before == pytest.approx(torch.log(torch.tensor(12.0)).item(), rel=0.3)
    optimizer = torch.optim.Adam(bilm.parameters(), lr=2e-2)
    for _ in range(25):
        out = bilm.lm_loss(ids, mask, targets)
        assert out.exact == (softmax == "full")
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    # the sampled softmax (6 of 12 classes per batch) learns more slowly per step
    assert exact_loss() < (0.3 if softmax == "full" else 0.8) * before


def test_save_load_round_trip_gives_identical_states(tmp_path: Path) -> None:
    bilm = BiLM(tiny_config(softmax="sampled", num_samples=5)).eval()
    vocab = ["<unk>", "<s>", "</s>", *[f"w{i}" for i in range(37)]]
    save_bilm(bilm, tmp_path / "final", vocab)
    loaded = load_bilm(tmp_path / "final")
    assert not loaded.training and loaded.config == bilm.config
    assert read_vocabulary(tmp_path / "final") == vocab
    ids, mask = _inputs(SENTENCES)
    for a, b in zip(bilm.layer_states(ids, mask), loaded.layer_states(ids, mask), strict=True):
        assert torch.equal(a, b)


def test_bad_final_dir_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a directory"):
        load_bilm(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"config\.json: missing"):
        load_bilm(tmp_path / "empty")
    bilm = BiLM(tiny_config())
    save_bilm(bilm, tmp_path / "final", ["w"] * 40)
    config_path = tmp_path / "final" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "cell_size": 32}))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: the weights do not fit"):
        load_bilm(tmp_path / "final")
    config_path.write_text(json.dumps({**config, "ptm_format": "ptm-encoder/1"}))
    with pytest.raises(CheckpointError, match="not an ELMo biLM checkpoint"):
        load_bilm(tmp_path / "final")


def test_features_feed_scalar_mix_and_stay_frozen() -> None:
    bilm = BiLM(tiny_config(dropout=0.5))
    features = ElmoFeatures(bilm).train()
    mix = ScalarMix(features.num_layers)
    ids, mask = _inputs(SENTENCES)
    layers = features(ids, mask)
    assert not bilm.training  # no dropout in the features
    assert torch.equal(layers[1], features(ids, mask)[1])
    mixed = mix(layers)
    assert mixed.shape == (2, 7, features.output_dim)
    mixed.sum().backward()
    assert mix.scalars.grad is not None
    assert all(p.grad is None for p in bilm.parameters())
