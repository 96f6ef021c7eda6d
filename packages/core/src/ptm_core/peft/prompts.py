"""Soft prompts and prefixes inside ptm's encoder (what ``peft`` cannot apply to it).

- :class:`SoftPromptEncoder`: prompt tuning (Lester et al., 2021). ``P`` trained vectors
  are prepended to the token embeddings through the encoder's ``inputs_embeds`` input;
  the heads read the real tokens' states (the prompt positions are cut off the output).
- :class:`PrefixAttention`: prefix tuning (Li & Liang, 2021). Each layer's attention
  attends ``P`` trained keys and values before the sequence's own, through the attention
  block's cached-keys path (``forward_cached``), the seam decoders use for their cache.

An encoder-decoder's (BART, T5, MASS) are in :mod:`ptm_core.peft.seq2seq_prompts`.
Both keep the wrapped encoder frozen and its layers untouched; the masks are extended so
that every real token attends the virtual ones and padding stays hidden.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_structure import AttentionStructure

PROMPT_KEY = "prompt"
PREFIX_KEY = "prefix_key"
PREFIX_VALUE = "prefix_value"


# What a wrapped encoder may declare (class attributes) so a soft prompt runs through it:
# - PROMPT_POSITION_INPUTS: its other per-position keyword inputs ``(B, L)`` and what the
#   ``P`` prompt positions take there: an int (ERNIE-THU's ``entity_ids``: ``-1``, no
#   entity) or ``ROW_VALUE`` (XLM's ``langs``: the row's language, its first position's);
# - PROMPT_POSITION_OUTPUTS: the output fields (besides ``last_hidden_state`` and
#   ``hidden_states``) that hold one state per input position and lose the prompt's;
# - PROMPT_TEXT_POSITIONS: the attribute holding how many text positions it takes, where
#   that is not its text config's ``max_positions`` (VisualBERT's ``text_positions``).
PROMPT_POSITION_INPUTS = "prompt_position_inputs"
PROMPT_POSITION_OUTPUTS = "prompt_position_outputs"
PROMPT_TEXT_POSITIONS = "prompt_text_positions"
ROW_VALUE = "row"


class SoftPromptEncoder(nn.Module):
    """An encoder with ``P`` trained prompt vectors before every input (Lester et al., 2021).

    The prompt starts from ``P`` token embeddings drawn from the vocabulary (the paper's
    best initialisation). Prompt positions take positions ``0..P-1`` and segment 0; real
    tokens follow at ``P..P+L-1`` (given ``position_ids`` are shifted by ``P``).

    The wrapped encoder is a core encoder or a model built around one (ERNIE-THU, XLM,
    VisualBERT, ViLBERT) that takes its token vectors as ``inputs_embeds``; such a model
    declares its other per-position inputs and outputs (``prompt_position_inputs``,
    ``prompt_position_outputs``, see above). Other inputs (image regions) pass through
    unchanged, so the prompt goes before the text stream only. Attributes the wrapper does
    not have (``text_config``, ``options``, ``languages``, ``checkpoint_config``...) are
    the wrapped encoder's, so task models read it through the wrapper.

    Args:
        encoder: the frozen encoder (its ``word_embeddings`` table gives the width ``E``).
        num_virtual_tokens: ``P``.
        max_length_key: the setting that bounds a row's tokens, named when a row and the
            prompt exceed the encoder's positions (a family's own: ``xlm_finetune.max_length``).
        virtual_tokens_key: the setting of ``P``, named there too
            (:attr:`~ptm_core.peft.config.PeftConfig.virtual_tokens_key`).

    Shapes:
        ``forward`` takes the encoder's inputs ``(B, L)`` (``attention_mask`` ``(B, L)`` or
        ``(B, L, L)``) and returns its output with the prompt's ``P`` positions cut off
        every per-position field: ``(B, L, D)`` (``(B, L + R, D)`` for VisualBERT's text
        and regions).
    """

    encoder: Any  # a TransformerEncoder (or XLNetEncoder); typed loosely to stay below them

    def __init__(
        self,
        encoder: nn.Module,
        num_virtual_tokens: int,
        *,
        max_length_key: str = "task.max_length",
        virtual_tokens_key: str = "finetune.peft_virtual_tokens",
    ) -> None:
        super().__init__()
        check_takes_vectors(encoder)
        self.encoder = encoder
        self.num_virtual_tokens = num_virtual_tokens
        self.length_keys = (max_length_key, virtual_tokens_key)
        self.prompt = nn.Parameter(
            vocabulary_prompt(token_table(encoder).weight, num_virtual_tokens)
        )  # (P, E)
        positions = text_positions(encoder)
        self.max_length = None if positions is None else positions - num_virtual_tokens

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            # read through __dict__: a half-built copy (deepcopy, unpickling) has no modules
            wrapped = self.__dict__.get("_modules", {}).get("encoder")
            if wrapped is None:
                raise
            return getattr(wrapped, name)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        **kwargs: Any,
    ) -> Any:
        if input_ids is None:
            raise ValueError(
                "prompt tuning reads input_ids (the prompt goes before their embeddings)"
            )
        batch, length = input_ids.shape
        count = self.num_virtual_tokens
        if self.max_length is not None and length > self.max_length:
            max_length_key, virtual_tokens_key = self.length_keys
            raise ValueError(
                f"a row of {length} tokens plus {count} prompt tokens exceeds the encoder's "
                f"{self.max_length + count} positions; lower {max_length_key} to "
                f"{self.max_length} or {virtual_tokens_key}"
            )
        words = token_table(self.encoder)(input_ids)  # (B, L, E)
        prompt = self.prompt.to(words.dtype).unsqueeze(0).expand(batch, -1, -1)  # (B, P, E)
        device = input_ids.device
        if position_ids is not None:
            head = torch.arange(count, device=device).expand(position_ids.shape[0], -1)
            position_ids = torch.cat([head, position_ids + count], dim=1)
        if token_type_ids is not None:
            token_type_ids = torch.cat([token_type_ids.new_zeros(batch, count), token_type_ids], 1)
        declared = getattr(type(self.encoder), PROMPT_POSITION_INPUTS, {})
        for name, fill in declared.items():
            if kwargs.get(name) is not None:
                kwargs[name] = prepend_positions(kwargs[name], count, fill)
        given = {
            "attention_mask": prompt_mask(attention_mask, count),
            "position_ids": position_ids,
            "token_type_ids": token_type_ids,
        }
        out = self.encoder(
            inputs_embeds=torch.cat([prompt, words], dim=1),  # (B, P + L, E)
            **{k: v for k, v in given.items() if v is not None},
            **kwargs,
        )
        return drop_prompt_positions(
            out, count, getattr(type(self.encoder), PROMPT_POSITION_OUTPUTS, ())
        )


def check_takes_vectors(encoder: nn.Module) -> None:
    """Refuse, in one line, an encoder whose ``forward`` takes no ``inputs_embeds``."""
    if "inputs_embeds" not in inspect.signature(encoder.forward).parameters:
        raise ValueError(
            f"{type(encoder).__name__} takes no inputs_embeds, so a soft prompt cannot go "
            "before its tokens; use peft=lora, ia3 or prefix"
        )


def token_table(encoder: nn.Module) -> nn.Embedding:
    """The token table an encoder (or a model around a core encoder) embeds ids with."""
    table = getattr(encoder, "word_embeddings", None)
    if not isinstance(table, nn.Embedding):
        raise ValueError(
            f"{type(encoder).__name__} has no word_embeddings token table; prompt tuning "
            "puts its vectors before the token embeddings: use finetune.peft=lora"
        )
    return table


def text_positions(encoder: nn.Module) -> int | None:
    """How many text positions ``encoder`` takes (prompt included), if it has a limit."""
    attribute = getattr(type(encoder), PROMPT_TEXT_POSITIONS, None)
    if attribute is not None:
        return int(getattr(encoder, attribute))
    config = getattr(encoder, "text_config", None) or getattr(encoder, "config", None)
    positions = getattr(config, "max_positions", None)
    return None if positions is None else int(positions)


def prepend_positions(values: Tensor, count: int, fill: int | str) -> Tensor:
    """``(B, L)`` per-position inputs with ``count`` prompt positions in front, holding
    ``fill`` (an int) or, for :data:`ROW_VALUE`, each row's first value."""
    if fill == ROW_VALUE:
        head = values[:, :1].expand(-1, count)
    else:
        head = values.new_full((values.shape[0], count), int(fill))
    return torch.cat([head, values], dim=1)  # (B, P + L)


