"""Replaced token detection (ELECTRA): a small MLM generator and a per-token discriminator."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.heads.token_discriminator import TokenDiscriminatorHead
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.objectives.mlm import mask_tokens
from ptm_core.tokenization import VocabInfo


def generator_heads(num_heads: int, generator_hidden: int, size_ratio: float) -> int:
    """The generator's attention heads: the discriminator's ``num_heads`` scaled by
    ``size_ratio``, lowered until they divide ``generator_hidden``. Export reads the width
    back from the weights and uses ``generator_hidden / hidden_size`` as the ratio: the
    same heads whenever ``hidden_size * size_ratio`` is a whole number."""
    heads = max(1, round(num_heads * size_ratio))
    while generator_hidden % heads:
        heads -= 1
    return heads


def electra_generator(
    discriminator: TransformerEncoder,
    *,
    size_ratio: float = 0.25,
    num_layers: int | None = None,
) -> TransformerEncoder:
    """ELECTRA's generator (Clark et al., 2020): a narrower encoder on the same embeddings.

    Width ``D_g = size_ratio * D`` (the paper finds 1/4 to 1/2 best), heads scaled alike,
    FFN ``4 D_g``, same depth unless ``num_layers`` is given. The embedding module (token,
    position and segment tables and their LayerNorm) *is* the discriminator's: both models
    read and train one set of tables. Its width is ``E``, so the generator gets its own
    ``E -> D_g`` projection whenever ``E != D_g`` (factorised embeddings, as ELECTRA).

    Args:
        discriminator: the encoder being pre-trained.
        size_ratio: generator width as a fraction of the discriminator's.
        num_layers: generator depth (default: the discriminator's).

    Returns:
        The generator encoder (its ``embeddings`` attribute is shared).
    """
    if not 0.0 < size_ratio <= 1.0:
        raise ValueError(f"size_ratio must be in (0, 1], got {size_ratio}")
    config = discriminator.config
    hidden = max(1, round(config.hidden_size * size_ratio))
    heads = generator_heads(config.num_heads, hidden, size_ratio)
    generator_config = dataclasses.replace(
        config,
        hidden_size=hidden,
        num_heads=heads,
        intermediate_size=4 * hidden,
        num_layers=num_layers or config.num_layers,
        embedding_size=config.embedding_width,
        share_layers="none",
    )
    generator = TransformerEncoder(generator_config)
    generator.embeddings = discriminator.embeddings  # shared tables, trained by both losses
    return generator


def sample_replacements(
    logits: Tensor, original: Tensor, *, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Draw each masked token from the generator's distribution, without gradient.

    Args:
        logits: ``(N, V)`` generator logits at the masked positions.
        original: ``(N,)`` the true tokens there.
        temperature: softmax temperature of the sampling distribution.

    Returns:
        ``(sampled, replaced)``: ``(N,)`` sampled ids and a bool ``(N,)`` that is True only
        where the sample differs from the original (a sample equal to the original counts
        as original, as in the paper).
    """
    with torch.no_grad():
        probs = torch.softmax(logits.detach().float() / temperature, dim=-1)
        sampled = torch.multinomial(probs, 1).squeeze(1) if len(probs) else original.clone()
    return sampled, sampled != original


class ReplacedTokenDetectionObjective(Objective):
    """ELECTRA's replaced token detection (Clark et al., 2020).

    Data side (:meth:`collate`): ``mask_prob`` of the non-special tokens are selected;
    ``mask_token_prob`` of those become ``[MASK]`` (ELECTRA: 85%, the rest keep their token).
    Model side (:meth:`rewrite_inputs`, before the discriminator pass): the generator
    (:func:`electra_generator`, trained with MLM on the selected positions) fills every
    selected position with a token *sampled* from its output distribution; sampling is
    outside the graph, so the discriminator loss sends no gradient into the generator. A
    token is labelled replaced only when the sample differs from the original. Loss side:
    :class:`TokenDiscriminatorHead` on every real token, binary cross-entropy, and

        ``loss = generator_weight * L_MLM(generator) + discriminator_weight * L_RTD``

    (``1`` and ``50`` in the paper). Only the discriminator is the pre-trained encoder;
    the generator lives in this objective and is not part of the saved encoder.

    Args:
        encoder: the discriminator.
        vocab: the tokenizer's special ids and vocabulary size.
        generator_size_ratio: generator width / discriminator width.
        generator_layers: generator depth (default: the discriminator's).
        mask_prob: fraction of non-special tokens selected.
        mask_token_prob: fraction of the selected tokens shown as ``[MASK]``.
        random_token_prob: fraction shown as a random token (ELECTRA: 0).
        generator_weight: weight of the generator's MLM loss.
        discriminator_weight: weight of the replaced-token-detection loss.
        temperature: sampling temperature.

    Batch keys: reads ``input_ids``, ``special_tokens_mask``, ``attention_mask``; writes
    ``electra_labels`` (original ids at selected positions, -100 elsewhere),
    ``original_ids``, then ``rtd_labels`` ``(B, L)`` (1 = replaced) and the generator's
    loss.
    """

    name = "electra"
    batch_keys = ("electra_labels", "original_ids")

    def __init__(
        self,
        encoder: TransformerEncoder,
        vocab: VocabInfo,
        *,
        generator_size_ratio: float = 0.25,
        generator_layers: int | None = None,
        mask_prob: float = 0.15,
        mask_token_prob: float = 0.85,
        random_token_prob: float = 0.0,
        generator_weight: float = 1.0,
        discriminator_weight: float = 50.0,
        temperature: float = 1.0,
    ) -> None:
        super().__init__()
        if vocab.vocab_size != encoder.config.vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{encoder.config.vocab_size}; build the encoder with the tokenizer's size"
            )
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.vocab = vocab
        self.mask_prob = mask_prob
        self.mask_token_prob = mask_token_prob
        self.random_token_prob = random_token_prob
        self.generator_weight = generator_weight
        self.discriminator_weight = discriminator_weight
        self.temperature = temperature
        self.generator = electra_generator(
            encoder, size_ratio=generator_size_ratio, num_layers=generator_layers
        )
        self.generator_head = MaskedLMHead(
            self.generator.config.hidden_size,
            encoder.config.vocab_size,
            activation="gelu",
            layer_norm_eps=encoder.config.layer_norm_eps,
            tie_to=encoder.word_embeddings,
        )
        self.discriminator_head = TokenDiscriminatorHead(
            encoder.config.hidden_size, activation=encoder.config.activation
        )

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        ids, labels = mask_tokens(
            batch["input_ids"],
            batch["special_tokens_mask"],
            self.vocab,
            generator,
            mask_prob=self.mask_prob,
            mask_token_prob=self.mask_token_prob,
            random_token_prob=self.random_token_prob,
        )
        return {
            **batch,
            "input_ids": ids,
            "electra_labels": labels,
            "original_ids": batch["input_ids"],
        }

    def rewrite_inputs(self, batch: Batch) -> Batch:
        """Run the generator, sample replacements and build the discriminator's input."""
        labels = batch["electra_labels"]
        selected = labels != IGNORE_INDEX  # (B, L)
        hidden = self.generator(
            input_ids=batch["input_ids"],
            attention_mask=batch.get("attention_mask"),
            token_type_ids=batch.get("token_type_ids"),
        ).last_hidden_state  # (B, L, D_g)
        logits = self.generator_head(hidden[selected])  # (N, V)
        targets = labels[selected]
        generator_loss = (
            F.cross_entropy(logits.float(), targets) if len(targets) else logits.sum() * 0.0
        )
        sampled, _ = sample_replacements(logits, targets, temperature=self.temperature)
        original = batch["original_ids"]
        corrupted = original.clone()
        corrupted[selected] = sampled
        real = batch.get("attention_mask", torch.ones_like(original)).bool()
        return {
            **batch,
            "input_ids": corrupted,
            "rtd_labels": ((corrupted != original) & real).long(),
            "electra_generator_loss": generator_loss,
            "electra_generator_accuracy": accuracy(logits, targets),
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        if "rtd_labels" not in batch:
            raise RuntimeError(
                "ReplacedTokenDetectionObjective.forward needs the generator's replacements; "
                "train it inside ptm_core.models.PretrainingModel, which calls "
                "rewrite_inputs(batch) before the discriminator pass"
            )
        logits = self.discriminator_head(encoder_output.last_hidden_state)  # (B, L)
        real = batch.get("attention_mask", torch.ones_like(batch["rtd_labels"])).bool()
        targets = batch["rtd_labels"][real].float()
        discriminator_loss = F.binary_cross_entropy_with_logits(logits[real].float(), targets)
        generator_loss = batch["electra_generator_loss"]
        loss = (
            self.generator_weight * generator_loss + self.discriminator_weight * discriminator_loss
        )
        predicted = logits[real] > 0
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "generator_loss": generator_loss.detach(),
                "discriminator_loss": discriminator_loss.detach(),
                "generator_accuracy": batch["electra_generator_accuracy"],
                "discriminator_accuracy": (predicted == targets.bool()).float().mean().detach(),
                "replaced_fraction": targets.mean().detach(),
            },
        )
