"""CoVe's downstream input (McCann et al., 2017, Eq. 3): ``w~ = [GloVe(w); CoVe(w)]``.

:class:`CoVeWordFeatures` is a :class:`~ptm_classic.finetune.word_features.WordFeatures`,
so ptm's word-level classifier and tagger (:class:`~ptm_classic.finetune.word_classifier.
WordClassifier`, :class:`~ptm_classic.finetune.taglm.TagLMTagger`) read it unchanged. The
GloVe rows and the MT-LSTM are frozen: no gradient reaches them, and the MT-LSTM runs in
eval mode (no dropout) whatever the task model's mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ptm_classic.cove.mt_lstm import MTLSTM
from ptm_classic.finetune.word_features import StaticWordEmbedding, WordFeatures

#: ``inputs`` choices: the paper's concatenation, CoVe alone, GloVe alone (the baseline).
INPUTS = ("glove+cove", "cove", "glove")
#: ``layers`` choices: which MT-LSTM outputs are CoVe (``both`` = ``[layer0; layer1]``).
LAYERS = {"layer1": (False, True), "layer0": (True, False), "both": (True, True)}


class CoVeWordFeatures(WordFeatures):
    """``[GloVe(w); CoVe(w)]`` for every word, from a frozen GloVe table and MT-LSTM.

    Args:
        glove: the GloVe rows the MT-LSTM was trained on (frozen here).
        mtlstm: the trained MT-LSTM (frozen here).
        inputs: ``glove+cove`` (default), ``cove`` or ``glove`` (the table alone).
        layers: ``layer1`` (default, the paper's CoVe), ``layer0`` or ``both``.

    Shapes:
        ``encode(sentences)`` -> ``word_ids (B, W)``, ``word_mask (B, W)``;
        ``forward(batch) -> (B, W, output_dim)``, GloVe's ``D`` columns first.
    """

    def __init__(
        self,
        glove: StaticWordEmbedding,
        mtlstm: MTLSTM,
        *,
        inputs: str = "glove+cove",
        layers: str = "layer1",
    ) -> None:
        if inputs not in INPUTS:
            raise ValueError(f"cove.inputs must be one of {', '.join(INPUTS)}, got {inputs!r}")
        if layers not in LAYERS:
            raise ValueError(f"cove.layers must be one of {', '.join(LAYERS)}, got {layers!r}")
        if glove.dim != mtlstm.input_size:
            raise ValueError(
                f"the GloVe table is {glove.dim}-d, the MT-LSTM reads {mtlstm.input_size}-d "
                "vectors: give the table it was trained on (<cove final/>/glove)"
            )
        # WordFeatures' parts are a static table, char CNN and an LM that reads characters or
        # word pieces; CoVe's LM reads the static table's rows, so the parts are set here.
        nn.Module.__init__(self)
        self.static, self.chars, self.lm = glove, None, None
        self.max_characters = 20
        self.mtlstm = mtlstm
        for parameter in (*glove.parameters(), *mtlstm.parameters()):
            parameter.requires_grad_(False)
        glove.freeze = True
        mtlstm.eval()
        self.inputs, self.layers = inputs, layers

    @property
    def dims(self) -> dict[str, int]:
        """Width of each part, in order: ``{"glove": D, "cove": 2H or 4H}``."""
        dims: dict[str, int] = {}
        if self.inputs != "cove":
            dims["glove"] = self.static.dim if self.static is not None else 0
        if self.inputs != "glove":
            dims["cove"] = self.mtlstm.output_size * sum(LAYERS[self.layers])
        return dims

    def train(self, mode: bool = True) -> CoVeWordFeatures:
        super().train(mode)
        self.mtlstm.eval()  # frozen: never dropout
        return self

    def encode(self, sentences: Sequence[Sequence[str]]) -> dict[str, Tensor]:
        """``word_ids`` (GloVe rows) and ``word_mask`` of ``sentences`` (lists of words)."""
        assert self.static is not None
        width = max(1, max((len(s) for s in sentences), default=0))
        lengths = torch.tensor([len(s) for s in sentences])
        return {
            "word_mask": torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1),
            "word_ids": self.static.ids(sentences, width),
        }

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        assert self.static is not None
        mask = batch["word_mask"].bool()
        with torch.no_grad():
            glove = self.static(batch["word_ids"])  # (B, W, D)
            parts = [glove] if self.inputs != "cove" else []
            if self.inputs != "glove":
                layer0, layer1 = LAYERS[self.layers]
                cove = self.mtlstm.cove(glove, mask, layer0=layer0, layer1=layer1)
                parts.append(cove * mask.unsqueeze(-1).to(cove.dtype))  # (B, W, 2H or 4H)
        return torch.cat(parts, -1)

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings (``taglm.json``'s ``features``)."""
        assert self.static is not None
        return {
            "static": {"dim": self.static.dim, "freeze": True, "words": len(self.static.vocab)},
            "chars": None,
            "lm": None,
            "max_characters": self.max_characters,
            "cove": {
                "inputs": self.inputs,
                "layers": self.layers,
                "input_size": self.mtlstm.input_size,
                "hidden_size": self.mtlstm.hidden_size,
                "dims": self.dims,
            },
        }

    def frozen_prefix(self) -> str | None:
        # The MT-LSTM is small (the paper's: 2.9M parameters) and is saved with the task
        # model, so a fine-tuned folder loads without the pre-training run.
        return None


__all__ = ["INPUTS", "LAYERS", "CoVeWordFeatures"]
