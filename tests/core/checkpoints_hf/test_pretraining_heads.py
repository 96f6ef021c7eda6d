"""``init_from=<Hugging Face folder>`` heads: ALBERT's MLM + SOP, ELECTRA's discriminator and
XLNet's LM bias land in ptm's objectives with transformers' outputs (1e-5); a bare
``...Model`` folder leaves every head fresh and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers

from ptm_core.checkpoints.hf.pretraining_heads import load_hf_pretraining_heads
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives import (
    MaskedLMObjective,
    PermutationLMObjective,
    ReplacedTokenDetectionObjective,
    SentenceOrderObjective,
)
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(99, 0, 1, 2, 3, 4)
TOL = 1e-5


def _perturbed(model: Any, directory: Path) -> Any:
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=g))
    model.save_pretrained(directory)
    return model.eval()


def _ids() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 99, (2, 7), generator=g)
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids)}


def test_albert_for_pretraining_heads_load_into_mlm_and_sop(tmp_path: Path) -> None:
    config = transformers.AlbertConfig(
        vocab_size=99,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    theirs = _perturbed(transformers.AlbertForPreTraining(config), tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path).eval()
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, VOCAB),
            "sop": build_objective(SentenceOrderObjective, encoder, VOCAB),
        }
    )
    assert load_hf_pretraining_heads(mix, tmp_path) == (["mlm", "sop"], [])
    batch = _ids()
    with torch.no_grad():
        hidden = encoder(**batch).last_hidden_state
        expected = theirs(**batch)
        objectives = dict(mix)
        assert (objectives["mlm"].head(hidden) - expected.prediction_logits).abs().max() <= TOL
        assert (objectives["sop"].head(hidden) - expected.sop_logits).abs().max() <= TOL


def test_electra_discriminator_and_xlnet_lm_heads_load(tmp_path: Path) -> None:
    electra_config = transformers.ElectraConfig(
        vocab_size=99,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    theirs = _perturbed(transformers.ElectraForPreTraining(electra_config), tmp_path / "e")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "e").eval()
    rtd = ReplacedTokenDetectionObjective(encoder, VOCAB)
    assert load_hf_pretraining_heads(ObjectiveMix({"rtd": rtd}), tmp_path / "e") == (
        ["rtd"],
        [],
    )
    batch = _ids()
    with torch.no_grad():
        ours = rtd.discriminator_head(encoder(**batch).last_hidden_state)
        assert (ours - theirs(**batch).logits).abs().max() <= TOL

    xlnet_config = transformers.XLNetConfig(
        vocab_size=99, d_model=32, n_layer=1, n_head=2, d_inner=64, dropout=0.0
    )
    xlnet = _perturbed(transformers.XLNetLMHeadModel(xlnet_config), tmp_path / "x")
    encoder = TransformerEncoder.from_pretrained(tmp_path / "x").eval()
    plm = build_objective(PermutationLMObjective, encoder, VOCAB)
    assert load_hf_pretraining_heads(ObjectiveMix({"plm": plm}), tmp_path / "x") == (["plm"], [])
    assert torch.equal(plm.output_bias.detach(), xlnet.lm_loss.bias.detach())


def test_a_bare_bert_model_leaves_every_head_fresh(tmp_path: Path) -> None:
    config = transformers.BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    transformers.BertModel(config).save_pretrained(tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path)
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, VOCAB)})
    assert load_hf_pretraining_heads(mix, tmp_path) == ([], ["mlm"])
