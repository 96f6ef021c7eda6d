"""CoVe's downstream input is [GloVe(w); CoVe(w)], in that order, with the right widths,
and no gradient reaches GloVe or the MT-LSTM."""

from __future__ import annotations

import pytest
import torch

from ptm_classic.cove.features import CoVeWordFeatures
from ptm_classic.cove.mt_lstm import MTLSTM
from ptm_classic.finetune.word_classifier import WordClassifier
from ptm_classic.finetune.word_features import StaticWordEmbedding

WORDS = ["the", "cat", "sees", "a", "dog", "."]


def _parts(dim: int = 6, hidden: int = 5) -> tuple[StaticWordEmbedding, MTLSTM]:
    torch.manual_seed(0)
    glove = StaticWordEmbedding(WORDS, torch.randn(len(WORDS), dim))
    return glove, MTLSTM(dim, hidden, dropout=0.5)


@pytest.mark.parametrize(
    ("inputs", "layers", "width"),
    [
        ("glove+cove", "layer1", 6 + 10),
        ("glove+cove", "both", 6 + 20),
        ("glove+cove", "layer0", 6 + 10),
        ("cove", "layer1", 10),
        ("glove", "layer1", 6),
    ],
)
def test_features_are_glove_then_cove(inputs: str, layers: str, width: int) -> None:
    glove, mtlstm = _parts()
    features = CoVeWordFeatures(glove, mtlstm, inputs=inputs, layers=layers)
    sentences = [["the", "cat", "sees", "a", "dog", "."], ["a", "Dog", "unseen"]]
    batch = features.encode(sentences)
    out = features(batch)
    assert out.shape == (2, 6, width) and features.output_dim == width
    vectors = glove(batch["word_ids"])
    mask = batch["word_mask"]
    at = 0
    if inputs != "cove":
        assert torch.equal(out[..., :6], vectors)  # GloVe first, its D columns
        assert torch.equal(out[1, 1, :6], glove.embedding.weight[glove.row("dog")])
        at = 6
    if inputs != "glove":
        mtlstm.eval()
        cove = mtlstm.cove(vectors, mask, layer0=layers != "layer1", layer1=layers != "layer0")
        assert torch.allclose(out[..., at:], cove * mask.unsqueeze(-1), atol=1e-6)
        assert (out[1, 3:, at:] == 0).all()  # padding words


def test_nothing_upstream_of_the_task_model_learns() -> None:
    glove, mtlstm = _parts()
    before = {k: v.clone() for k, v in mtlstm.state_dict().items()}
    table = glove.embedding.weight.clone()
    model = WordClassifier(CoVeWordFeatures(glove, mtlstm), 2, lstm_hidden=4).train()
    assert not mtlstm.training  # frozen: no dropout even in train mode
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    batch = model.encode([["the", "cat"], ["a", "dog", "."]], [0, 1])
    for _ in range(3):
        model(batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert all(not p.requires_grad for p in mtlstm.parameters())
    assert all(torch.equal(before[k], v) for k, v in mtlstm.state_dict().items())
    assert torch.equal(glove.embedding.weight, table)


def test_refusals_name_the_key() -> None:
    glove, mtlstm = _parts()
    with pytest.raises(ValueError, match=r"cove\.inputs"):
        CoVeWordFeatures(glove, mtlstm, inputs="elmo")
    with pytest.raises(ValueError, match=r"cove\.layers"):
        CoVeWordFeatures(glove, mtlstm, layers="layer2")
    with pytest.raises(ValueError, match="trained on"):
        CoVeWordFeatures(glove, MTLSTM(7, 5))
