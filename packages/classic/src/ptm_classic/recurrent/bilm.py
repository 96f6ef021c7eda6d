"""ELMo's bidirectional language model (biLM) and its ``final/`` checkpoint.

Peters et al. (2018), "Deep contextualized word representations", Sec. 3.1 and 3.4: a
character CNN gives a context-independent token representation ``x_k``; a forward LM
(stacked LSTMP layers left to right) and a backward LM (the same, right to left) read it,
and both predict words through one shared softmax. The training loss is the mean of the
two directions' negative log-likelihoods:

.. math::
    \\mathcal{L} = \\tfrac12 \\big( -\\textstyle\\sum_k \\log p(t_k \\mid t_1..t_{k-1})
    - \\sum_k \\log p(t_k \\mid t_{k+1}..t_N) \\big)

Every sentence is wrapped in ``<S>`` ... ``</S>`` inside the model (as ``allennlp``'s
``_ElmoBiLm`` does), so callers pass the words alone and get one state per word.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from unittest.mock import patch

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_classic.kinds import ELMO
from ptm_classic.recurrent.char_cnn import MAX_CHARACTERS, CharacterCNN, boundary_ids
from ptm_classic.recurrent.lstmp import LstmpStack, reverse_padded
from ptm_classic.recurrent.softmax import SOFTMAX_KINDS, WordSoftmax
from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, read_json_object
from ptm_core.model_kinds import with_kind

BILM_FORMAT = "ptm-bilm/1"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
#: Output-vocabulary ids of the special words (the rest follow by decreasing frequency).
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIAL_WORDS = ("<unk>", "<s>", "</s>")
IGNORE = -100
ORIGINAL_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


@dataclass
class BiLMConfig:
    """Sizes and switches of a :class:`BiLM`; the fields are the Hydra config keys.

    Args:
        vocab_size: output words (specials included); set by the recipe from the corpus.
        filters: char-CNN ``[width, count]`` pairs (ELMo: 2048 filters, widths 1..7).
        num_highway: highway layers (ELMo: 2).
        char_embedding_dim: character embedding size (ELMo: 16).
        max_characters: characters per word, markers included (ELMo: 50).
        activation: char-CNN non-linearity after the max-pool (``"relu"`` or ``"tanh"``).
        num_layers: LSTMP layers per direction (ELMo: 2).
        cell_size: LSTM memory cell size (ELMo: 4096).
        projection_dim: LSTM projection and token representation size (ELMo: 512).
        cell_clip: cell clipping (ELMo: 3; ``None`` keeps the cuDNN fast path).
        proj_clip: projection clipping (ELMo: 3).
        dropout: dropout on the LSTM inputs and on the softmax input (ELMo: 0.1).
        softmax: ``"full"``, ``"sampled"`` or ``"adaptive"``.
        num_samples: sampled-softmax candidates per batch (ELMo: 8192).
        adaptive_cutoffs: adaptive-softmax cluster boundaries.
    """

    vocab_size: int = 0
    filters: list[list[int]] = field(default_factory=lambda: [list(f) for f in ORIGINAL_FILTERS])
    num_highway: int = 2
    char_embedding_dim: int = 16
    max_characters: int = MAX_CHARACTERS
    activation: str = "relu"
    num_layers: int = 2
    cell_size: int = 4096
    projection_dim: int = 512
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    dropout: float = 0.1
    softmax: str = "sampled"
    num_samples: int = 8192
    adaptive_cutoffs: list[int] = field(default_factory=lambda: [20000, 200000])

    def __post_init__(self) -> None:
        self.filters = [[int(w), int(c)] for w, c in self.filters]
        self.adaptive_cutoffs = [int(c) for c in self.adaptive_cutoffs]
        if self.softmax not in SOFTMAX_KINDS:
            raise ValueError(
                f"BiLMConfig.softmax must be one of {', '.join(SOFTMAX_KINDS)}, got {self.softmax!r}"
            )
        for name in ("num_layers", "cell_size", "projection_dim", "char_embedding_dim"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"BiLMConfig.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.max_characters < 3:
            raise ValueError(f"BiLMConfig.max_characters must be >= 3, got {self.max_characters}")
        if any(w < 1 or w > self.max_characters or c < 1 for w, c in self.filters):
            raise ValueError(
                f"BiLMConfig.filters: every [width, count] needs 1 <= width <= max_characters "
                f"and count >= 1, got {self.filters}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The fields (a checkpoint's ``config.json`` records them)."""
        return dataclasses.asdict(self)


