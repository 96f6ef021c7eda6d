"""LXMERT's five pre-training tasks as objectives (Tan & Bansal, 2019, §3.1).

* masked cross-modality LM (:class:`LxmertMaskedLMObjective`, ``lm``);
* masked object prediction by RoI-feature regression and by detected-label
  classification (:class:`LxmertObjectPredictionObjective`, ``obj``);
* cross-modality matching (:class:`LxmertMatchingObjective`, ``itm``; negatives are
  swapped sentences, made by :class:`~ptm_multimodal.data.ImageTextBatches`);
* image question answering (:class:`LxmertImageQAObjective`, ``qa``).

Masking follows the reference code (``random_word`` / ``random_feat``): every word and
every object is chosen independently with probability 0.15; of the chosen words 80%
become ``[MASK]``, 10% a random token and 10% stay; of the chosen objects 80% get a zero
feature, 10% the feature of another region and 10% stay. As in the reference code (and
unlike ViLBERT), the LM and object losses also count on swapped-sentence rows; QA counts
only on matched rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.objectives import IGNORE_INDEX, Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch, accuracy
from ptm_core.objectives.mlm import apply_replacements
from ptm_core.tokenization import VocabInfo
from ptm_multimodal.lxmert import LxmertOutput
from ptm_multimodal.lxmert_heads import LxmertAnswerHead, LxmertLMHead, LxmertObjectHead

# Hugging Face's visual_loss_normalizer: the object losses are averaged over every region,
# then multiplied by ~1/0.15 so that they are on the scale of a mean over masked regions.
VISUAL_LOSS_NORMALIZER = 6.67


def _zero(reference: Tensor) -> Tensor:
    """An exact 0 that keeps ``reference``'s graph (never NaN)."""
    return reference.sum() * 0.0


