"""Attention masks described by what they are, not by a ``[B, L, L]`` tensor.

An :class:`AttentionStructure` holds only per-token ``[B, L]`` tensors (padding, segment
types, document ids, a K-BERT tree, XLNet ranks) and one rule that says whether query
``q`` may attend key ``k``. The same rule compiles to every attention backend
(:mod:`ptm_core.modules.attention_backends`):

* :meth:`AttentionStructure.dense` - the ``[B, L, L]`` boolean reference, equal to the
  tensor builders of :mod:`ptm_core.modules.attention_masks` (and K-BERT's
  ``visible_matrix``) element for element;
* :meth:`AttentionStructure.sdpa_mask` - what SDPA gets: ``None``, a ``[B, 1, 1, L]`` key
  mask (plain padding) or the dense mask with blind rows fixed as
  :func:`~ptm_core.modules.attention_masks.to_sdpa_mask` fixes them;
* :attr:`AttentionStructure.mask_mod` / :meth:`AttentionStructure.block_mask` - a
  ``flex_attention`` mask function over the ``[B, L]`` tensors and the block-sparse
  ``BlockMask`` built from it (no ``[B, L, L]`` tensor is stored).

Blind rows (a query that may attend nothing: padding rows of a visibility matrix, the
first token of an XLNet query stream) see themselves only on every backend, as
:func:`~ptm_core.modules.attention_masks.to_sdpa_mask` makes them, so outputs match the
dense path everywhere and no NaN appears. Their outputs carry no information.

Example:
    >>> padding = torch.tensor([[1, 1, 1, 0]])
    >>> structure = AttentionStructure.causal(padding)
    >>> structure.dense()[0].int().tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ptm_core.modules.attention_masks import UNILM_MASK_KINDS, to_sdpa_mask
from ptm_core.modules.compiled_frames import compiled_or_none

# The kinds a structure can be (``AttentionStructure.kind``).
STRUCTURE_KINDS: tuple[str, ...] = (
    "padding",
    "causal",
    "prefix",
    "documents",
    "kbert",
    "permutation",
    "sliding",
)
PERMUTATION_STREAMS: tuple[str, ...] = ("content", "query")

_TENSOR_FIELDS = (
    "real",
    "blind",
    "token_type_ids",
    "document_ids",
    "is_knowledge",
    "subject",
    "branch_id",
    "order_ranks",
)


def _as_2d(name: str, value: Tensor, shape: tuple[int, ...] | None = None) -> Tensor:
    if not isinstance(value, Tensor) or value.dim() != 2:
        got = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(f"{name} must be a [B, L] tensor, got {got}")
    if shape is not None and tuple(value.shape) != shape:
        raise ValueError(
            f"{name} has shape {tuple(value.shape)} but the other per-token tensors are "
            f"{shape}; pass every tensor as [B, L] for the same batch"
        )
    return value


@dataclass(frozen=True, eq=False)
class AttentionStructure:
    """One batch's attention mask, held as per-token ``[B, L]`` tensors.

    Build it with a constructor (:meth:`padding`, :meth:`causal`, :meth:`prefix`,
    :meth:`documents`, :meth:`kbert`, :meth:`permutation`), then pass it wherever an
    ``attention_mask`` goes (:class:`~ptm_core.encoders.TransformerEncoder`,
    :class:`~ptm_core.modules.MultiHeadSelfAttention`). ``True`` = may attend, as for the
    tensor masks.

    Attributes:
        kind: one of :data:`STRUCTURE_KINDS`.
        real: ``[B, L]`` bool, real (non-padding) tokens.
        blind: ``[B, L]`` bool, query rows that may attend nothing (they see themselves
            only on every backend).
        reverse: ``causal`` only: right-to-left (token ``i`` sees ``j >= i``).
        token_type_ids: ``prefix``: ``[B, L]``, 0 = source (bidirectional), else target.
        document_ids: ``documents``: ``[B, L]`` document index, ``-1`` = padding.
        is_knowledge, subject, branch_id: ``kbert``: the sentence tree per token.
        order_ranks: ``permutation``: ``[B, L]`` rank in the factorisation order.
        stream: ``permutation``: ``"content"`` (sees ranks ``<=`` its own) or ``"query"``
            (strictly ``<``).
        window: ``sliding``: how many positions a token sees to each side.

    The structure caches what it compiles to (the SDPA mask, the ``BlockMask``), so every
    layer of an encoder reuses one build; it is immutable, build a new one per batch.
    """

    kind: str
    real: Tensor
    blind: Tensor
    reverse: bool = False
    token_type_ids: Tensor | None = None
    document_ids: Tensor | None = None
    is_knowledge: Tensor | None = None
    subject: Tensor | None = None
    branch_id: Tensor | None = None
    order_ranks: Tensor | None = None
    stream: str = "content"
    window: int = 0
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def padding(cls, padding_mask: Tensor) -> AttentionStructure:
        """Plain key padding (BERT): every query sees every real key.

        Equal to :func:`~ptm_core.modules.attention_masks.padding_to_visibility`: padding
        *rows* see the real keys too (as the ``[B, L]`` tensor mask does today).

        Args:
            padding_mask: ``[B, L]``, 1/True at real tokens.
        """
        real = _as_2d("padding_mask", padding_mask).bool()
        blind = (~real.any(dim=-1, keepdim=True)).expand_as(real)
        return cls("padding", real, blind)

    @classmethod
    def causal(cls, padding_mask: Tensor, reverse: bool = False) -> AttentionStructure:
        """Left-to-right LM (GPT, UniLM): token ``i`` sees real tokens ``j <= i``.

        Equal to :func:`~ptm_core.modules.attention_masks.left_to_right_mask` (and to
        :func:`~ptm_core.modules.attention_masks.right_to_left_mask` with
        ``reverse=True``: ``j >= i``). Padding rows and columns are hidden.

        Args:
            padding_mask: ``[B, L]``, 1/True at real tokens.
            reverse: right-to-left instead.
        """
        real = _as_2d("padding_mask", padding_mask).bool()
        return cls("causal", real, ~real, reverse=bool(reverse))

    @classmethod
    def prefix(cls, padding_mask: Tensor, token_type_ids: Tensor) -> AttentionStructure:
        """Prefix LM / UniLM seq2seq: the source (type 0) is bidirectional, the target
        (type != 0) sees the source and its own prefix.

        Equal to :func:`~ptm_core.modules.attention_masks.seq2seq_mask`.

        Args:
            padding_mask: ``[B, L]``, 1/True at real tokens.
            token_type_ids: ``[B, L]``, 0 = source, 1 = target.
        """
        real = _as_2d("padding_mask", padding_mask).bool()
        types = _as_2d("token_type_ids", token_type_ids, tuple(real.shape))
        return cls("prefix", real, ~real, token_type_ids=types)

    @classmethod
    def documents(cls, document_ids: Tensor) -> AttentionStructure:
        """Packed rows: a token sees only tokens of its own document.

        Equal to :func:`~ptm_core.modules.attention_masks.block_diagonal_mask`.

        Args:
            document_ids: ``[B, L]`` integer document index; ``-1`` marks padding.
        """
        ids = _as_2d("document_ids", document_ids)
        real = ids >= 0
        return cls("documents", real, ~real, document_ids=ids)

    @classmethod
    def kbert(
        cls, is_knowledge: Tensor, subject: Tensor, branch_id: Tensor, is_real: Tensor
    ) -> AttentionStructure:
        """K-BERT's visible matrix (Liu et al., 2020) from the sentence tree per token.

        Row ``b`` equals ``ptm_knowledge.kbert.sentence_tree.visible_matrix`` of row
        ``b``'s tensors: trunk tokens see the trunk and the branches of their own subject;
        a branch token sees its own branch and its subject's trunk; every real token sees
        itself.

        Args:
            is_knowledge: ``[B, L]`` bool, branch (injected) tokens.
            subject: ``[B, L]`` long, the subject span each token belongs to.
            branch_id: ``[B, L]`` long, the branch of each knowledge token (-1 on the trunk).
            is_real: ``[B, L]`` bool, ``False`` on padding.
        """
        real = _as_2d("is_real", is_real).bool()
        shape = tuple(real.shape)
        return cls(
            "kbert",
            real,
            ~real,
            is_knowledge=_as_2d("is_knowledge", is_knowledge, shape).bool(),
            subject=_as_2d("subject", subject, shape),
            branch_id=_as_2d("branch_id", branch_id, shape),
        )

    @classmethod
    def permutation(
        cls, order_ranks: Tensor, padding_mask: Tensor, stream: str = "content"
    ) -> AttentionStructure:
        """XLNet's two-stream visibility for a factorisation order (Yang et al., 2019).

        Equal to :func:`~ptm_core.modules.attention_masks.permutation_masks`' content
        (``stream="content"``: ranks ``<=`` the row's) or query mask (``"query"``:
        strictly ``<``; the first-ranked token sees nothing, so it is a blind row).

        Args:
            order_ranks: ``[B, L]`` integer rank of every token in its row's order.
            padding_mask: ``[B, L]``, 1/True at real tokens.
            stream: ``"content"`` or ``"query"``.
        """
        if stream not in PERMUTATION_STREAMS:
            raise ValueError(
                f"stream={stream!r} is not an XLNet stream; valid: {', '.join(PERMUTATION_STREAMS)}"
            )
        real = _as_2d("padding_mask", padding_mask).bool()
        ranks = _as_2d("order_ranks", order_ranks, tuple(real.shape))
        if stream == "content":
            blind = ~real
        else:  # a real row is blind when no real token has a smaller rank
            first = ranks.masked_fill(~real, torch.iinfo(ranks.dtype).max).amin(-1, keepdim=True)
            blind = ~real | (ranks <= first)
        return cls("permutation", real, blind, order_ranks=ranks, stream=stream)

    @classmethod
    def sliding(cls, padding_mask: Tensor, window: int) -> AttentionStructure:
        """Local attention (Longformer; ModernBERT's local layers): a real token sees the
        real tokens at most ``window`` positions away on either side.

        Equal to :func:`~ptm_core.modules.attention_masks.sliding_window_mask`; padding
        rows are blind. On flex the ``BlockMask`` keeps only the blocks near the diagonal,
        so the cost grows with ``L * window``, not ``L**2``.

        Args:
            padding_mask: ``[B, L]``, 1/True at real tokens.
            window: how far a token sees to each side (``>= 0``).
        """
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"a sliding window must be an integer >= 0, got {window!r}")
        real = _as_2d("padding_mask", padding_mask).bool()
        return cls("sliding", real, ~real, window=window)

    # ------------------------------------------------------------------ the rule
    @property
    def shape(self) -> tuple[int, int]:
        """``(B, L)``."""
        batch, length = self.real.shape
        return batch, length

    @property
    def device(self) -> torch.device:
        return self.real.device

    @property
    def signature(self) -> str:
        """The kind and its variant (``"causal_reverse"``, ``"permutation_query"``): one
        :meth:`rule` per signature, so one compiled flex frame per signature (see
        :func:`~ptm_core.modules.attention_backends.compiled_flex_attention`)."""
        if self.kind == "causal" and self.reverse:
            return "causal_reverse"
        if self.kind == "permutation":
            return f"permutation_{self.stream}"
        return self.kind

    def visible(self, b: Tensor, q: Tensor, k: Tensor) -> Tensor:
        """Whether query ``q`` of row ``b`` may attend key ``k`` (blind rows not fixed).

        Works element-wise on scalar index tensors (a ``flex_attention`` ``mask_mod``) and
        on broadcast index grids (the dense ``[B, L, L]`` form).
        """
        return self.rule()(b, q, k)

    def rule(self) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """:meth:`visible` as a closure over this structure's tensors only (no reference to
        the structure object), so a compiled ``flex_attention`` sees one function per kind
        and the tensors as inputs: a new batch's structure does not recompile."""
        real = self.real
        if self.kind == "padding":
            return lambda b, q, k: real[b, k]
        if self.kind == "causal":
            if self.reverse:
                return lambda b, q, k: real[b, q] & real[b, k] & (k >= q)
            return lambda b, q, k: real[b, q] & real[b, k] & (k <= q)
        if self.kind == "prefix":
            types = self.token_type_ids
            assert types is not None

            def prefix(b: Tensor, q: Tensor, k: Tensor) -> Tensor:
                target_prefix = (types[b, q] != 0) & (k <= q)
                return real[b, q] & real[b, k] & ((types[b, k] == 0) | target_prefix)

            return prefix
        if self.kind == "documents":
            ids = self.document_ids
            assert ids is not None
            return lambda b, q, k: (ids[b, q] == ids[b, k]) & (ids[b, q] >= 0)
        if self.kind == "kbert":
            knowledge, subject, branch = self.is_knowledge, self.subject, self.branch_id
            assert knowledge is not None and subject is not None and branch is not None

            def kbert(b: Tensor, q: Tensor, k: Tensor) -> Tensor:
                trunk_q = real[b, q] & ~knowledge[b, q]
                trunk_k = real[b, k] & ~knowledge[b, k]
                same_subject = subject[b, q] == subject[b, k]
                same_branch = (branch[b, q] == branch[b, k]) & knowledge[b, q]
                seen = (trunk_q & trunk_k) | (same_subject & (trunk_q ^ trunk_k)) | same_branch
                return real[b, q] & real[b, k] & (seen | (q == k))

            return kbert
        if self.kind == "permutation":
            ranks = self.order_ranks
            assert ranks is not None
            if self.stream == "content":
                return lambda b, q, k: real[b, q] & real[b, k] & (ranks[b, k] <= ranks[b, q])
            return lambda b, q, k: real[b, q] & real[b, k] & (ranks[b, k] < ranks[b, q])
        if self.kind == "sliding":
            window = self.window
            return lambda b, q, k: real[b, q] & real[b, k] & ((q - k).abs() <= window)
        raise ValueError(f"unknown structure kind {self.kind!r}; valid: {STRUCTURE_KINDS}")

    @property
    def mask_mod(self) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
        """A ``flex_attention`` ``mask_mod(b, h, q_idx, kv_idx)`` over the ``[B, L]``
        tensors; blind rows see themselves only (as :meth:`sdpa_mask`)."""
        blind = self.blind
        visible = self.rule()

        def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return visible(b, q_idx, kv_idx) | ((q_idx == kv_idx) & blind[b, q_idx])

        return mask_mod

    # ------------------------------------------------------------------ compiled forms
    def _grid(self) -> tuple[Tensor, Tensor, Tensor]:
        batch, length = self.shape
        positions = torch.arange(length, device=self.device)
        b = torch.arange(batch, device=self.device)[:, None, None]
        return b, positions[None, :, None], positions[None, None, :]

    def dense(self) -> Tensor:
        """The ``[B, L, L]`` bool visibility (True = row may attend column): the reference.

        Equal to the tensor builder of each kind (see the constructors); blind rows are
        all False here, as there.
        """
        b, q, k = self._grid()
        batch, length = self.shape
        return self.visible(b, q, k).expand(batch, length, length).clone()

    def sdpa_mask(self) -> Tensor | None:
        """What SDPA takes: ``None``, ``[B, 1, 1, L]`` or ``[B, 1, L, L]`` bool.

        Equal to :func:`~ptm_core.modules.attention_masks.to_sdpa_mask` of :meth:`dense`
        (the padding kind of the ``[B, L]`` mask); cached on the structure.
        """
        if "sdpa" not in self._cache:
            if self.kind == "padding":
                mask = to_sdpa_mask(self.real, self.shape[1])
            else:
                b, q, k = self._grid()
                mask = (self.visible(b, q, k) | ((q == k) & self.blind[b, q]))[:, None]
            self._cache["sdpa"] = mask
        return self._cache["sdpa"]

    def reference_mask(self) -> Tensor:
        """``to_sdpa_mask(self.dense())``: exactly what the dense tensor path gives SDPA
        (``[B, 1, L, L]``; the ``"dense"`` backend); cached on the structure."""
        if "reference" not in self._cache:
            mask = to_sdpa_mask(self.dense(), self.shape[1])
            assert mask is not None
            self._cache["reference"] = mask
        return self._cache["reference"]

    @property
    def is_plain_causal(self) -> bool:
        """Left-to-right with no padding: SDPA's ``is_causal=True`` runs it exactly."""
        return self.kind == "causal" and not self.reverse and bool(self.real.all())

    def block_mask(self, num_heads: int | None = None, *, compiled: bool | None = None) -> Any:
        """The ``flex_attention`` ``BlockMask`` of this structure (cached per heads/device).

        Only block indices are kept (``[B, H, L / 128, ...]``); no ``[B, L, L]`` tensor is
        stored. Eager construction (``create_block_mask``) evaluates :attr:`mask_mod` over
        all pairs transiently; ``compiled`` (default: on CUDA) builds it through
        ``torch.compile(create_block_mask)``, which fuses that away.

        Args:
            num_heads: ``H`` of the mask; ``None`` broadcasts one mask over the heads.
            compiled: compile the construction; ``None`` = when the tensors are on CUDA.
        """
        key = ("block_mask", num_heads, str(self.device))
        if key not in self._cache:
            batch, length = self.shape
            use_compile = self.device.type == "cuda" if compiled is None else compiled
            arguments = (self.mask_mod, batch, num_heads, length, self.device)
            built = None
            if use_compile:
                built = compiled_or_none(
                    f"create_block_mask_{self.signature}",
                    _create_block_mask,
                    "the eager create_block_mask",
                    *arguments,
                )
            if built is None:
                built = _create_block_mask(*arguments)
            self._cache[key] = built
        return self._cache[key]

    def to(self, device: torch.device | str) -> AttentionStructure:
        """The same structure with its tensors on ``device`` (itself when already there)."""
        device = torch.device(device)
        if self.device == device or (device.index is None and self.device.type == device.type):
            return self
        moved = {
            name: getattr(self, name).to(device)
            for name in _TENSOR_FIELDS
            if getattr(self, name) is not None
        }
        return dataclasses.replace(self, _cache={}, **moved)

    def check_length(self, length: int) -> None:
        """Raise when the structure is not for ``length`` tokens."""
        if self.shape[1] != length:
            raise ValueError(
                f"the {self.kind} attention structure is for {self.shape[1]} tokens but the "
                f"input has {length}; build it from the batch's [B, L] tensors"
            )