@dataclass
class BiLMLoss:
    """The biLM's training output (what the trainer reads: ``loss`` and ``metrics``).

    Attributes:
        loss: ``(forward_nll + backward_nll) / 2``, 0-d.
        forward_nll: mean NLL per predicted token of the forward LM.
        backward_nll: the same for the backward LM.
        exact: whether the NLLs are exact (False under the sampled softmax in training).
        num_predictions: tokens predicted per direction.
    """

    loss: Tensor
    forward_nll: Tensor
    backward_nll: Tensor
    exact: bool
    num_predictions: int

    @property
    def metrics(self) -> dict[str, Tensor]:
        out = {"forward_nll": self.forward_nll.detach(), "backward_nll": self.backward_nll.detach()}
        if self.exact:
            out["perplexity"] = torch.exp(self.loss.detach())
        return out


class BiLM(nn.Module):
    """ELMo's biLM: shared char-CNN tokens, forward and backward LSTMP stacks, shared softmax.

    Args:
        config: :class:`BiLMConfig` (``vocab_size`` set).

    Shapes:
        ``char_ids (B, L, C)`` from :func:`~ptm_classic.recurrent.char_cnn.characters_to_ids`,
        ``mask (B, L)`` bool (True at real words, right-padded).
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        if config.vocab_size < len(SPECIAL_WORDS) + 1:
            raise ValueError(
                f"BiLMConfig.vocab_size must be > {len(SPECIAL_WORDS)} (specials + words), "
                f"got {config.vocab_size}"
            )
        self.config = config
        self.token_encoder = CharacterCNN(
            config.filters,
            config.num_highway,
            config.projection_dim,
            char_embedding_dim=config.char_embedding_dim,
            activation=config.activation,
        )
        stack = dict(
            num_layers=config.num_layers,
            projection_dim=config.projection_dim,
            cell_size=config.cell_size,
            cell_clip=config.cell_clip,
            proj_clip=config.proj_clip,
            dropout=config.dropout,
        )
        self.forward_lm = LstmpStack(**stack)  # type: ignore[arg-type]
        self.backward_lm = LstmpStack(**stack)  # type: ignore[arg-type]
        self.softmax = WordSoftmax(
            config.projection_dim,
            config.vocab_size,
            kind=config.softmax,
            num_samples=config.num_samples,
            cutoffs=config.adaptive_cutoffs,
        )
        self.dropout = nn.Dropout(config.dropout)
        bos, eos = boundary_ids(config.max_characters)
        self.register_buffer("bos_chars", torch.tensor(bos), persistent=False)
        self.register_buffer("eos_chars", torch.tensor(eos), persistent=False)

    @property
    def num_layers(self) -> int:
        """Layers :meth:`layer_states` returns: the token layer plus one per LSTM layer."""
        return self.config.num_layers + 1

    @property
    def output_dim(self) -> int:
        """Size of every layer state: ``2 * projection_dim``."""
        return 2 * self.config.projection_dim

    def num_parameters(self, *, include_softmax: bool = False) -> int:
        """Parameters of the char CNN and both LSTM stacks (and the softmax if asked)."""
        parts: list[nn.Module] = [self.token_encoder, self.forward_lm, self.backward_lm]
        if include_softmax:
            parts.append(self.softmax)
        return sum(p.numel() for part in parts for p in part.parameters())

    def _with_boundaries(self, char_ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """``<S> words </S>`` per row: ``(B, L + 2, C)`` ids and ``(B, L + 2)`` mask."""
        batch, length, chars = char_ids.shape
        if chars != self.config.max_characters:
            raise ValueError(
                f"char_ids has {chars} characters per word but the biLM was built for "
                f"max_characters={self.config.max_characters}; call characters_to_ids with "
                f"max_characters={self.config.max_characters}"
            )
        mask = mask.bool()
        lengths = mask.sum(dim=1)
        out = char_ids.new_zeros(batch, length + 2, chars)
        out[:, 1 : length + 1] = char_ids * mask.unsqueeze(-1)
        out[:, 0] = cast(Tensor, self.bos_chars)
        out[torch.arange(batch, device=out.device), lengths + 1] = cast(Tensor, self.eos_chars)
        steps = torch.arange(length + 2, device=mask.device).unsqueeze(0)
        return out, steps < (lengths + 2).unsqueeze(1)

    def encode(
        self, char_ids: Tensor, mask: Tensor
    ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor]:
        """Run both LMs over ``<S> words </S>``.

        Returns:
            ``(tokens (B, L+2, P), forward outputs, backward outputs, mask (B, L+2))``; the
            outputs are one ``(B, L+2, P)`` tensor per layer, zero at padding.
        """
        chars, full_mask = self._with_boundaries(char_ids, mask)
        # The char CNN reads real words only (padding is about half of a batch's words).
        real = self.token_encoder(chars[full_mask].unsqueeze(0))[0]  # (N, P)
        tokens = real.new_zeros(*full_mask.shape, real.shape[-1])
        tokens = tokens.masked_scatter(full_mask.unsqueeze(-1), real)
        keep = full_mask.unsqueeze(-1).to(tokens.dtype)
        lengths = full_mask.sum(dim=1)
        forward = [h * keep for h in self.forward_lm(tokens)]
        backward = [
            reverse_padded(h, lengths) * keep
            for h in self.backward_lm(reverse_padded(tokens, lengths))
        ]
        return tokens, forward, backward, full_mask

    def layer_states(self, char_ids: Tensor, mask: Tensor) -> list[Tensor]:
        """ELMo's layer representations of each word (sentence markers removed).

        Args:
            char_ids: ``(B, L, C)``.
            mask: ``(B, L)`` bool, True at real words.

        Returns:
            ``num_layers + 1`` tensors ``(B, L, 2 * projection_dim)``: layer 0 is the token
            representation duplicated for both directions, layer ``j`` is
            ``[forward_j; backward_j]``; zero at padding.
        """
        tokens, forward, backward, _ = self.encode(char_ids, mask)
        length = char_ids.shape[1]
        keep = mask.bool().unsqueeze(-1).to(tokens.dtype)
        states = [torch.cat([tokens, tokens], dim=-1)]
        states += [torch.cat([f, b], dim=-1) for f, b in zip(forward, backward, strict=True)]
        return [s[:, 1 : length + 1] * keep for s in states]

    def forward(self, char_ids: Tensor, mask: Tensor) -> list[Tensor]:
        """Same as :meth:`layer_states`."""
        return self.layer_states(char_ids, mask)

    def lm_loss(self, char_ids: Tensor, mask: Tensor, word_targets: Tensor) -> BiLMLoss:
        """Both LMs' NLL of the sentence, ``</S>`` included (forward) and ``<S>`` (backward).

        Args:
            char_ids: ``(B, L, C)``.
            mask: ``(B, L)`` bool.
            word_targets: ``(B, L)`` output-vocabulary ids of the words (``<unk>`` = 0 for
                words outside it; anything at padding).

        Returns:
            :class:`BiLMLoss`.
        """
        _, forward, backward, full_mask = self.encode(char_ids, mask)
        batch, length = mask.shape
        mask = mask.bool()
        lengths = mask.sum(dim=1)
        rows = torch.arange(batch, device=mask.device)
        sequence = torch.full((batch, length + 3), IGNORE, dtype=torch.long, device=mask.device)
        sequence[:, 0] = BOS_ID
        sequence[:, 1 : length + 1] = torch.where(mask, word_targets.long(), IGNORE)
        sequence[rows, lengths + 1] = EOS_ID
        forward_targets = sequence[:, 1 : length + 3]  # position t predicts t + 1
        backward_targets = torch.cat(
            [torch.full_like(sequence[:, :1], IGNORE), sequence[:, : length + 1]], dim=1
        )
        backward_targets = torch.where(full_mask, backward_targets, IGNORE)
        nlls = []
        for top, targets in ((forward[-1], forward_targets), (backward[-1], backward_targets)):
            picked = targets != IGNORE
            nlls.append(self.softmax(self.dropout(top[picked]), targets[picked]).mean())
        return BiLMLoss(
            loss=(nlls[0] + nlls[1]) / 2,
            forward_nll=nlls[0],
            backward_nll=nlls[1],
            exact=self.softmax.exact,
            num_predictions=int((forward_targets != IGNORE).sum()),
        )


class BiLMTraining(nn.Module):
    """The biLM as the runner pre-trains it: the batch's keys in, :class:`BiLMLoss` out.

    The network of the elmo family's plan (``input_keys``: ``char_ids``,
    ``attention_mask``, ``word_targets``): the shared softmax is part of the biLM (it is
    saved in ``final/``), so the loss is the network's own and the one objective,
    :class:`~ptm_classic.recurrent.lm_objective.NetworkLoss`, passes it on.

    Args:
        bilm: the model.

    Shapes:
        ``char_ids (B, L, C)``, ``attention_mask (B, L)``, ``word_targets (B, L)``.
    """

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        self.bilm = bilm

    @property
    def config(self) -> BiLMConfig:
        return self.bilm.config

    def forward(self, char_ids: Tensor, attention_mask: Tensor, word_targets: Tensor) -> BiLMLoss:
        return self.bilm.lm_loss(char_ids, attention_mask, word_targets)


class ElmoFeatures(nn.Module):
    """A frozen biLM as a feature extractor: words -> ELMo's list of layer states.

    Feed the list to :class:`~ptm_core.modules.scalar_mix.ScalarMix` (``num_layers`` of
    them) for ELMo's task-specific ``gamma * sum_j softmax(s)_j h_j`` (Peters et al., 2018,
    Eq. 1). The biLM stays in evaluation mode and gets no gradients.

    Args:
        bilm: a trained :class:`BiLM` (e.g. from :func:`load_bilm`).

    Shapes:
        ``char_ids (B, L, C)``, ``mask (B, L)`` -> ``num_layers`` tensors ``(B, L, output_dim)``.
    """

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        self.bilm = bilm.eval()
        for parameter in self.bilm.parameters():
            parameter.requires_grad_(False)

    @property
    def num_layers(self) -> int:
        return self.bilm.num_layers

    @property
    def output_dim(self) -> int:
        return self.bilm.output_dim

    def train(self, mode: bool = True) -> ElmoFeatures:
        super().train(mode)
        self.bilm.eval()  # frozen: no dropout in the features
        return self

    def forward(self, char_ids: Tensor, mask: Tensor) -> list[Tensor]:
        with torch.no_grad():
            return self.bilm.layer_states(char_ids, mask)


# ------------------------------------------------------------------ checkpoint


def bilm_on_meta(config: BiLMConfig) -> BiLM:
    """A :class:`BiLM` built on the meta device: shapes and parameter counts only (no memory,
    no weights), so that ``elmo_original`` (93.6M parameters) builds in a second.

    Example:
        >>> bilm_on_meta(BiLMConfig(vocab_size=793_471)).num_parameters()
        93666400
    """
    # normal_ on meta goes through torch's reference decompositions, whose first call takes
    # seconds; nothing is initialised on meta anyway.
    with torch.device("meta"), patch.object(torch.nn.init, "normal_", lambda t, *a, **k: t):
        return BiLM(config)


def save_bilm(bilm: BiLM, directory: str | Path, vocabulary: Sequence[str]) -> Path:
    """Write ``config.json``, ``model.safetensors`` and the output ``vocab.txt``, atomically.

    Args:
        bilm: the model.
        directory: the ``final/`` directory (replaced as a whole).
        vocabulary: the output words, row order (``len == vocab_size``).
    """
    if len(vocabulary) != bilm.config.vocab_size:
        raise ValueError(
            f"vocabulary has {len(vocabulary)} words but the biLM's vocab_size is "
            f"{bilm.config.vocab_size}"
        )
    config = with_kind(
        {
            "ptm_format": BILM_FORMAT,
            "model_type": "elmo_bilm",
            **dataclasses.asdict(bilm.config),
        },
        ELMO,
    )
    state = {k: v.detach().contiguous().cpu() for k, v in bilm.state_dict().items()}
    with atomic_directory(directory) as tmp:
        save_file(state, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        (tmp / VOCAB_FILE).write_text("".join(f"{w}\n" for w in vocabulary), encoding="utf-8")
    return Path(directory)


def read_vocabulary(directory: str | Path) -> list[str]:
    """The output words of a biLM ``final/`` directory, in id order."""
    path = Path(directory) / VOCAB_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{path}: missing; a biLM final/ directory holds its output vocab.txt"
        )
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def load_bilm(final_dir: str | Path) -> BiLM:
    """Load a biLM written by ``ptm pretrain experiment=elmo_tiny`` (its ``final/``).

    Args:
        final_dir: the directory with ``config.json`` and ``model.safetensors``.

    Returns:
        The :class:`BiLM` in evaluation mode.

    Raises:
        CheckpointError: missing directory or file, a config that is not a biLM's, or
            weights that do not fit it; the message names the file and the fix.
    """
    directory = Path(final_dir)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: not a directory; give the final/ directory of an ELMo run "
            "(`ptm pretrain experiment=elmo_tiny` writes <trainer.output_dir>/final)"
        )
    config_path = directory / CONFIG_FILE
    raw: dict[str, Any] = read_json_object(
        config_path, "a biLM final/ directory holds config.json and model.safetensors"
    )
    if raw.get("ptm_format") != BILM_FORMAT:
        raise CheckpointError(
            f"{config_path}: ptm_format is {raw.get('ptm_format')!r}, not {BILM_FORMAT!r}: this "
            "is not an ELMo biLM checkpoint; give the final/ of `ptm pretrain experiment=elmo_tiny`"
        )
    fields = {f.name for f in dataclasses.fields(BiLMConfig)}
    try:
        config = BiLMConfig(**{k: v for k, v in raw.items() if k in fields})
        bilm = BiLM(config)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{config_path}: invalid biLM config ({exc})") from None
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"{weights}: missing; copy the weights file next to config.json")
    try:
        state = load_file(str(weights))
    except Exception as exc:
        raise CheckpointError(
            f"{weights}: cannot read the weights ({type(exc).__name__}: {exc}); the file is "
            "damaged or truncated, restore it or train again"
        ) from None
    own = bilm.state_dict()
    problems = sorted(set(own) ^ set(state))
    problems += [
        f"{k}: file {tuple(v.shape)} vs config {tuple(own[k].shape)}"
        for k, v in state.items()
        if k in own and v.shape != own[k].shape
    ]
    if problems:
        raise CheckpointError(
            f"{weights}: the weights do not fit {config_path} ({'; '.join(problems[:5])}); "
            "the two files come from different runs"
        )
    bilm.load_state_dict(state)
    return bilm.eval()


__all__ = [
    "BILM_FORMAT",
    "BOS_ID",
    "EOS_ID",
    "SPECIAL_WORDS",
    "UNK_ID",
    "BiLM",
    "BiLMConfig",
    "BiLMLoss",
    "BiLMTraining",
    "ElmoFeatures",
    "bilm_on_meta",
    "load_bilm",
    "read_vocabulary",
    "save_bilm",
]
