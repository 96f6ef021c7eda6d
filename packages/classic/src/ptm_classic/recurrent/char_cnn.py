"""ELMo's character encoder: byte ids -> char CNN -> highway -> projection.

Peters et al. (2018), "Deep contextualized word representations", Sec. 3.1 and the
``bilm-tf`` options: every word is read as the UTF-8 bytes of its string (so any word,
seen in training or not, gets a vector), wrapped in begin/end-of-word markers, embedded
(16 dims per character), convolved with filters of widths 1..7, max-pooled over the
characters, passed through highway layers and projected to the LSTM's input size.

The byte ids follow ``allennlp``'s ``ELMoCharacterMapper``: bytes 0..255, then
beginning/end of sentence 256/257, beginning/end of word 258/259 and in-word padding 260,
all shifted by one so that 0 marks a padding *word*.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

MAX_CHARACTERS = 50
BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
#: Rows of the character embedding: the 261 shifted ids above plus the padding id 0.
NUM_CHARACTERS = 262


def _word_ids(byte_ids: Sequence[int], max_characters: int) -> list[int]:
    kept = list(byte_ids[: max_characters - 2])
    ids = [BOW_CHAR, *kept, EOW_CHAR]
    ids += [PAD_CHAR] * (max_characters - len(ids))
    return [i + 1 for i in ids]


def word_to_ids(word: str, max_characters: int = MAX_CHARACTERS) -> list[int]:
    """Shifted byte ids of one word: ``[BOW, bytes..., EOW, PAD...]`` + 1, length
    ``max_characters`` (a longer word keeps its first ``max_characters - 2`` bytes)."""
    return _word_ids(word.encode("utf-8"), max_characters)


def boundary_ids(max_characters: int = MAX_CHARACTERS) -> tuple[list[int], list[int]]:
    """Ids of the sentence markers ``<S>`` and ``</S>`` (a word whose one character is
    the begin/end-of-sentence symbol)."""
    return _word_ids([BOS_CHAR], max_characters), _word_ids([EOS_CHAR], max_characters)


def characters_to_ids(
    sentences: list[list[str]], max_characters: int = MAX_CHARACTERS
) -> torch.LongTensor:
    """Character ids of a batch of tokenised sentences, right-padded with 0-words.

    Args:
        sentences: ``B`` sentences, each a list of words (any strings).
        max_characters: characters per word, markers included (ELMo: 50).

    Returns:
        ``(B, L, max_characters)`` with ``L`` the longest sentence; a padding word is all 0.
    """
    if max_characters < 3:
        raise ValueError(
            f"max_characters must be >= 3 (two markers + one byte), got {max_characters}"
        )
    length = max((len(s) for s in sentences), default=0)
    out = torch.zeros(len(sentences), length, max_characters, dtype=torch.long)
    cache: dict[str, list[int]] = {}
    for b, sentence in enumerate(sentences):
        for t, word in enumerate(sentence):
            ids = cache.get(word)
            if ids is None:
                ids = cache[word] = word_to_ids(word, max_characters)
            out[b, t] = torch.tensor(ids)
    return out  # type: ignore[return-value]


class Highway(nn.Module):
    """Highway layers (Srivastava et al., 2015): ``y = g * x + (1 - g) * relu(W_h x)`` with
    ``g = sigmoid(W_g x)``; the gate bias starts at 1 so the layer starts near identity.

    Args:
        dim: input and output size.
        num_layers: stacked highway layers.

    Shapes:
        ``(..., dim)`` -> ``(..., dim)``.
    """

    def __init__(self, dim: int, num_layers: int) -> None:
        super().__init__()
        self.dim = dim
        linears = [nn.Linear(dim, 2 * dim) for _ in range(num_layers)]
        for layer in linears:
            nn.init.zeros_(layer.bias)
            with torch.no_grad():
                layer.bias[dim:] = 1.0
        self.layers = nn.ModuleList(linears)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            transform, gate = layer(x).split(self.dim, dim=-1)
            g = torch.sigmoid(gate)
            x = g * x + (1.0 - g) * torch.relu(transform)
        return x


class CharacterCNN(nn.Module):
    """ELMo's context-independent token representation from characters.

    Paper: Peters et al. (2018), Sec. 3.1 (after Kim et al., 2016, "Character-aware neural
    language models"); the original model uses ``filters = [[1, 32], [2, 32], [3, 64],
    [4, 128], [5, 256], [6, 512], [7, 1024]]`` (2048 in all), 2 highway layers and a
    projection to 512.

    Args:
        filters: ``[width, count]`` pairs of the 1-d convolutions over characters.
        num_highway: highway layers after the max-pool.
        output_dim: size of the projection (the LSTM projection size).
        char_embedding_dim: character embedding size (ELMo: 16).
        activation: ``"relu"`` (ELMo's released models) or ``"tanh"`` after the max-pool.

    Shapes:
        ``char_ids (B, L, C)`` (from :func:`characters_to_ids`) -> ``(B, L, output_dim)``.
    """

    def __init__(
        self,
        filters: Sequence[Sequence[int]],
        num_highway: int,
        output_dim: int,
        *,
        char_embedding_dim: int = 16,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        if not filters:
            raise ValueError("filters must hold at least one [width, count] pair")
        self.activation = activation
        self.char_embedding = nn.Embedding(NUM_CHARACTERS, char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(char_embedding_dim, int(count), kernel_size=int(width))
            for width, count in filters
        )
        self.num_filters = sum(int(count) for _, count in filters)
        self.highway = Highway(self.num_filters, num_highway)
        self.projection = nn.Linear(self.num_filters, output_dim)
        self.output_dim = output_dim

    def forward(self, char_ids: Tensor) -> Tensor:
        batch, length, chars = char_ids.shape
        x = self.char_embedding(char_ids.reshape(batch * length, chars)).transpose(1, 2)
        pooled = []
        for conv in self.convolutions:
            h = conv(x).max(dim=-1).values  # (B*L, count)
            pooled.append(torch.relu(h) if self.activation == "relu" else torch.tanh(h))
        token = self.projection(self.highway(torch.cat(pooled, dim=-1)))
        return token.view(batch, length, self.output_dim)


__all__ = [
    "MAX_CHARACTERS",
    "NUM_CHARACTERS",
    "CharacterCNN",
    "Highway",
    "boundary_ids",
    "characters_to_ids",
    "word_to_ids",
]
