"""LXMERT's pre-training heads (Tan & Bansal, 2019, §3.1); heads never compute a loss."""

from __future__ import annotations

from collections.abc import Mapping

import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.modules.dropout import Dropout
from ptm_core.modules.feed_forward import get_activation


def init_linear(linear: nn.Linear, std: float = 0.02) -> None:
    """BERT initialisation of one linear layer: ``N(0, std)`` weights, zero bias."""
    nn.init.normal_(linear.weight, std=std)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


class LxmertPredictionTransform(nn.Module):
    """``LN(act(W x))``, the transform before LXMERT's token and object decoders.

    Shapes:
        ``(..., D) -> (..., D)``.
    """

    def __init__(
        self, hidden_size: int, activation: str = "gelu", layer_norm_eps: float = 1e-12
    ) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = get_activation(activation)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        init_linear(self.dense)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.norm(self.activation(self.dense(hidden)))


class LxmertLMHead(nn.Module):
    """Masked cross-modality LM head: transform, then the word table (tied) plus a bias.

    Args:
        hidden_size: model width ``D``.
        word_embeddings: the language encoder's word table (its weight is the decoder's).
        activation: transform activation.
        layer_norm_eps: LayerNorm epsilon.

    Shapes:
        ``(..., D) -> (..., V)``.
    """

    def __init__(
        self,
        hidden_size: int,
        word_embeddings: nn.Embedding,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.transform = LxmertPredictionTransform(hidden_size, activation, layer_norm_eps)
        vocab_size = word_embeddings.num_embeddings
        self.decoder = nn.Linear(hidden_size, vocab_size)
        self.decoder.weight = word_embeddings.weight  # tied, as in BERT and LXMERT
        nn.init.zeros_(self.decoder.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.transform(hidden))


class LxmertObjectHead(nn.Module):
    """Masked object prediction head: one transform shared by several decoders.

    Decoders by name (those of Hugging Face's ``LxmertVisualObjHead``): ``obj`` detected
    label logits, ``attr`` attribute logits, ``feat`` RoI-feature regression.

    Args:
        hidden_size: model width ``D``.
        outputs: decoder name -> output width (e.g. ``{"obj": 1600, "feat": 2048}``).
        activation: transform activation.
        layer_norm_eps: LayerNorm epsilon.

    Shapes:
        ``(..., D) -> {name: (..., outputs[name])}``.
    """

    def __init__(
        self,
        hidden_size: int,
        outputs: Mapping[str, int],
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        if not outputs:
            raise ValueError("LxmertObjectHead needs at least one decoder (obj, attr or feat)")
        self.transform = LxmertPredictionTransform(hidden_size, activation, layer_norm_eps)
        decoders = {k: nn.Linear(hidden_size, n) for k, n in outputs.items()}
        for decoder in decoders.values():
            init_linear(decoder)
        self.decoders = nn.ModuleDict(decoders)

    def forward(self, hidden: Tensor) -> dict[str, Tensor]:
        hidden = self.transform(hidden)
        return {name: decoder(hidden) for name, decoder in self.decoders.items()}


class LxmertAnswerHead(nn.Module):
    """Image QA head on the pooled state: ``W_2 LN(gelu(W_1 p))`` with a ``2D`` hidden width.

    The pre-training QA head and, as in LXMERT's VQA/GQA fine-tuning (its ``logit_fc``;
    transformers' ``LxmertVisualAnswerHead``), the task head of a fine-tuned LXMERT.

    Args:
        hidden_size: model width ``D``.
        num_answers: answer vocabulary size.
        layer_norm_eps: LayerNorm epsilon.
        dropout: dropout on the pooled state (0: LXMERT's head, which has none).

    Shapes:
        ``(B, D) -> (B, num_answers)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_answers: int,
        layer_norm_eps: float = 1e-12,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.dense = nn.Linear(hidden_size, 2 * hidden_size)
        self.norm = nn.LayerNorm(2 * hidden_size, eps=layer_norm_eps)
        self.out = nn.Linear(2 * hidden_size, num_answers)
        init_linear(self.dense)
        init_linear(self.out)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.out(self.norm(F.gelu(self.dense(self.dropout(pooled)))))