def mask_words(
    input_ids: Tensor,
    candidates: Tensor,
    vocab: VocabInfo,
    generator: torch.Generator,
    *,
    mask_prob: float = 0.15,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """LXMERT's word masking (``random_word`` of the reference code).

    Each candidate word is chosen independently with probability ``mask_prob`` (so a
    sentence may have none); chosen words follow BERT's 80/10/10 rule and are predicted.

    Args:
        input_ids: ``(B, L)`` (not modified).
        candidates: ``(B, L)`` bool, True where a word may be chosen (not special, not
            padding).
        vocab: special ids and vocabulary size.
        generator: the seeded source of randomness.
        mask_prob: selection rate.
        mask_token_prob: fraction of the chosen that become ``[MASK]``.
        random_token_prob: fraction of the chosen that become a random regular token.

    Returns:
        ``(corrupted ids, labels)``, both ``(B, L)``; labels are ``IGNORE_INDEX`` where
        not chosen.
    """
    selected = candidates.bool() & (torch.rand(input_ids.shape, generator=generator) < mask_prob)
    corrupted = apply_replacements(
        input_ids,
        selected,
        vocab,
        generator,
        mask_token_prob=mask_token_prob,
        random_token_prob=random_token_prob,
    )
    return corrupted, input_ids.masked_fill(~selected, IGNORE_INDEX)


def mask_objects(
    features: Tensor,
    region_mask: Tensor,
    generator: torch.Generator,
    *,
    mask_prob: float = 0.15,
    zero_prob: float = 0.8,
    random_prob: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """LXMERT's object masking (``random_feat`` of the reference code).

    Each real region is chosen independently with probability ``mask_prob``; of the
    chosen, ``zero_prob`` get a zero feature, ``random_prob`` the feature of a real region
    drawn uniformly from the batch (the reference draws from the dataset) and the rest
    keep theirs. Every chosen region is predicted.

    Args:
        features: ``(B, R, D)`` (not modified).
        region_mask: ``(B, R)`` bool, True at real regions (padding is never chosen).
        generator: the seeded source of randomness.
        mask_prob: selection rate.
        zero_prob: fraction of the chosen zeroed.
        random_prob: fraction of the chosen replaced by another region's feature.

    Returns:
        ``(corrupted features (B, R, D), chosen (B, R) bool)``.
    """
    real = region_mask.bool()
    selected = real & (torch.rand(real.shape, generator=generator) < mask_prob)
    draw = torch.rand(real.shape, generator=generator)
    zeroed = selected & (draw < zero_prob)
    swapped = selected & (draw >= zero_prob) & (draw < zero_prob + random_prob)
    corrupted = features.masked_fill(zeroed[..., None], 0.0)
    pool = features[real]  # (N, D) every real region of the batch
    if len(pool) and bool(swapped.any()):
        picks = pool[torch.randint(len(pool), real.shape, generator=generator)]  # (B, R, D)
        corrupted = torch.where(swapped[..., None], picks, corrupted)
    return corrupted, selected


class LxmertMaskedLMObjective(Objective):
    """Masked cross-modality LM (Tan & Bansal, 2019, §3.1.1): words masked by
    :func:`mask_words` are predicted from the cross-modality language output.

    Args:
        hidden_size: width of the language states the head reads.
        tie_to: the word table the decoder is tied to.
        activation, layer_norm_eps: the head transform's (the language encoder's).
        vocab: special ids and vocabulary size.
        mask_prob: word selection rate (0.15).
        mask_token_prob: chosen words that become ``[MASK]`` (0.8).
        random_token_prob: chosen words that become a random token (0.1).

    Batch keys: reads ``input_ids``, ``attention_mask``, ``special_tokens_mask``; writes
    ``input_ids`` (corrupted) and ``lxmert_lm_labels`` ``(B, L)``.
    """

    name = "lm"
    batch_keys = ("lxmert_lm_labels",)

    def __init__(
        self,
        vocab: VocabInfo | None = None,
        *,
        hidden_size: int,
        tie_to: nn.Embedding,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        mask_prob: float = 0.15,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
    ) -> None:
        super().__init__()
        self.vocab = vocab
        self.mask_prob = mask_prob
        self.mask_token_prob = mask_token_prob
        self.random_token_prob = random_token_prob
        self.head = LxmertLMHead(hidden_size, tie_to, activation, layer_norm_eps)

    def candidates(self, batch: Batch) -> Tensor:
        """``(B, L)`` bool: real, non-special words (a cloze ``[MASK]`` is special)."""
        ids = batch["input_ids"]
        keep = ~batch["special_tokens_mask"].bool()
        if "attention_mask" in batch:
            keep &= batch["attention_mask"].bool()
        if self.vocab is not None:
            keep &= ~torch.isin(ids, torch.tensor(self.vocab.special_ids))
        return keep

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if self.vocab is None:
            raise ValueError("LxmertMaskedLMObjective needs vocab= for its data side")
        ids, labels = mask_words(
            batch["input_ids"],
            self.candidates(batch),
            self.vocab,
            generator,
            mask_prob=self.mask_prob,
            mask_token_prob=self.mask_token_prob,
            random_token_prob=self.random_token_prob,
        )
        return {**batch, "input_ids": ids, "lxmert_lm_labels": labels}

    def logits(self, encoder_output: LxmertOutput) -> Tensor:
        """``(B, L, V)`` token logits."""
        return self.head(encoder_output.last_hidden_state)

    def forward(self, encoder_output: LxmertOutput, batch: Batch) -> ObjectiveOutput:  # type: ignore[override]
        labels = batch["lxmert_lm_labels"]
        chosen = labels != IGNORE_INDEX
        states = encoder_output.last_hidden_state[chosen]  # (N, D)
        if states.shape[0] == 0:
            return ObjectiveOutput(loss=_zero(self.head(encoder_output.last_hidden_state[:, :1])))
        logits = self.head(states).float()
        return ObjectiveOutput(
            loss=F.cross_entropy(logits, labels[chosen]),
            metrics={"accuracy": accuracy(logits, labels[chosen])},
        )


class LxmertObjectPredictionObjective(Objective):
    """Masked object prediction (Tan & Bansal, 2019, §3.1.2): objects masked by
    :func:`mask_objects` are predicted from the cross-modality vision output by
    RoI-feature regression (smooth-L1 to the original feature, ``feat``) and detected-label
    classification (cross-entropy to the detector's arg-max class weighted by its
    confidence, ``obj``); an attribute decoder (``attr``) is kept for Hugging Face
    checkpoints that have one (synthetic and ptm region features carry no attributes).

    Each loss is ``mean over real regions(loss_r * chosen_r) * 6.67`` (Hugging Face's
    ``visual_loss_normalizer``); the objective's loss is their sum.

    Args:
        encoder: the :class:`~ptm_multimodal.lxmert.LxmertModel` (widths, feature spec).
        activation, layer_norm_eps: the head transform's (the language encoder's).
        vocab: unused (uniform objective factory signature).
        num_classes: detector classes (default: the feature spec's; ``None`` = no ``obj``).
        num_attributes: attribute classes (``None`` = no ``attr`` decoder).
        feature_regression: whether to regress the RoI features (``feat``).
        mask_prob: object selection rate (0.15).
        zero_prob: chosen objects zeroed (0.8).
        random_prob: chosen objects given another region's feature (0.1).

    Batch keys: reads ``visual_features``, ``visual_mask``, optional ``visual_classes``
    ``(B, R, C)`` (detector distributions); writes ``visual_features`` (corrupted),
    ``object_selected`` and ``object_target_features``.
    """

    name = "obj"
    batch_keys = ("object_selected", "object_target_features")

    def __init__(
        self,
        encoder,
        vocab: VocabInfo | None = None,
        *,
        num_classes: int | None = None,
        num_attributes: int | None = None,
        feature_regression: bool = True,
        mask_prob: float = 0.15,
        zero_prob: float = 0.8,
        random_prob: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        if num_classes is None:
            spec = getattr(encoder, "feature_spec", None)
            num_classes = None if spec is None else spec.num_classes
        outputs: dict[str, int] = {}
        if num_classes:
            outputs["obj"] = num_classes
        if num_attributes:
            outputs["attr"] = num_attributes
        if feature_regression:
            outputs["feat"] = encoder.feature_size
        if not outputs:
            raise ValueError(
                "LxmertObjectPredictionObjective has nothing to predict: set "
                "feature_regression=true or give num_classes (features without classes)"
            )
        self.mask_prob = mask_prob
        self.zero_prob = zero_prob
        self.random_prob = random_prob
        self.head = LxmertObjectHead(encoder.hidden_size, outputs, activation, layer_norm_eps)

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        corrupted, selected = mask_objects(
            batch["visual_features"],
            batch["visual_mask"],
            generator,
            mask_prob=self.mask_prob,
            zero_prob=self.zero_prob,
            random_prob=self.random_prob,
        )
        return {
            **batch,
            "visual_features": corrupted,
            "object_selected": selected,
            "object_target_features": batch["visual_features"],
        }

    def logits(self, encoder_output: LxmertOutput) -> dict[str, Tensor]:
        """``{name: (B, R, n)}`` for the decoders ``obj``/``attr``/``feat``."""
        return self.head(encoder_output.vision_hidden_state)

    def forward(self, encoder_output: LxmertOutput, batch: Batch) -> ObjectiveOutput:  # type: ignore[override]
        vision = encoder_output.vision_hidden_state  # (B, R, D)
        assert vision is not None
        real = batch["visual_mask"].bool()
        chosen = batch["object_selected"].bool() & real
        states = vision[real]  # (N, D) every real region
        weight = chosen[real].to(vision.dtype)  # (N,)
        outputs = self.head(states)
        denominator = max(int(real.sum()), 1)
        metrics: dict[str, Tensor] = {"regions": chosen.sum().detach().float()}
        total = _zero(states)
        if "feat" in outputs:
            target = batch["object_target_features"][real].float()
            per_region = F.smooth_l1_loss(outputs["feat"].float(), target, reduction="none")
            loss = (per_region.mean(-1) * weight).sum() / denominator * VISUAL_LOSS_NORMALIZER
            metrics["feat_loss"] = loss.detach()
            total = total + loss
        if "obj" in outputs and "visual_classes" in batch:
            probs = batch["visual_classes"][real].float()  # (N, C)
            confidence, label = probs.max(dim=-1)
            per_region = F.cross_entropy(outputs["obj"].float(), label, reduction="none")
            loss = (per_region * weight * confidence).sum() / denominator * VISUAL_LOSS_NORMALIZER
            metrics["label_loss"] = loss.detach()
            picked = chosen[real]
            metrics["label_accuracy"] = accuracy(outputs["obj"][picked], label[picked])
            total = total + loss
        return ObjectiveOutput(loss=total, metrics=metrics)


class LxmertMatchingObjective(Objective):
    """Cross-modality matching (Tan & Bansal, 2019, §3.1.3): a linear classifier on the
    pooled language ``[CLS]`` says whether the sentence describes the image.

    Label convention (as LXMERT and Hugging Face): ``match_label`` 1 = matched, 0 = the
    sentence was swapped for another image's (by
    :class:`~ptm_multimodal.data.ImageTextBatches`, ``negative_prob`` 0.5 as the paper).

    Args:
        hidden_size: width of the pooled state.
        vocab: unused (uniform objective factory signature).

    Batch keys: reads ``match_label`` ``(B,)``.
    """

    name = "itm"
    batch_keys = ("match_label",)

    def __init__(self, vocab: VocabInfo | None = None, *, hidden_size: int) -> None:
        super().__init__()
        self.classifier = nn.Linear(hidden_size, 2)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def logits(self, encoder_output: LxmertOutput) -> Tensor:
        """``(B, 2)`` logits; column 1 = match."""
        return self.classifier(encoder_output.pooled_output)

    def forward(self, encoder_output: LxmertOutput, batch: Batch) -> ObjectiveOutput:  # type: ignore[override]
        logits = self.logits(encoder_output)
        labels = batch["match_label"]
        return ObjectiveOutput(
            loss=F.cross_entropy(logits.float(), labels),
            metrics={"accuracy": accuracy(logits, labels)},
        )


class LxmertImageQAObjective(Objective):
    """Image question answering (Tan & Bansal, 2019, §3.1.3): an answer classifier
    (:class:`~ptm_multimodal.lxmert_heads.LxmertAnswerHead`) on the pooled ``[CLS]``.

    Rows that carry ``qa_label`` (an answer index, ``IGNORE_INDEX`` for none) are used as
    they are. Caption data has no questions, so the data side makes cloze questions: on a
    matched row, with probability ``question_prob``, one caption word that is an answer
    (``answer_token_ids``) is replaced by ``[MASK]`` and its answer index is the label
    ("a [MASK] circle left of a blue square" -> ``red``); the answer is in the image only.
    Put this objective before ``lm`` in the mix so that word masking leaves the cloze
    ``[MASK]`` alone. Swapped-sentence rows never count (as in LXMERT).

    Args:
        hidden_size, vocab_size: width of the pooled state; answers default to every id.
        layer_norm_eps: the head's LayerNorm epsilon.
        vocab: special ids (the ``[MASK]`` id) and vocabulary size.
        answer_token_ids: token ids of the answers (answer ``k`` = ``answer_token_ids[k]``);
            ``None`` with ``num_answers=None``: every token id is an answer.
        num_answers: answer vocabulary size when the answers are not tokens (a Hugging
            Face checkpoint's ``num_qa_labels``); no cloze questions are made then.
        question_prob: fraction of matched rows turned into cloze questions.

    Batch keys: reads ``input_ids``, ``match_label``, optional ``qa_label``; writes
    ``input_ids`` (with the cloze ``[MASK]``) and ``qa_label`` ``(B,)``.
    """

    name = "qa"
    batch_keys = ("qa_label",)

    def __init__(
        self,
        vocab: VocabInfo | None = None,
        *,
        hidden_size: int,
        vocab_size: int,
        layer_norm_eps: float = 1e-12,
        answer_token_ids: Sequence[int] | None = None,
        num_answers: int | None = None,
        question_prob: float = 0.5,
    ) -> None:
        super().__init__()
        if answer_token_ids is None and num_answers is None:
            answer_token_ids = list(range(vocab_size))
        self.answer_token_ids = None if answer_token_ids is None else list(answer_token_ids)
        if self.answer_token_ids is not None:
            if len(set(self.answer_token_ids)) != len(self.answer_token_ids):
                raise ValueError("answer_token_ids has repeated ids; give each answer once")
            num_answers = len(self.answer_token_ids)
        assert num_answers is not None
        self.num_answers = num_answers
        self.vocab = vocab
        self.question_prob = question_prob
        self.head = LxmertAnswerHead(hidden_size, num_answers, layer_norm_eps)

    def checkpoint_settings(self) -> dict[str, Any]:
        """What ``config.json`` keeps beside the class: the answers' token ids (unless every
        token id is an answer), so a fine-tune maps its answers onto this head's rows."""
        ids = self.answer_token_ids
        if ids is None or ids == list(range(len(ids))):
            return {}
        return {"answer_token_ids": list(ids)}

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        ids = batch["input_ids"]
        rows = ids.shape[0]
        if "qa_label" in batch or self.answer_token_ids is None:
            labels = batch.get("qa_label", torch.full((rows,), IGNORE_INDEX))
            return {**batch, "qa_label": labels}
        if self.vocab is None:
            raise ValueError("LxmertImageQAObjective needs vocab= for its cloze questions")
        answer_of = torch.full((max(int(ids.max()) + 1, max(self.answer_token_ids) + 1),), -1)
        answer_of[torch.tensor(self.answer_token_ids)] = torch.arange(self.num_answers)
        answer_of[list(self.vocab.special_ids)] = -1
        answers = answer_of[ids]  # (B, L) answer index or -1
        if "attention_mask" in batch:
            answers = answers.masked_fill(~batch["attention_mask"].bool(), -1)
        ask = torch.rand(rows, generator=generator) < self.question_prob
        if "match_label" in batch:
            ask &= batch["match_label"].bool()
        ask &= (answers >= 0).any(dim=1)
        # one answer word per asked row, uniformly among its answer words
        scores = torch.rand(ids.shape, generator=generator).masked_fill(answers < 0, -1.0)
        position = scores.argmax(dim=1)  # (B,)
        row = torch.arange(rows)
        labels = torch.where(ask, answers[row, position], torch.full_like(position, IGNORE_INDEX))
        ids = ids.clone()
        ids[row[ask], position[ask]] = self.vocab.mask_id
        return {**batch, "input_ids": ids, "qa_label": labels}

    def logits(self, encoder_output: LxmertOutput) -> Tensor:
        """``(B, num_answers)`` answer logits."""
        return self.head(encoder_output.pooled_output)

    def forward(self, encoder_output: LxmertOutput, batch: Batch) -> ObjectiveOutput:  # type: ignore[override]
        labels = batch["qa_label"]
        if "match_label" in batch:
            labels = labels.masked_fill(batch["match_label"] == 0, IGNORE_INDEX)
        asked = labels != IGNORE_INDEX
        logits = self.logits(encoder_output).float()
        count = asked.sum().detach().float()
        if not bool(asked.any()):
            return ObjectiveOutput(loss=_zero(logits), metrics={"questions": count})
        return ObjectiveOutput(
            loss=F.cross_entropy(logits[asked], labels[asked]),
            metrics={"accuracy": accuracy(logits[asked], labels[asked]), "questions": count},
        )
