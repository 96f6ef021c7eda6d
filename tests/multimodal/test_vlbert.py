"""VL-BERT's embedding against jackroos/VL-BERT's arithmetic, and its masked RoIs.

The golden test rebuilds ``VisualLinguisticBert.embedding`` of jackroos/VL-BERT
(common/visual_linguistic_bert.py, with ``visual_ln``, ``obj_pos_id_relative`` and
``visual_size == hidden_size``) in plain torch from the model's own weights: the text and
objects are concatenated seamlessly (real text, then real objects, then ``[END]``), text
tokens take the whole image's RoI representation (``_collect_obj_reps`` with tag 0, the
whole-image box the datasets prepend), objects their own, objects share the position
after the text and ``[END]`` the one after that, token type 2 for objects and ``[END]``,
then ``LayerNorm(words + visual + position + type)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ptm_multimodal.region_masking import MaskedRegionObjective
from ptm_multimodal.vlbert import WHOLE_IMAGE_BOX, VlbertModel, vlbert

D_V = 6


def tiny(**kwargs: object) -> VlbertModel:
    torch.manual_seed(0)
    model = vlbert(
        vocab_size=20,
        visual_embedding_dim=D_V,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_positions=8,
        dropout=0.0,
        attention_dropout=0.0,
        **kwargs,  # type: ignore[arg-type]
    )
    with torch.no_grad():  # non-trivial gains and biases, so that a swapped LN shows
        for norm in (model.visual_norm_text, model.visual_norm_object):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return model.eval()


def hand_made() -> dict[str, Tensor]:
    """Two rows: 5 and 3 real tokens (segments 0/1), 3 and 2 real regions, padded."""
    g = torch.Generator().manual_seed(1)
    features = torch.randn(2, 3, D_V, generator=g)
    features[1, 2] = 0.0  # padding
    boxes = torch.rand(2, 3, 5, generator=g)
    return {
        "input_ids": torch.tensor([[2, 7, 8, 9, 3], [2, 11, 3, 0, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
        "token_type_ids": torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]),
        "visual_features": features,
        "visual_boxes": boxes,
        "visual_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
    }


def reference_inputs(
    model: VlbertModel, batch: dict[str, Tensor], row: int
) -> tuple[Tensor, Tensor, Tensor]:
    """jackroos/VL-BERT's ``vl_embeddings``, position and token type ids of one row, its
    real elements in its seamless order. A row without a box is a text-only row of
    ``ResNetVLBERTForPretrainingMultitask``: its text tokens take
    ``aux_text_visual_embedding`` and it has no object (``box_mask_multi`` 0)."""
    emb = model.encoder.embeddings
    text_mask = batch["attention_mask"][row].bool()
    box_mask = batch["visual_mask"][row].bool()
    ids = batch["input_ids"][row][text_mask]
    img_word, mask_word, end_word = model.special_embeddings.weight
    if not box_mask.any():
        assert model.text_only_embedding is not None
        text_vl = emb.word(ids) + model.visual_norm_text(model.text_only_embedding)
        vl = torch.cat([text_vl, end_word[None]])
        types = torch.cat([batch["token_type_ids"][row][text_mask], torch.tensor([2])])
        positions = torch.cat([torch.arange(len(ids)), torch.tensor([len(ids) + 1])])
        return vl, positions, types
    feats = batch["visual_features"][row][box_mask]
    boxes = batch["visual_boxes"][row][box_mask]
    # the datasets' add_image_as_a_box: the whole image first; with precomputed features
    # its feature is the boxes' mean (coco_captions.py's commented branch)
    feats = torch.cat([feats.mean(0, keepdim=True), feats])
    boxes = torch.cat([torch.tensor([WHOLE_IMAGE_BOX]), boxes])
    obj_reps = model.visual_projection(feats) + model.box_projection(boxes)
    mvrc_ops = torch.cat(
        [torch.tensor([False]), (batch["visual_features"][row][box_mask] == 0).all(-1)]
    )
    text_vl = emb.word(ids) + model.visual_norm_text(obj_reps[0]).expand(len(ids), -1)
    object_linguistic = torch.where(mvrc_ops[:, None], mask_word, img_word)
    object_vl = object_linguistic + model.visual_norm_object(obj_reps)
    vl = torch.cat([text_vl, object_vl, end_word[None]])
    text_end, objects = len(ids), len(obj_reps)
    types = torch.cat([batch["token_type_ids"][row][text_mask], torch.full((objects + 1,), 2)])
    positions = torch.cat(
        [torch.arange(text_end), torch.full((objects,), text_end), torch.tensor([text_end + 1])]
    )
    return vl, positions, types


def reference_embedding(model: VlbertModel, batch: dict[str, Tensor], row: int) -> Tensor:
    """``LayerNorm(vl_embeddings + position + token type)`` of one row (the reference's)."""
    emb = model.encoder.embeddings
    vl, positions, types = reference_inputs(model, batch, row)
    return emb.norm(vl + emb.position(positions) + emb.token_type(types))


def ours_in_reference_order(model: VlbertModel, batch: dict[str, Tensor], row: int) -> Tensor:
    with torch.no_grad():
        out = model(
            **{k: v for k, v in batch.items() if k != "input_ids"},
            input_ids=batch["input_ids"],
            output_hidden_states=True,
        )
    assert out.hidden_states is not None
    states = out.hidden_states[0][row]
    length = batch["input_ids"].shape[1]
    text = batch["attention_mask"][row].bool()
    regions = batch["visual_mask"][row].bool()
    visual = torch.cat([regions.any()[None], regions])  # no whole image in a text-only row
    slots = torch.cat([text, visual, torch.tensor([True])])
    assert slots.shape[0] == states.shape[0] == length + regions.shape[0] + 2
    return states[slots]


def test_embedding_matches_jackroos_vlbert_arithmetic() -> None:
    model, batch = tiny(), hand_made()
    for row in (0, 1):
        with torch.no_grad():
            expected = reference_embedding(model, batch, row)
        ours = ours_in_reference_order(model, batch, row)
        assert ours.shape == expected.shape
        torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_which_element_gets_which_visual_feature() -> None:
    """Text tokens see only the whole image; region j's feature reaches region j's slot
    and (through the pooled whole image) the text tokens and the whole-image slot."""
    model, batch = tiny(), hand_made()
    base = ours_in_reference_order(model, batch, 0)
    changed = {k: v.clone() for k, v in batch.items()}
    changed["visual_features"][0, 1] += 1.0
    after = ours_in_reference_order(model, changed, 0)
    moved = (after - base).abs().amax(-1) > 1e-6
    # row 0: 5 text slots, whole image, regions 0..2, [END]
    assert moved.tolist() == [True] * 5 + [True, False, True, False, False]
    # all text tokens share one visual feature: the same shift for every text slot
    # (before the LayerNorm: compare the pre-norm sums through the reference)
    with torch.no_grad():
        whole = model.visual_norm_text(
            model.visual_projection(batch["visual_features"][0].mean(0))
            + model.box_projection(torch.tensor(WHOLE_IMAGE_BOX))
        )
        words = model.encoder.embeddings.word(batch["input_ids"][0])
        expected_text = model.encoder.embeddings.norm(
            words
            + whole
            + model.encoder.embeddings.position(torch.arange(5))
            + model.encoder.embeddings.token_type(batch["token_type_ids"][0])
        )
    torch.testing.assert_close(base[:5], expected_text, atol=1e-5, rtol=1e-5)


def test_masked_rois_are_zeroed_in_the_input_and_take_the_masked_word() -> None:
    model = tiny()
    objective = MaskedRegionObjective(model, num_classes=4, mask_prob=0.5, zero_prob=1.0)
    g = torch.Generator().manual_seed(3)
    batch = {
        "input_ids": torch.randint(4, 20, (8, 6), generator=g),
        "visual_features": torch.randn(8, 5, D_V, generator=g) + 3.0,
        "visual_boxes": torch.rand(8, 5, 5, generator=g),
        "visual_mask": torch.ones(8, 5, dtype=torch.long),
    }
    corrupted = objective.collate(batch, torch.Generator().manual_seed(0))
    selected = corrupted["region_selected"]
    assert 0 < int(selected.sum()) < selected.numel()
    assert (corrupted["visual_features"][selected] == 0).all()
    assert (corrupted["visual_features"][~selected] != 0).all()
    _, _, zeroed = model.visual_elements(
        corrupted["visual_features"], corrupted["visual_boxes"], corrupted["visual_mask"]
    )
    assert torch.equal(zeroed[:, 1:], selected) and not zeroed[:, 0].any()
    # a masked RoI's original feature cannot leak into any element's input
    other = {**batch, "visual_features": batch["visual_features"] * 2.0}
    again = objective.collate(other, torch.Generator().manual_seed(0))
    inputs = {k: corrupted[k] for k in ("input_ids", "visual_boxes", "visual_mask")}
    with torch.no_grad():
        a = model(visual_features=corrupted["visual_features"], output_hidden_states=True, **inputs)
        b = model(visual_features=again["visual_features"], output_hidden_states=True, **inputs)
    assert a.hidden_states is not None and b.hidden_states is not None
    # the masked slots' inputs are identical whatever the masked RoIs' original features
    length = batch["input_ids"].shape[1] + 1  # text, then the whole-image element
    masked_slots = torch.zeros(a.hidden_states[0].shape[:2], dtype=torch.bool)
    masked_slots[:, length : length + 5] = selected
    torch.testing.assert_close(a.hidden_states[0][masked_slots], b.hidden_states[0][masked_slots])


def test_vlbert_rejects_wrong_features_and_missing_boxes() -> None:
    import pytest

    from ptm_multimodal.feature_spec import FeatureMismatchError

    model, batch = tiny(), hand_made()
    with pytest.raises(FeatureMismatchError, match="7-d"):
        model(batch["input_ids"], torch.zeros(2, 3, 7), visual_boxes=batch["visual_boxes"])
    with pytest.raises(ValueError, match="visual_boxes"):
        model(batch["input_ids"], batch["visual_features"])


def test_text_only_rows_are_fed_as_jackroos_vlbert_multitask_feeds_them() -> None:
    """A row without regions is a text-only row: its tokens carry the learned text-only
    vector (not a whole-image feature), and only its text and ``[END]`` are attended, so
    its states equal the reference's sequence of text then ``[END]`` alone."""
    model, batch = tiny(), hand_made()
    batch["visual_mask"][1] = 0
    batch["visual_features"][1] = 0.0
    for row in (0, 1):
        with torch.no_grad():
            expected = reference_embedding(model, batch, row)
        torch.testing.assert_close(
            ours_in_reference_order(model, batch, row), expected, atol=1e-5, rtol=1e-5
        )
    with torch.no_grad():
        vl, positions, types = reference_inputs(model, batch, 1)
        alone = model.encoder(
            inputs_embeds=vl[None], position_ids=positions[None], token_type_ids=types[None]
        ).last_hidden_state[0]
        full = model(**batch).last_hidden_state[1]
    length = batch["input_ids"].shape[1]
    slots = torch.cat([batch["attention_mask"][1].bool(), torch.zeros(5, dtype=torch.bool)])
    slots[length + 1 + 3] = True  # [END] after the whole image and 3 region slots
    torch.testing.assert_close(full[slots], alone, atol=1e-5, rtol=1e-5)
    # the image-text row is unchanged by its text-only neighbour
    with torch.no_grad():
        single = model(**{k: v[:1] for k, v in batch.items()}).last_hidden_state[0]
    torch.testing.assert_close(model(**batch).last_hidden_state[0].detach(), single)
    # a folder saved before text-only rows has no text-only vector
    assert tiny(text_only_rows=False).text_only_embedding is None