def drop_prompt_positions(out: Any, count: int, fields: Sequence[str] = ()) -> Any:
    """An encoder output without the prompt's first ``count`` positions in
    ``last_hidden_state``, ``hidden_states`` and ``fields``."""
    changes: dict[str, Any] = {"last_hidden_state": out.last_hidden_state[:, count:]}
    if out.hidden_states is not None:
        changes["hidden_states"] = tuple(h[:, count:] for h in out.hidden_states)
    for name in fields:
        value = getattr(out, name)
        if value is not None:
            changes[name] = value[:, count:]
    return dataclasses.replace(out, **changes)


def vocabulary_prompt(table: Tensor, count: int) -> Tensor:
    """``count`` rows of a token table drawn at random (the global generator): the
    initial prompt ``(P, E)`` of Lester et al. (2021, section 3: "sampled vocabulary",
    their best initialisation after class labels)."""
    drawn = torch.randint(0, table.shape[0], (count,))
    return table.detach()[drawn].clone()


def prompt_mask(mask: Tensor | None, count: int) -> Tensor | None:
    """The mask over ``[prompt; tokens]``: every real token sees the prompt; the prompt sees
    the real tokens (padding stays hidden from everyone)."""
    if mask is None:
        return None
    if isinstance(mask, AttentionStructure) or not isinstance(mask, Tensor):
        raise ValueError(
            "prompt tuning takes a (B, L) padding or (B, L, L) visibility attention_mask, "
            f"not {type(mask).__name__}; use finetune.peft=lora for this model's inputs"
        )
    if mask.dim() == 2:  # (B, L) padding
        return torch.cat([mask.new_ones(mask.shape[0], count), mask], dim=1)
    if mask.dim() == 3:  # (B, L, L) visibility
        visible = mask.bool()
        batch = visible.shape[0]
        real = visible.any(dim=1)  # (B, L): a column someone may see is a real token
        top = torch.cat(
            [visible.new_ones(batch, count, count), real.unsqueeze(1).expand(-1, count, -1)], 2
        )  # (B, P, P + L)
        rows_real = visible.any(dim=2, keepdim=True)  # (B, L, 1): padding rows see nothing
        bottom = torch.cat([rows_real.expand(-1, -1, count), visible], dim=2)  # (B, L, P + L)
        return torch.cat([top, bottom], dim=1)
    raise ValueError(f"attention_mask must be (B, L) or (B, L, L), got {tuple(mask.shape)}")


