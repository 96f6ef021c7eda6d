"""ImageBERT: its embedding sum (Qi et al., 2020, §3.2) built by hand, the shared region
objective's MOC + MRFR losses, the weakly-supervised synthetic captions and the stages'
data checks. The paper has no public code: the hand-made cases follow its text."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from ptm_core.encoders import EncoderOutput
from ptm_multimodal.boxes import encode_boxes
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.imagebert import ImageBertModel, ImageBertOutput, imagebert
from ptm_multimodal.pretraining import open_stages
from ptm_multimodal.region_masking import MaskedRegionObjective
from ptm_multimodal.settings import ImageTextData, PretrainStage, SyntheticPairs
from ptm_multimodal.synthetic import make_scene, noisy_caption, write_synthetic_dataset

SPEC = FeatureSpec(extractor="test", feature_size=6, extractor_hash="0", num_classes=4)


def tiny(**numbers: object) -> ImageBertModel:
    torch.manual_seed(0)
    return imagebert(
        vocab_size=30,
        visual_embedding_dim=6,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=12,
        dropout=0.0,
        attention_dropout=0.0,
        feature_spec=SPEC,
        **numbers,  # type: ignore[arg-type]
    )


def inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    boxes = torch.tensor([[[0, 0, 32, 16], [8, 8, 64, 64], [0, 0, 0, 0]]] * 2, dtype=torch.float)
    return {
        "input_ids": torch.tensor([[2, 7, 9, 11, 3], [2, 8, 3, 0, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
        "token_type_ids": torch.zeros(2, 5, dtype=torch.long),
        "visual_features": torch.randn(2, 3, 6, generator=g),
        "visual_boxes": encode_boxes(boxes, 64, 64),
        "visual_mask": torch.tensor([[1, 1, 0], [1, 1, 1]]),
    }


def test_embedding_is_word_or_region_plus_location_segment_and_dummy_position() -> None:
    model = tiny()
    emb = model.encoder.embeddings
    batch = inputs()
    captured: dict[str, torch.Tensor] = {}
    emb.register_forward_hook(lambda _m, _a, out: captured.setdefault("out", out))
    model(**{k: v for k, v in batch.items() if k != "input_ids"}, input_ids=batch["input_ids"])
    # By hand, from the paper: text = word + position i + segment "text";
    # region = W_v f + W_b c (c the 5-d location) + one dummy position + segment "image".
    assert emb.position is not None and emb.token_type is not None and emb.norm is not None
    text = (
        emb.word.weight[batch["input_ids"]]
        + emb.position.weight[torch.arange(5)]
        + emb.token_type.weight[0]
    )
    region = (
        batch["visual_features"] @ model.visual_projection.weight.T
        + model.visual_projection.bias
        + batch["visual_boxes"] @ model.box_projection.weight.T  # type: ignore[union-attr]
        + model.box_projection.bias  # type: ignore[union-attr]
        + emb.position.weight[12]  # the dummy row after the text's 12 positions
        + emb.token_type.weight[2 + 1]  # the image's segment row
    )
    expected = F.layer_norm(
        torch.cat([text, region], 1), (16,), emb.norm.weight, emb.norm.bias, emb.norm.eps
    )
    torch.testing.assert_close(captured["out"], expected)
    assert model.checkpoint_config()["architecture"] == "imagebert"


def test_regions_have_no_order_and_their_states_are_the_last_slots() -> None:
    model = tiny().eval()
    batch = inputs()
    out = model(**batch)
    assert isinstance(out, ImageBertOutput) and isinstance(out, EncoderOutput)
    assert out.last_hidden_state.shape == (2, 8, 16)
    torch.testing.assert_close(out.region_hidden_state, out.last_hidden_state[:, 5:])
    # permuting the regions (features, boxes, mask together) permutes their states only
    order = torch.tensor([2, 0, 1])
    moved = model(
        **{
            **batch,
            "visual_features": batch["visual_features"][:, order],
            "visual_boxes": batch["visual_boxes"][:, order],
            "visual_mask": batch["visual_mask"][:, order],
        }
    )
    real = batch["visual_mask"].bool()
    torch.testing.assert_close(
        moved.region_hidden_state[:, 1:][real[:, :2]], out.region_hidden_state[:, :2][real[:, :2]]
    )
    torch.testing.assert_close(moved.last_hidden_state[:, :5], out.last_hidden_state[:, :5])
    with pytest.raises(ValueError, match="visual_boxes"):
        model(**{**batch, "visual_boxes": None})


def test_moc_and_mrfr_share_one_masking_and_count_on_matched_rows() -> None:
    model = tiny()
    objective = MaskedRegionObjective(model, target="both", class_loss="label")
    assert objective.class_head is not None and objective.feature_head is not None
    batch = inputs()
    classes = torch.softmax(torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(3)), -1)
    selected = torch.tensor([[True, False, False], [False, True, True]])
    batch.update(
        visual_classes=classes,
        region_selected=selected,
        region_target_features=batch["visual_features"],
        match_label=torch.tensor([1, 0]),  # row 1's caption is swapped: not counted
    )
    out = model(**{k: batch[k] for k in inputs()})
    result = objective(out, batch)
    state = out.region_hidden_state[0, 0]
    moc = F.cross_entropy(objective.class_head(state)[None], classes[0, 0].argmax()[None])
    mrfr = ((objective.feature_head(state) - batch["visual_features"][0, 0]) ** 2).mean()
    torch.testing.assert_close(result.metrics["moc"], moc.detach())
    torch.testing.assert_close(result.metrics["mrfr"], mrfr.detach())
    torch.testing.assert_close(result.loss, moc + mrfr)
    assert float(result.metrics["regions"]) == 1.0
    # the distribution form (ViLBERT, VL-BERT) is KL to the detector's distribution
    kl = MaskedRegionObjective(model, target="classes")
    kl.class_head = objective.class_head
    expected = F.kl_div(
        F.log_softmax(objective.class_head(state), -1), classes[0, 0], reduction="sum"
    )
    torch.testing.assert_close(kl(out, batch).loss, expected)
    no_classes = imagebert(vocab_size=30, visual_embedding_dim=6, hidden_size=16, num_heads=2)
    with pytest.raises(ValueError, match="needs num_classes"):
        MaskedRegionObjective(no_classes, target="both")
    with pytest.raises(ValueError, match="class_loss"):
        MaskedRegionObjective(model, class_loss="hard")  # type: ignore[arg-type]


def test_weak_captions_describe_another_scene_at_the_given_rate(tmp_path: Path) -> None:
    scenes = [make_scene(i, 11) for i in range(2000)]
    noisy = [noisy_caption(s, 11, 0.3) for s in scenes]
    wrong = sum(c != s.caption for c, s in zip(noisy, scenes, strict=True))
    assert stats.binomtest(wrong, len(scenes), 0.3).pvalue > 1e-3, wrong / len(scenes)
    assert noisy == [noisy_caption(s, 11, 0.3) for s in scenes]  # deterministic
    assert [noisy_caption(s, 11, 0.0) for s in scenes[:50]] == [s.caption for s in scenes[:50]]
    written = write_synthetic_dataset(tmp_path / "weak", 40, seed=11, caption_noise=0.3)
    rows = [json.loads(x) for x in (written / "pairs.jsonl").read_text().splitlines()]
    assert [r["caption"] for r in rows] == noisy[:40]
    with pytest.raises(ValueError, match="caption_noise"):
        noisy_caption(scenes[0], 11, 1.5)


def test_stages_read_their_own_data_and_must_share_the_vocabulary(tmp_path: Path) -> None:
    data = ImageTextData(
        stages=[
            PretrainStage("weak", 3, synthetic=SyntheticPairs(20, seed=4, caption_noise=0.5)),
            PretrainStage("clean", 2, synthetic=SyntheticPairs(12, seed=5, eval_images=6)),
        ],
        prepare=False,
    )
    from ptm_multimodal.caption_tokenizer import load_caption_tokenizer

    opened, held_out, spec, _ = open_stages(tmp_path, data, tokenizer_for=load_caption_tokenizer)
    assert [(o.stage.name, len(o.rows)) for o in opened] == [("weak", 20), ("clean", 12)]
    assert held_out is not None and len(held_out) == 6 and spec.num_classes == 18
    assert not (tmp_path / "data" / "train").exists()  # each stage in its own folder
    with pytest.raises(ValueError, match="both set"):
        open_stages(
            tmp_path,
            ImageTextData(train_dir=str(tmp_path / "data" / "weak"), stages=data.stages),
            tokenizer_for=load_caption_tokenizer,
        )
    other = write_synthetic_dataset(tmp_path / "other", 8, seed=9)
    words = (other / "vocab.txt").read_text().splitlines()
    random.Random(0).shuffle(words)
    (other / "vocab.txt").write_text("\n".join(words) + "\n")
    mixed = ImageTextData(
        stages=[PretrainStage("weak", 1, synthetic=SyntheticPairs(20, seed=4)),
                PretrainStage("mine", 1, train_dir=str(other))],
        prepare=False,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"data.stages\[1\] \(mine\).*vocabulary"):
        open_stages(tmp_path, mixed, tokenizer_for=load_caption_tokenizer)
