"""TagLM's word-level input layer (Peters et al., 2017): static vectors, char CNN and frozen
LM embeddings, one vector per word.

:class:`WordFeatures` concatenates, for every word,

* a static word vector from a vector table (word2vec, GloVe, NNLM; frozen or fine-tuned),
* optional trainable character features (a small char CNN),
* frozen LM embeddings: a learned :class:`~ptm_core.modules.scalar_mix.ScalarMix` over the
  layers of ELMo's biLM (:class:`BiLMWordFeatures`, one vector per word) or of any ptm
  Transformer encoder (:class:`EncoderWordFeatures`, the vector of each word's first piece).

The tagger (:mod:`ptm_classic.finetune.taglm`) and the sentence classifier
(:mod:`ptm_classic.finetune.word_classifier`) read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.features.frozen import FrozenEncoderFeatures
from ptm_core.finetune.feature_based import first_piece_positions
from ptm_core.modules.scalar_mix import ScalarMix
from ptm_core.tokenization import WordPieceTokenizer

PAD_ID, UNK_ID = 0, 1
#: Rows of the char-CNN's character embedding (ELMo's shifted byte ids, 0 = padding).
NUM_CHARACTERS = 262
#: Files a vector table directory holds (``ptm_core.data.vector_table.VectorTable``).
TABLE_FILES = ("vectors.safetensors", "vocab.txt", "table.json")


def load_vector_table(path: str | Path) -> Any:
    """Load a static vector table, failing with the missing file and the fix.

    Args:
        path: A directory written by ``VectorTable.save`` (``vectors.safetensors``,
            ``vocab.txt``, ``table.json``).

    Returns:
        The ``ptm_core.data.vector_table.VectorTable``.

    Raises:
        FileNotFoundError: The directory or one of its files is missing.
    """
    path = Path(path)
    missing = [name for name in TABLE_FILES if not (path / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{path}: no vector table here (missing {', '.join(missing)}); train one with "
            "the static-embedding recipes (word2vec, GloVe, NNLM) or pass the directory "
            "their final/ holds"
        )
    from ptm_core.data.vector_table import VectorTable

    return VectorTable.load(path)


def run_bilstm(lstm: nn.LSTM, inputs: Tensor, word_mask: Tensor) -> Tensor:
    """Run a batch-first (Bi)LSTM over the real words only.

    Args:
        lstm: the LSTM (``batch_first=True``).
        inputs: ``(B, W, D)``.
        word_mask: ``(B, W)`` bool, True at real words.

    Returns:
        ``(B, W, H)`` outputs, 0 past each row's words.
    """
    lengths = word_mask.sum(1).clamp(min=1).cpu()
    packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
    hidden, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=inputs.shape[1])
    return hidden


class StaticWordEmbedding(nn.Module):
    """Word vectors from a static table (first-generation PTMs), frozen or fine-tuned.

    Row 0 is padding (zeros), row 1 the unknown word (the table's mean vector), row
    ``i + 2`` the table's row ``i``. A word is looked up as written, then lowercased.

    Args:
        vocab: the table's words, in row order.
        vectors: ``(V, D)`` float tensor.
        freeze: keep the vectors fixed (TagLM's and ELMo's setting); False fine-tunes them.

    Shapes:
        ``forward(word_ids (B, W)) -> (B, W, D)``.
    """

    def __init__(self, vocab: Sequence[str], vectors: Tensor, *, freeze: bool = True) -> None:
        super().__init__()
        if vectors.dim() != 2 or vectors.shape[0] != len(vocab):
            raise ValueError(
                f"the vector table has {len(vocab)} words but its vectors have shape "
                f"{tuple(vectors.shape)}; expected ({len(vocab)}, D): vocab.txt and "
                "vectors.safetensors must come from one save"
            )
        vectors = vectors.detach().float()
        unknown = vectors.mean(0, keepdim=True) if len(vocab) else vectors.new_zeros(1, 0)
        weight = torch.cat([vectors.new_zeros(1, vectors.shape[1]), unknown, vectors])
        self.embedding = nn.Embedding.from_pretrained(weight, freeze=freeze, padding_idx=PAD_ID)
        self.vocab = list(vocab)
        self.freeze = freeze
        self._rows = {word: i + 2 for i, word in enumerate(self.vocab)}

    @classmethod
    def from_table(cls, table: Any, *, freeze: bool = True) -> StaticWordEmbedding:
        """Build from a ``VectorTable`` (or a path to one, see :func:`load_vector_table`)."""
        if isinstance(table, (str, Path)):
            table = load_vector_table(table)
        return cls(table.vocab, table.vectors, freeze=freeze)

    @property
    def dim(self) -> int:
        return int(self.embedding.weight.shape[1])

    def row(self, word: str) -> int:
        """The embedding row of ``word`` (``UNK_ID`` when the table lacks it)."""
        found = self._rows.get(word)
        return found if found is not None else self._rows.get(word.lower(), UNK_ID)

    def ids(self, sentences: Sequence[Sequence[str]], width: int) -> Tensor:
        """``(B, width)`` row ids, ``PAD_ID`` past each sentence."""
        out = torch.full((len(sentences), width), PAD_ID, dtype=torch.long)
        for b, words in enumerate(sentences):
            if words:
                out[b, : len(words)] = torch.tensor([self.row(w) for w in words])
        return out

    def forward(self, word_ids: Tensor) -> Tensor:
        return self.embedding(word_ids)


class CharCNNFeatures(nn.Module):
    """Trainable character features (Ma & Hovy, 2016; TagLM's token representation).

    Byte ids (:func:`ptm_classic.recurrent.char_cnn.characters_to_ids`) -> embedding -> one
    convolution -> ReLU -> max over the characters.

    Args:
        dim: output width (number of filters).
        char_dim: character embedding width.
        width: convolution width (odd).

    Shapes:
        ``forward(char_ids (B, W, C)) -> (B, W, dim)``.
    """

    def __init__(self, dim: int = 32, *, char_dim: int = 16, width: int = 3) -> None:
        super().__init__()
        self.dim, self.char_dim, self.width = dim, char_dim, width
        self.embedding = nn.Embedding(NUM_CHARACTERS, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, dim, width, padding=width // 2)

    def forward(self, char_ids: Tensor) -> Tensor:
        batch, words, chars = char_ids.shape
        x = self.embedding(char_ids.reshape(-1, chars)).transpose(1, 2)  # (B*W, c, C)
        x = torch.relu(self.conv(x)).max(dim=2).values  # (B*W, dim)
        return x.view(batch, words, self.dim)


#: ``BiLMWordFeatures(normalize=...)`` choices.
NORMALIZE_MODES = (None, "layer", "mix")


def _layer_norm(states: Tensor, word_mask: Tensor) -> Tensor:
    """Each word's vector to zero mean and unit variance over its features; 0 at padding."""
    normed = nn.functional.layer_norm(states, states.shape[-1:])
    return normed * word_mask.unsqueeze(-1).to(normed.dtype)


class BiLMWordFeatures(nn.Module):
    """ELMo embeddings (Peters et al., 2018, Eq. 1): a scalar mix over a frozen biLM's layers.

    The biLM is frozen (``requires_grad=False``), always in eval mode and run without a
    graph; only the mix (``s``, ``gamma``) learns. It reads words, so its vectors are
    word-aligned already.

    Args:
        bilm: a ``ptm_classic.recurrent.bilm.BiLM`` (anything with ``layer_states(char_ids,
            mask) -> list[(B, L, D)]``).
        layers: which of its ``num_layers + 1`` states to mix (default all).
        max_characters: characters per word the biLM's char CNN reads.
        source: the ``final/`` directory it was loaded from (copied when the tagger is saved).
        normalize: ``"layer"`` (default) puts every layer state through a layer norm without
            parameters before the mix (allennlp's ``ScalarMix(do_layer_norm=True)``, here per
            word so that a word's vector does not depend on its batch); ``"mix"`` normalises
            the mixed vector instead; ``None`` mixes the raw states. A biLM's raw states are
            far larger than static vectors (tiny gain biLM: mean norm 48 / 17 / 22 for layers
            0 / 1 / 2 vs 2.1 for word2vec) and swamp a BiLSTM fed with both.

    Shapes:
        ``forward(char_ids (B, W, C), word_mask (B, W)) -> (B, W, D)``.
    """

    kind = "bilm"

    def __init__(
        self,
        bilm: nn.Module,
        *,
        layers: list[int] | None = None,
        max_characters: int = 50,
        source: str | Path | None = None,
        normalize: str | None = "layer",
    ) -> None:
        super().__init__()
        from ptm_classic.recurrent.char_cnn import characters_to_ids

        if normalize not in NORMALIZE_MODES:
            raise ValueError(
                f"BiLMWordFeatures: normalize must be one of {NORMALIZE_MODES}, got {normalize!r}"
            )
        self.normalize = normalize
        self.bilm = bilm
        for parameter in bilm.parameters():
            parameter.requires_grad_(False)
        bilm.eval()
        self.max_characters = max_characters
        self.source = str(source) if source is not None else None
        probe = characters_to_ids([["a"]], max_characters)
        with torch.no_grad():
            states = self._states(probe, torch.ones(1, 1, dtype=torch.bool))
        widths = sorted({int(s.shape[-1]) for s in states})
        if len(widths) != 1:
            raise ValueError(
                f"the biLM's layer_states have different widths {widths}; a scalar mix needs "
                "one width (ELMo duplicates the token layer to 2 * projection_dim)"
            )
        available = len(states)
        self.layers = list(range(available)) if layers is None else list(layers)
        bad = [i for i in self.layers if not -available <= i < available]
        if bad or not self.layers:
            raise ValueError(
                f"layers {bad or self.layers} are out of range: the biLM has {available} "
                f"layer states (0 = token layer .. {available - 1} = last LSTM layer)"
            )
        self.hidden_size = widths[0]
        self.mix = ScalarMix(len(self.layers))

    @classmethod
    def from_final(cls, path: str | Path, **kwargs: Any) -> BiLMWordFeatures:
        """Load a biLM ``final/`` (``ptm pretrain experiment=elmo_tiny``) with ``load_bilm``."""
        from ptm_classic.recurrent.bilm import load_bilm

        return cls(load_bilm(path), source=path, **kwargs)

    def _states(self, char_ids: Tensor, word_mask: Tensor) -> list[Tensor]:
        layer_states = getattr(self.bilm, "layer_states")  # noqa: B009 - duck-typed biLM
        return list(layer_states(char_ids, word_mask))

    def train(self, mode: bool = True) -> BiLMWordFeatures:
        super().train(mode)
        self.bilm.eval()  # frozen: never dropout
        return self

    def forward(self, char_ids: Tensor, word_mask: Tensor) -> Tensor:
        mask = word_mask.bool()
        with torch.no_grad():
            states = self._states(char_ids, mask)
            chosen = [states[i] for i in self.layers]
            if self.normalize == "layer":
                chosen = [_layer_norm(s, mask) for s in chosen]
        mixed = self.mix(chosen)  # (B, W, D)
        return _layer_norm(mixed, mask) if self.normalize == "mix" else mixed


class EncoderWordFeatures(nn.Module):
    """A frozen ptm Transformer's scalar-mixed layers, one vector per word (its first piece).

    Wraps :class:`~ptm_core.features.frozen.FrozenEncoderFeatures`. :meth:`encode` splits
    each word into pieces with the encoder's tokenizer (``[CLS] pieces [SEP]``) and marks
    each word's first piece; :meth:`forward` gathers those positions into ``(B, W, D)``.

    Args:
        encoder: a pre-trained encoder; frozen in place.
        tokenizer: its word-piece tokenizer.
        layers: which hidden states to mix (default all).
        source: the directory it was loaded from (informational).
    """

    kind = "encoder"

    def __init__(
        self,
        encoder: TransformerEncoder,
        tokenizer: WordPieceTokenizer,
        *,
        layers: list[int] | None = None,
        source: str | Path | None = None,
    ) -> None:
        super().__init__()
        self.frozen = FrozenEncoderFeatures(encoder, layers=layers)
        self.tokenizer = tokenizer
        self.layers = self.frozen.layers
        self.source = str(source) if source is not None else None

    @classmethod
    def from_final(cls, path: str | Path, **kwargs: Any) -> EncoderWordFeatures:
        """Load an encoder and its tokenizer from a ``final/`` (or Hugging Face BERT) folder."""
        encoder = TransformerEncoder.from_pretrained(path)
        return cls(encoder, WordPieceTokenizer.from_directory(path), source=path, **kwargs)

    @property
    def hidden_size(self) -> int:
        return self.frozen.hidden_size

    @property
    def encoder(self) -> TransformerEncoder:
        return self.frozen.encoder

    @property
    def mix(self) -> ScalarMix:
        """The learned scalar mix over the encoder's hidden states."""
        return self.frozen.mix

    def encode(self, sentences: Sequence[Sequence[str]]) -> dict[str, Tensor]:
        """Word pieces of each sentence: ``input_ids``, ``attention_mask``, ``first_piece_mask``
        (all ``(B, L)``)."""
        info = self.tokenizer.vocab_info
        flat = [w for words in sentences for w in words]
        pieces = self.tokenizer.tokenize_ids_batch(flat) if flat else []
        rows: list[list[int]] = []
        firsts: list[list[bool]] = []
        at = 0
        config = self.encoder.config
        limit = config.max_positions if config.position_encoding == "absolute" else None
        for b, words in enumerate(sentences):
            ids, first = [info.cls_id], [False]
            for word_pieces in pieces[at : at + len(words)]:
                word_pieces = word_pieces or [info.unk_id]
                ids += word_pieces
                first += [True] + [False] * (len(word_pieces) - 1)
            at += len(words)
            ids.append(info.sep_id)
            first.append(False)
            if limit is not None and len(ids) > limit:
                raise ValueError(
                    f"sentence {b} has {len(ids)} word pieces with [CLS]/[SEP], more than the "
                    f"encoder's max_positions={limit}; split long sentences before tagging"
                )
            rows.append(ids)
            firsts.append(first)
        length = max(len(r) for r in rows) if rows else 2
        input_ids = torch.full((len(rows), length), info.pad_id, dtype=torch.long)
        first_pieces = torch.zeros(len(rows), length, dtype=torch.bool)
        for b, (ids, first) in enumerate(zip(rows, firsts, strict=True)):
            input_ids[b, : len(ids)] = torch.tensor(ids)
            first_pieces[b, : len(ids)] = torch.tensor(first)
        attention = (
            torch.arange(length) < torch.tensor([len(r) for r in rows]).unsqueeze(1)
        ).long()
        return {
            "input_ids": input_ids,
            "attention_mask": attention,
            "first_piece_mask": first_pieces,
        }

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, first_piece_mask: Tensor, width: int
    ) -> Tensor:
        mixed = self.frozen(input_ids, attention_mask)  # (B, L, D)
        positions, word_mask = first_piece_positions(first_piece_mask)
        gathered = mixed.gather(1, positions.unsqueeze(-1).expand(-1, -1, mixed.shape[-1]))
        gathered = gathered * word_mask.unsqueeze(-1).to(gathered.dtype)
        if gathered.shape[1] < width:  # (B, W, D): rows of padding words only
            gathered = nn.functional.pad(gathered, (0, 0, 0, width - gathered.shape[1]))
        return gathered[:, :width]


LMFeatures = BiLMWordFeatures | EncoderWordFeatures


class WordFeatures(nn.Module):
    """TagLM's input layer: ``[static(w); chars(w); LM(w)]`` for every word.

    Args:
        static: word vectors (:class:`StaticWordEmbedding`) or ``None``.
        chars: trainable character features or ``None``.
        lm: frozen LM embeddings (:class:`BiLMWordFeatures` or
            :class:`EncoderWordFeatures`) or ``None``. At least one part is required.
        max_characters: characters per word of ``char_ids`` (the biLM's, when there is one).

    Shapes:
        ``encode(sentences)`` -> a batch of tensors (``word_mask (B, W)``, plus
        ``word_ids``, ``char_ids (B, W, C)``, the encoder's inputs as the parts need);
        ``forward(batch) -> (B, W, output_dim)``.
    """

    def __init__(
        self,
        *,
        static: StaticWordEmbedding | None = None,
        chars: CharCNNFeatures | None = None,
        lm: LMFeatures | None = None,
        max_characters: int | None = None,
    ) -> None:
        super().__init__()
        if static is None and chars is None and lm is None:
            raise ValueError("WordFeatures needs at least one of static, chars, lm")
        self.static, self.chars, self.lm = static, chars, lm
        if max_characters is None:
            max_characters = lm.max_characters if isinstance(lm, BiLMWordFeatures) else 20
        self.max_characters = max_characters

    @property
    def dims(self) -> dict[str, int]:
        """Width of each part present: ``{"static": D_s, "chars": D_c, "lm": D_lm}``."""
        dims = {}
        if self.static is not None:
            dims["static"] = self.static.dim
        if self.chars is not None:
            dims["chars"] = self.chars.dim
        if self.lm is not None:
            dims["lm"] = self.lm.hidden_size
        return dims

    @property
    def output_dim(self) -> int:
        return sum(self.dims.values())

    def encode(self, sentences: Sequence[Sequence[str]]) -> dict[str, Tensor]:
        """Tensors for ``sentences`` (lists of words): what :meth:`forward` reads."""
        width = max(1, max((len(s) for s in sentences), default=0))
        lengths = torch.tensor([len(s) for s in sentences])
        batch = {"word_mask": torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)}
        if self.static is not None:
            batch["word_ids"] = self.static.ids(sentences, width)
        if self.chars is not None or isinstance(self.lm, BiLMWordFeatures):
            from ptm_classic.recurrent.char_cnn import characters_to_ids

            chars: Tensor = characters_to_ids([list(s) for s in sentences], self.max_characters)
            if chars.shape[1] < width:
                chars = nn.functional.pad(chars, (0, 0, 0, width - chars.shape[1]))
            batch["char_ids"] = chars
        if isinstance(self.lm, EncoderWordFeatures):
            batch.update(self.lm.encode(sentences))
        return batch

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        word_mask = batch["word_mask"].bool()
        parts: dict[str, Tensor] = {}
        if self.static is not None:
            parts["static"] = self.static(batch["word_ids"])
        if self.chars is not None:
            parts["chars"] = self.chars(batch["char_ids"])
        if isinstance(self.lm, BiLMWordFeatures):
            parts["lm"] = self.lm(batch["char_ids"], word_mask)
        elif isinstance(self.lm, EncoderWordFeatures):
            parts["lm"] = self.lm(
                batch["input_ids"],
                batch["attention_mask"],
                batch["first_piece_mask"],
                word_mask.shape[1],
            )
        expected = self.dims
        for name, value in parts.items():
            if value.shape[:2] != word_mask.shape or value.shape[-1] != expected[name]:
                raise ValueError(
                    f"WordFeatures: the {name} part gave shape {tuple(value.shape)}, expected "
                    f"({word_mask.shape[0]}, {word_mask.shape[1]}, {expected[name]}): its "
                    "words or width do not match the batch's word_mask"
                )
        return torch.cat(list(parts.values()), dim=-1)  # (B, W, sum of dims)

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings (what ``taglm_io`` records)."""
        lm: dict[str, Any] | None = None
        if self.lm is not None:
            lm = {
                "kind": self.lm.kind,
                "layers": list(self.lm.layers),
                "hidden_size": self.lm.hidden_size,
            }
            if isinstance(self.lm, BiLMWordFeatures):
                lm["normalize"] = self.lm.normalize
        return {
            "static": None
            if self.static is None
            else {
                "dim": self.static.dim,
                "freeze": self.static.freeze,
                "words": len(self.static.vocab),
            },
            "chars": None
            if self.chars is None
            else {
                "dim": self.chars.dim,
                "char_dim": self.chars.char_dim,
                "width": self.chars.width,
            },
            "lm": lm,
            "max_characters": self.max_characters,
        }

    def frozen_prefix(self) -> str | None:
        """State-dict prefix of the frozen LM weights (not saved with the task model)."""
        if isinstance(self.lm, BiLMWordFeatures):
            return "features.lm.bilm."
        if isinstance(self.lm, EncoderWordFeatures):
            return "features.lm.frozen.encoder."
        return None
