"""``ElectraForMaskedLM`` (ELECTRA's generator: dense, GELU, LayerNorm, then the tied
``generator_lm_head``) and ``AlbertForMaskedLM`` folders: the encoder loads strictly, the MLM
head lands in ptm's MLM objective with transformers' logits (1e-5), and ptm's export loads
back in ``AutoModelForMaskedLM`` with the same logits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.pretraining_heads import load_hf_pretraining_heads
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives import MaskedLMObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(97, 0, 1, 2, 3, 4)
TOL = 1e-5
CLASSES = {"electra": transformers.ElectraForMaskedLM, "albert": transformers.AlbertForMaskedLM}


def _config(family: str) -> Any:
    config_class = transformers.ElectraConfig if family == "electra" else transformers.AlbertConfig
    return config_class(
        vocab_size=97,
        embedding_size=16,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=32,
    )


def _save(family: str, directory: Path) -> Any:
    torch.manual_seed(0)
    model = CLASSES[family](_config(family))
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():  # off the init (zero biases, unit norms) so a lost tensor shows
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=g))
    model.save_pretrained(directory)
    return model.eval()


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 97, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return {
        "input_ids": ids * mask,
        "attention_mask": mask,
        "token_type_ids": torch.zeros_like(ids),
    }


@pytest.mark.parametrize("family", list(CLASSES))
def test_masked_lm_folder_round_trips_with_its_head(family: str, tmp_path: Path) -> None:
    theirs = _save(family, tmp_path / "hf")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()  # strict
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, VOCAB)})
    assert load_hf_pretraining_heads(mix, tmp_path / "hf") == (["mlm"], [])
    mlm = dict(mix)["mlm"]
    batch = _batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        ours = mlm.head(encoder(**batch).last_hidden_state)
        expected = theirs(**batch).logits
    assert (ours - expected)[real].abs().max().item() <= TOL

    with torch.no_grad():  # another head than the folder's, so the export is what is read
        mlm.head.dense.bias.add_(0.1)
        ours = mlm.head(encoder(**batch).last_hidden_state)
    encoder.save_pretrained(tmp_path / "out", format="hf", heads=mix)
    exported, info = transformers.AutoModelForMaskedLM.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert type(exported) is CLASSES[family]
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        again = exported.eval()(**batch).logits
    assert (ours - again)[real].abs().max().item() <= TOL


def test_a_generator_head_untied_from_the_table_is_refused(tmp_path: Path) -> None:
    _save("electra", tmp_path)
    from safetensors.torch import load_file, save_file

    weights = load_file(str(tmp_path / "model.safetensors"))
    weights["generator_lm_head.weight"] = torch.zeros(97, 16)
    save_file(weights, str(tmp_path / "model.safetensors"))
    encoder = TransformerEncoder.from_pretrained(tmp_path)
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, VOCAB)})
    with pytest.raises(CheckpointError, match=r"model\.safetensors: generator_lm_head\.weight"):
        load_hf_pretraining_heads(mix, tmp_path)


def test_a_generator_of_another_vocabulary_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    import json

    _save("electra", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["vocab_size"] = 101
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as info:
        TransformerEncoder.from_pretrained(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'model.safetensors'}: ")
    assert "embeddings.word.weight: checkpoint (97, 16) vs model (101, 16)" in message