class PrefixKeyValues(nn.Module):
    """A frozen attention block and ``P`` trained key and value vectors for it (prefix
    tuning, Li & Liang, 2021): what :class:`PrefixAttention` and the seq2seq
    ``PrefixCrossAttention`` share.

    Args:
        attention: the frozen block (``num_heads``, ``head_dim``, ``out_proj``,
            ``apply_execution_settings``).
        num_virtual_tokens: ``P``.
    """

    def __init__(self, attention: Any, num_virtual_tokens: int) -> None:
        super().__init__()
        self.attention = attention
        self.num_virtual_tokens = num_virtual_tokens
        inner = attention.num_heads * attention.head_dim
        weight = attention.out_proj.weight
        # peft's prefix encoder is an nn.Embedding: N(0, 1) entries.
        self.prefix_key = nn.Parameter(
            torch.randn(num_virtual_tokens, inner, device=weight.device, dtype=weight.dtype)
        )
        self.prefix_value = nn.Parameter(
            torch.randn(num_virtual_tokens, inner, device=weight.device, dtype=weight.dtype)
        )

    def apply_execution_settings(self, settings: Any) -> None:
        """Pass a run's kernels to the wrapped attention."""
        self.attention.apply_execution_settings(settings)


class PrefixAttention(PrefixKeyValues):
    """Self-attention that attends ``P`` trained keys and values first (Li & Liang, 2021).

    The prefix enters through the attention block's cached-keys path
    (:meth:`~ptm_core.modules.attention.MultiHeadSelfAttention.forward_cached`): the same
    projections, kernel and dropout as the plain path, with the prefix as the "past".
    Parameters are stored per layer, ``prefix_key``/``prefix_value`` ``(P, h d)``, the
    layout of peft's prefix encoder once split by layer.

    Args:
        attention: the frozen self-attention block.
        num_virtual_tokens: ``P``.

    Shapes:
        hidden ``(B, L, D)``; mask as the block takes it (``None``, bool ``(B, 1, 1|L, L)``,
        additive float ``(B|1, h, L, L)`` or an :class:`AttentionStructure`); output
        ``(B, L, D)``.
    """

    attention: MultiHeadSelfAttention

    def __init__(self, attention: MultiHeadSelfAttention, num_virtual_tokens: int) -> None:
        super().__init__(attention, num_virtual_tokens)

    def forward(
        self, hidden_states: Tensor, mask: Any = None, return_scores: bool = False
    ) -> Tensor:
        if return_scores:
            raise ValueError(
                "prefix tuning does not return attention scores; use finetune.peft=lora "
                "for attention distillation or probing"
            )
        batch = hidden_states.shape[0]
        heads, width = self.attention.num_heads, self.attention.head_dim
        count = self.num_virtual_tokens
        if isinstance(mask, AttentionStructure):
            mask = mask.to(hidden_states.device).reference_mask()  # (B, 1, L, L) bool
        output, _, _ = self.attention.forward_cached(
            hidden_states,
            prefix_heads(self.prefix_key, batch, heads, width, hidden_states.dtype),
            prefix_heads(self.prefix_value, batch, heads, width, hidden_states.dtype),
            prefix_visible(mask, count),
        )
        return output

    @property
    def num_heads(self) -> int:
        """The wrapped attention's head count (what a decoder's cache reads)."""
        return self.attention.num_heads

    @property
    def head_dim(self) -> int:
        """The wrapped attention's head width."""
        return self.attention.head_dim

    def forward_cached(
        self,
        hidden_states: Tensor,
        past_key: Tensor,
        past_value: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """A decoder's incremental step: ``T`` new positions attend the prefix, the ``P``
        cached positions and themselves (the arguments and mask of
        :meth:`~ptm_core.modules.attention.MultiHeadSelfAttention.forward_cached`).

        Returns:
            Output ``(B, T, D)`` and the keys and values of the real positions only,
            ``(B, h, P + T, d)``: the cache never holds the prefix, so each step puts it
            in front once.
        """
        batch = hidden_states.shape[0]
        heads, width, count = self.num_heads, self.head_dim, self.num_virtual_tokens
        dtype = hidden_states.dtype
        key = torch.cat([prefix_heads(self.prefix_key, batch, heads, width, dtype), past_key], 2)
        value = torch.cat(
            [prefix_heads(self.prefix_value, batch, heads, width, dtype), past_value], 2
        )
        output, key, value = self.attention.forward_cached(
            hidden_states, key, value, prefix_visible(mask, count)
        )
        return output, key[:, :, count:], value[:, :, count:]


def prefix_heads(prefix: Tensor, batch: int, heads: int, width: int, dtype: torch.dtype) -> Tensor:
    """A stored prefix ``(P, h d)`` as the keys or values of ``batch`` rows ``(B, h, P, d)``."""
    count = prefix.shape[0]
    shaped = prefix.to(dtype).view(count, heads, width).transpose(0, 1)  # (h, P, d)
    return shaped.unsqueeze(0).expand(batch, -1, -1, -1)


def prefix_visible(mask: Tensor | None, count: int) -> Tensor | None:
    """An attention mask ``(..., Lq, Lk)`` with ``count`` visible key columns in front:
    ``True`` for a bool mask, ``0`` for an additive one (so a prefix takes no position
    bias); ``None`` stays ``None`` (everything visible)."""
    if mask is None:
        return None
    rows = mask.shape[:-1]
    seen = mask.new_ones(*rows, count) if mask.dtype == torch.bool else mask.new_zeros(*rows, count)
    return torch.cat([seen, mask], dim=-1)  # (..., Lq, P + Lk)


def add_prefixes(encoder: nn.Module, num_virtual_tokens: int) -> int:
    """Wrap every encoder layer's self-attention in :class:`PrefixAttention` (in place).

    Returns:
        How many layers were wrapped.

    Raises:
        ValueError: the encoder's layers use another attention (XLNet's relative one, or
            shared layers); the message names it.
    """
    layers = getattr(encoder, "layers", None)
    if layers is None:
        raise ValueError(f"{type(encoder).__name__} has no layers to put prefixes in")
    seen: set[int] = set()
    for index, layer in enumerate(layers):
        attention = getattr(layer, "attention", None)
        if id(layer) in seen:
            raise ValueError(
                "prefix tuning needs one attention block per layer; this encoder shares its "
                "layers (ALBERT): use finetune.peft=lora or prompt"
            )
        seen.add(id(layer))
        if not isinstance(attention, MultiHeadSelfAttention):
            raise ValueError(
                f"layer {index}'s attention is {type(attention).__name__}; prefix tuning "
                "runs on the standard self-attention: use finetune.peft=lora or prompt"
            )
        layer.attention = PrefixAttention(attention, num_virtual_tokens)
    return len(layers)