def real_tokens(mask: Tensor | AttentionStructure) -> Tensor:
    """``[B, L]`` bool, the real (non-padding) tokens of any attention mask form.

    A ``[B, L]`` padding mask is its own answer; a ``[B, L, L]`` visibility matrix's
    diagonal (every mask builder lets a real token see itself and hides padding rows); a
    structure knows its :attr:`~AttentionStructure.real` tokens.
    """
    if isinstance(mask, AttentionStructure):
        return mask.real
    if mask.dim() == 3:
        return mask.diagonal(dim1=1, dim2=2).bool()
    return mask.bool()


def _create_block_mask(
    mask_mod: Callable[..., Tensor],
    batch: int,
    num_heads: int | None,
    length: int,
    device: torch.device,
) -> Any:
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(mask_mod, batch, num_heads, length, length, device=device)


def unilm_structure(
    kind: str, padding_mask: Tensor, token_type_ids: Tensor | None = None
) -> AttentionStructure:
    """One of UniLM's four masks as a structure; ``.dense()`` equals
    :func:`~ptm_core.modules.attention_masks.unilm_mask` of the same arguments.

    ``"bidirectional"`` hides padding rows as ``bidirectional_mask`` does, so it is one
    document per row (the ``documents`` kind), not the ``padding`` kind.
    """
    real = padding_mask.bool()
    if kind == "bidirectional":
        return AttentionStructure.documents(torch.where(real, 0, -1))  # -1 = padding
    if kind == "left_to_right":
        return AttentionStructure.causal(real)
    if kind == "right_to_left":
        return AttentionStructure.causal(real, reverse=True)
    if kind == "seq2seq":
        if token_type_ids is None:
            raise ValueError("a seq2seq mask needs token_type_ids (0 = source, 1 = target)")
        return AttentionStructure.prefix(real, token_type_ids)
    raise ValueError(f"unknown mask kind {kind!r}; valid kinds: {', '.join(UNILM_MASK_KINDS)}")
