"""CoVe's translation model: frozen GloVe -> MT-LSTM -> attentional decoder, and its
``final/`` folder.

Layout of ``final/`` (written atomically)::

    config.json          {"ptm_model": "cove", "ptm_format": "ptm-cove/1", **CoVeConfig,
                          "source_lang", "target_langs"}
    model.safetensors    the MT-LSTM (``encoder.*``) and the decoder (``decoder.*``)
    target_vocab.txt     the decoder's words, in id order
    glove/               the GloVe table the MT-LSTM reads (a ``VectorTable``), frozen
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_classic.cove.decoder import AttentionalDecoder
from ptm_classic.cove.mt_lstm import MTLSTM
from ptm_classic.cove.pairs import IGNORE
from ptm_classic.finetune.word_features import StaticWordEmbedding
from ptm_classic.kinds import COVE
from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, read_json_object
from ptm_core.data.vector_table import VectorTable
from ptm_core.model_kinds import with_kind

FORMAT = "ptm-cove/1"
CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE, GLOVE_DIR = (
    "config.json",
    "model.safetensors",
    "target_vocab.txt",
    "glove",
)


@dataclass
class CoVeConfig:
    """Sizes of CoVe's translation model (``configs/model/cove_tiny.yaml``).

    Args:
        input_size: GloVe width (set from the table).
        target_vocab_size: decoder words (set from the data).
        hidden_size: MT-LSTM units per direction (paper: 300); the decoder has ``2H``.
        target_embedding_dim: decoder word embedding width (paper: 300).
        dropout: between the MT-LSTM layers and in the decoder (paper: 0.2).
    """

    input_size: int = 300
    target_vocab_size: int = 0
    hidden_size: int = 300
    target_embedding_dim: int = 300
    dropout: float = 0.2

    def __post_init__(self) -> None:
        for name in ("input_size", "target_vocab_size", "hidden_size", "target_embedding_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"CoVeConfig.{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"CoVeConfig.dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict[str, Any]:
        """The fields (a checkpoint's ``config.json`` records them)."""
        return dataclasses.asdict(self)


@dataclass
class TranslationOutput:
    """The translation loss (what the trainer's objective reads).

    Attributes:
        loss: 0-d mean cross-entropy per target word (``</s>`` included).
        logits: ``(B, T, V)``.
        attention: ``(B, T, S)``.
        metrics: ``nll`` and ``accuracy`` (next-word, teacher-forced), detached.
    """

    loss: Tensor
    logits: Tensor
    attention: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class CoVeTranslation(nn.Module):
    """CoVe's machine-translation model (McCann et al., 2017, Section 3).

    ``GloVe(w)`` (frozen) -> :class:`~ptm_classic.cove.mt_lstm.MTLSTM` -> the
    :class:`~ptm_classic.cove.decoder.AttentionalDecoder`, started from the MT-LSTM's final
    states (directions concatenated) and attending over its second layer.

    Args:
        config: the sizes.
        glove: the frozen GloVe rows the encoder reads (its width is ``input_size``).

    Shapes:
        ``forward(source_ids (B, S), source_mask (B, S), target_ids (B, T), target_labels
        (B, T)) -> TranslationOutput``.
    """

    def __init__(self, config: CoVeConfig, glove: StaticWordEmbedding) -> None:
        super().__init__()
        if glove.dim != config.input_size:
            raise ValueError(
                f"the GloVe table is {glove.dim}-d but CoVeConfig.input_size is "
                f"{config.input_size}; build the config with input_size=<table dim>"
            )
        glove.embedding.weight.requires_grad_(False)
        self.config, self.glove = config, glove
        self.encoder = MTLSTM(config.input_size, config.hidden_size, config.dropout)
        self.decoder = AttentionalDecoder(
            config.target_vocab_size,
            config.target_embedding_dim,
            self.encoder.output_size,
            num_layers=2,
            dropout=config.dropout,
        )

    def forward(
        self, source_ids: Tensor, source_mask: Tensor, target_ids: Tensor, target_labels: Tensor
    ) -> TranslationOutput:
        mask = source_mask.bool()
        encoded = self.encoder(self.glove(source_ids), mask)
        out = self.decoder(target_ids, encoded.layer1, mask, encoded.final_h, encoded.final_c)
        flat = out.logits.reshape(-1, out.logits.shape[-1])
        loss = nn.functional.cross_entropy(flat, target_labels.reshape(-1), ignore_index=IGNORE)
        kept = target_labels != IGNORE
        correct = (out.logits.argmax(-1) == target_labels) & kept
        accuracy = correct.sum() / kept.sum().clamp(min=1)
        metrics = {"nll": loss.detach(), "accuracy": accuracy.detach().float()}
        return TranslationOutput(loss, out.logits, out.attention, metrics)


def save_cove(
    model: CoVeTranslation,
    directory: str | Path,
    vocabulary: Sequence[str],
    *,
    languages: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` as a CoVe ``final/`` (see the module docstring), atomically.

    Args:
        model: the translation model.
        directory: the folder (replaced as a whole).
        vocabulary: the target words in id order.
        languages: ``{"source_lang": ..., "target_langs": [...]}`` for ``config.json``.
    """
    if len(vocabulary) != model.config.target_vocab_size:
        raise ValueError(
            f"vocabulary has {len(vocabulary)} words, the decoder {model.config.target_vocab_size}"
        )
    config = with_kind(
        {"ptm_format": FORMAT, **dataclasses.asdict(model.config), **(languages or {})}, COVE
    )
    state = {
        k: v.detach().contiguous().cpu()
        for k, v in model.state_dict().items()
        if not k.startswith("glove.")
    }
    # The frozen rows, less padding and unknown, are the table the model was built from.
    table = VectorTable(
        list(model.glove.vocab), model.glove.embedding.weight[2:].detach().cpu(), "glove"
    )
    with atomic_directory(directory) as tmp:
        save_file(state, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        (tmp / VOCAB_FILE).write_text("".join(f"{w}\n" for w in vocabulary), encoding="utf-8")
        table.save(tmp / GLOVE_DIR)
    return Path(directory)


def load_cove(directory: str | Path, **options: Any) -> CoVeTranslation:
    """Load a CoVe ``final/`` (``ptm pretrain experiment=cove_tiny``), in eval mode; its
    ``config.json`` rides along as ``model.record`` and its target words as
    ``model.vocabulary``.

    Raises:
        CheckpointError: a missing folder or file, another format, or weights that do not
            fit the config; the message names the file and the fix.
    """
    path = Path(directory)
    hint = "give the final/ folder of `ptm pretrain experiment=cove_tiny`"
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a directory; {hint}")
    raw = read_json_object(path / CONFIG_FILE, hint)
    if raw.get("ptm_format") != FORMAT:
        raise CheckpointError(
            f"{path / CONFIG_FILE}: ptm_format is {raw.get('ptm_format')!r}, not {FORMAT!r}; {hint}"
        )
    fields = {f.name for f in dataclasses.fields(CoVeConfig)}
    try:
        config = CoVeConfig(**{k: v for k, v in raw.items() if k in fields})
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path / CONFIG_FILE}: {exc}") from None
    glove = StaticWordEmbedding.from_table(path / GLOVE_DIR, freeze=True)
    try:
        model = CoVeTranslation(config, glove)
    except ValueError as exc:
        raise CheckpointError(f"{path / GLOVE_DIR}: {exc}") from None
    weights = path / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"{weights}: missing; copy the whole final/ folder of the run")
    state = load_file(str(weights))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith("glove.")]
    if missing or unexpected:
        raise CheckpointError(
            f"{weights}: does not fit {path / CONFIG_FILE} (missing {missing[:4]}, unexpected "
            f"{unexpected[:4]}); copy both files from one run"
        )
    vocab_path = path / VOCAB_FILE
    if not vocab_path.is_file():
        raise CheckpointError(f"{vocab_path}: missing; copy the whole final/ folder of the run")
    model.__dict__["vocabulary"] = vocab_path.read_text(encoding="utf-8").split("\n")[:-1]
    model.__dict__["record"] = raw
    return model.eval()


def save_cove_folder(model: CoVeTranslation, path: str | Path, **options: Any) -> Path:
    """The family's ``save`` hook: write a model :func:`load_cove` read (or give
    ``vocabulary=``) back whole."""
    vocabulary = options.get("vocabulary", getattr(model, "vocabulary", None))
    if vocabulary is None:
        raise ValueError(
            "save_cove_folder: give vocabulary= (the decoder's words in id order); only a "
            "model read by load_cove carries its own"
        )
    record = getattr(model, "record", {})
    languages = {k: record[k] for k in ("source_lang", "target_langs") if k in record}
    return save_cove(model, path, vocabulary, languages=languages)


__all__ = [
    "CoVeConfig",
    "CoVeTranslation",
    "TranslationOutput",
    "load_cove",
    "save_cove",
    "save_cove_folder",
]
