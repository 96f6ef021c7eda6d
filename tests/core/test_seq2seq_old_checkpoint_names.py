"""A seq2seq training checkpoint written before the family runner (its wrapper called the
network ``model``) resumes into the generic PretrainingModel (which calls it ``encoder``)."""

from __future__ import annotations

from pathlib import Path

import safetensors.torch
import torch
from torch import nn

from ptm_core.encoders import build_encoder_decoder
from ptm_core.families import get
from ptm_core.models import PretrainingModel
from ptm_core.objectives import BartDenoisingObjective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=40, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _wrapped(seed: int) -> PretrainingModel:
    torch.manual_seed(seed)
    network = build_encoder_decoder(
        VOCAB.vocab_size, hidden_size=16, encoder_layers=1, decoder_layers=1, num_heads=2
    )
    objective = BartDenoisingObjective(VOCAB, max_length=16)
    keys = get("seq2seq").input_keys
    return PretrainingModel(network, ObjectiveMix({"bart": objective}), input_keys=keys)


class _OldWrapper(nn.Module):
    """The attribute names of the seq2seq wrapper before the family runner."""

    def __init__(self, model: nn.Module, objective: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.objective = objective


def test_old_model_prefixed_weights_load_strictly(tmp_path: Path) -> None:
    old = _wrapped(seed=0)
    path = tmp_path / "model.safetensors"
    # Written as the trainer writes checkpoints (tied tensors once).
    safetensors.torch.save_model(_OldWrapper(old.encoder, old.objectives), str(path))
    assert all(k.startswith("model.") for k in safetensors.torch.load_file(path))
    new = _wrapped(seed=1)
    assert not torch.equal(
        next(iter(new.encoder.parameters())), next(iter(old.encoder.parameters()))
    )
    safetensors.torch.load_model(new, path, strict=True)
    for (name, a), (_, b) in zip(
        old.encoder.state_dict().items(), new.encoder.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_new_names_are_left_alone(tmp_path: Path) -> None:
    model = _wrapped(seed=0)
    again = _wrapped(seed=1)
    again.load_state_dict(model.state_dict())
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True)
    )
