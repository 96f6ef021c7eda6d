"""VisualBERT equals Hugging Face's VisualBertModel / VisualBertForPreTraining."""

from __future__ import annotations

import pytest
import torch

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_multimodal.evaluation import match_scores
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.matching import ImageTextMatchObjective
from ptm_multimodal.visualbert import visualbert
from ptm_multimodal.visualbert_hf import hf_visualbert_to_ptm, load_hf_visualbert

transformers = pytest.importorskip("transformers")

VOCAB = VocabInfo(vocab_size=120, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _pair():
    cfg = transformers.VisualBertConfig(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        visual_embedding_dim=24,
        max_position_embeddings=40,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    hf = transformers.VisualBertForPreTraining(cfg).eval()
    with torch.no_grad():  # move every weight off its init so nothing matches by accident
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model = visualbert(
        vocab_size=120,
        visual_embedding_dim=24,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_positions=40,
        dropout=0.0,
        attention_dropout=0.0,
        box_position=False,
    )
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, model.encoder, VOCAB, masked_only=False),
            "itm": build_objective(ImageTextMatchObjective, model.encoder, VOCAB),
        }
    )
    ours = PretrainingModel(model, mix, input_keys=INPUT_KEYS).eval()
    mapped = hf_visualbert_to_ptm(hf.state_dict(), num_layers=2)
    missing, unexpected = ours.load_state_dict(mapped, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return hf, ours


def _inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 120, (3, 7), generator=g)
    text_mask = torch.ones(3, 7, dtype=torch.long)
    text_mask[1, 5:] = 0
    feats = torch.randn(3, 4, 24, generator=g)
    vis_mask = torch.ones(3, 4, dtype=torch.long)
    vis_mask[2, 3:] = 0
    types = torch.zeros(3, 7, dtype=torch.long)
    types[:, 4:] = 1
    return ids, text_mask, types, feats, vis_mask


def test_visualbert_matches_hf_pretraining_outputs() -> None:
    hf, ours = _pair()
    ids, text_mask, types, feats, vis_mask = _inputs()
    with torch.no_grad():
        ref = hf(
            input_ids=ids,
            attention_mask=text_mask,
            token_type_ids=types,
            visual_embeds=feats,
            visual_attention_mask=vis_mask,
            output_hidden_states=True,
        )
        out = ours.encoder(
            ids, feats, attention_mask=text_mask, token_type_ids=types, visual_mask=vis_mask
        )
        mlm_logits = ours.objectives.objectives["mlm"].head(out.last_hidden_state)
        itm_logits = ours.objectives.objectives["itm"].head(out.last_hidden_state)
    real = torch.cat([text_mask, vis_mask], 1).bool()
    torch.testing.assert_close(
        out.last_hidden_state[real], ref.hidden_states[-1][real], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(mlm_logits[real], ref.prediction_logits[real], atol=1e-5, rtol=1e-5)
    # ptm's label 1 = match is HF's label 0: the loader swapped the classifier rows.
    torch.testing.assert_close(
        itm_logits, ref.seq_relationship_logits.flip(-1), atol=1e-5, rtol=1e-5
    )


def test_visualbert_matches_hf_model_without_visual_masks() -> None:
    hf, ours = _pair()
    ids, _, _, feats, _ = _inputs()
    with torch.no_grad():
        ref = hf.visual_bert(input_ids=ids, visual_embeds=feats)
        out = ours.encoder(ids, feats)
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        ours.objectives.objectives["itm"].head.pooler(out.last_hidden_state),
        ref.pooler_output,
        atol=1e-5,
        rtol=1e-5,
    )


def test_load_hf_visualbert_directory(tmp_path) -> None:
    hf, _ = _pair()
    hf.save_pretrained(tmp_path)
    loaded = load_hf_visualbert(tmp_path, VOCAB).eval()
    ids, text_mask, types, feats, vis_mask = _inputs()
    with torch.no_grad():
        ref = hf(
            input_ids=ids,
            attention_mask=text_mask,
            token_type_ids=types,
            visual_embeds=feats,
            visual_attention_mask=vis_mask,
        )
        batch = {
            "input_ids": ids,
            "attention_mask": text_mask,
            "token_type_ids": types,
            "visual_features": feats,
            "visual_mask": vis_mask,
        }
        scores = match_scores(loaded, batch)
    expected = ref.seq_relationship_logits[:, 0] - ref.seq_relationship_logits[:, 1]
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)
