"""Blank filling at inference: GLM generates each ``[MASK]``'s span autoregressively.

A blank is GLM's ``[MASK]`` (a short span), ``[sMASK]`` (a sentence) or ``[gMASK]`` (a long
text); :func:`encode_blanks` reads the three from text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_text.glm.construction import DOCUMENT, SENTENCE, SPAN, TASK_NAMES, BlankInfilling
from ptm_text.glm.objective import GLMObjective, collate_blank_rows


@torch.no_grad()
def next_token_logits(
    encoder: nn.Module,
    objective: GLMObjective,
    ids: Sequence[int],
    positions: Sequence[int],
    block_positions: Sequence[int],
    sep: int,
    task_ids: Sequence[int] | None = None,
) -> Tensor:
    """The head's ``(V,)`` logits at the last token of a GLM row (part A = ``ids[:sep]``;
    ``task_ids`` marks its ``[sMASK]``/``[gMASK]`` blanks)."""
    row = BlankInfilling(
        list(ids),
        list(ids),
        [0] * len(ids),
        list(positions),
        list(block_positions),
        sep,
        list(task_ids) if task_ids is not None else None,
    )
    batch = objective.rewrite_inputs(collate_blank_rows([row], objective.vocab.pad_id))
    hidden = encoder(
        batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        token_type_ids=batch["token_type_ids"],
        extra_embeds=batch["extra_embeds"],
    ).last_hidden_state
    return objective.head(hidden[0, -1])


@torch.no_grad()
def fill_blanks(
    encoder: nn.Module,
    objective: GLMObjective,
    tokens: Sequence[int],
    *,
    tasks: Sequence[int] | None = None,
    max_span_length: int = 20,
) -> list[list[int]]:
    """Fill every ``[MASK]`` of ``tokens`` greedily, left to right, as GLM does.

    ``tokens`` is part A (``[CLS] ... [MASK] ... [SEP]``). For each ``[MASK]`` in order,
    part B grows by ``[START]`` at that ``[MASK]``'s position (block position 1) and then
    by the arg-max token until ``[END]`` or ``max_span_length`` tokens; spans filled
    earlier stay in part B, so later blanks see them, as in training.

    Args:
        encoder: the pre-trained encoder (``final/``).
        objective: the trained :class:`GLMObjective` (its head and block positions).
        tokens: part A token ids with one or more ``[MASK]``.
        tasks: the task of each ``[MASK]``, in order: ``SPAN`` (``[MASK]``), ``SENTENCE``
            (``[sMASK]``) or ``DOCUMENT`` (``[gMASK]``) from
            :mod:`ptm_text.glm.construction`, as :func:`encode_blanks` returns them;
            ``None``: every blank is a ``[MASK]``.
        max_span_length: the longest span generated for one blank.

    Returns:
        The generated span of each ``[MASK]``, in order (without ``[END]``).

    Raises:
        ValueError: no ``[MASK]``; ``tasks`` of another length than the blanks; an
            ``[sMASK]``/``[gMASK]`` for a model trained without task masks.
    """
    vocab = objective.vocab
    blanks = [i for i, t in enumerate(tokens) if t == vocab.mask_id]
    if not blanks:
        raise ValueError(
            "fill_blanks: the text has no [MASK] to fill; put one where a span is missing"
        )
    kinds = list(tasks) if tasks is not None else [SPAN] * len(blanks)
    if len(kinds) != len(blanks):
        raise ValueError(
            f"fill_blanks: {len(kinds)} tasks for {len(blanks)} [MASK] blanks; give one per "
            "blank (encode_blanks returns both)"
        )
    if any(k != SPAN for k in kinds) and objective.task_embeddings is None:
        raise ValueError(
            "fill_blanks: this model was trained without task masks, so [sMASK]/[gMASK] "
            "mean nothing to it; use [MASK] (or train with objective.objectives.glm."
            "task_masks=true)"
        )
    sep = len(tokens)
    ids, positions, block = list(tokens), list(range(sep)), [0] * sep
    task_ids = [0] * sep
    for blank, kind in zip(blanks, kinds, strict=True):
        task_ids[blank] = kind
    filled: list[list[int]] = []
    for blank in blanks:
        span: list[int] = []
        ids.append(vocab.cls_id)  # [START]
        positions.append(blank)
        block.append(1)
        for _ in range(max_span_length):
            logits = next_token_logits(
                encoder, objective, ids, positions, block, sep, task_ids + [0] * (len(ids) - sep)
            )
            next_id = int(logits.argmax(-1))
            if next_id == vocab.sep_id:  # [END]
                break
            span.append(next_id)
            ids.append(next_id)
            positions.append(blank)
            block.append(block[-1] + 1)
        filled.append(span)
    return filled


_BLANK = re.compile(r"\[(MASK|sMASK|gMASK)\]")
_TASK_OF = {"MASK": SPAN, "sMASK": SENTENCE, "gMASK": DOCUMENT}


def encode_blanks(tokenizer: WordPieceTokenizer, text: str) -> tuple[list[int], list[int]]:
    """Token ids of ``text`` with its ``[MASK]``, ``[sMASK]`` and ``[gMASK]`` blanks, and the
    task of each blank in order, ready for :func:`fill_blanks`.

    Each blank becomes the vocabulary's ``[MASK]`` id; the task list says which of the
    three it was (ptm keeps GLM's task masks as ``[MASK]`` plus a learned task vector).
    """
    tasks = [_TASK_OF[m.group(1)] for m in _BLANK.finditer(text)]
    ids = tokenizer.encode(_BLANK.sub("[MASK]", text)).input_ids
    found = sum(1 for t in ids if t == tokenizer.vocab_info.mask_id)
    if found != len(tasks):
        raise ValueError(
            f"encode_blanks: the text has {len(tasks)} blanks ({', '.join(TASK_NAMES.values())}) "
            f"but reads as {found} [MASK] tokens; write [MASK] only as a blank"
        )
    return ids, tasks


def load_glm(final_dir: str | Path) -> tuple[TransformerEncoder, GLMObjective, WordPieceTokenizer]:
    """The encoder, the trained GLM objective (head and block positions, from
    ``heads.safetensors``) and the tokenizer of a ``ptm pretrain experiment=glm_tiny``
    ``final/``, in eval mode, ready for :func:`fill_blanks`.

    Raises:
        ValueError: the folder has no trained GLM head (not a GLM run's ``final/``).
    """
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.objectives.mix import ObjectiveMix
    from ptm_core.pretraining import load_heads

    directory = Path(final_dir)
    encoder = TransformerEncoder.from_pretrained(directory)
    tokenizer = WordPieceTokenizer.from_directory(directory)
    # A final/ saved before GLM's task masks existed has no task table: build without it.
    task_masks = _has_task_table(directory)
    objective = build_objective(GLMObjective, encoder, tokenizer.vocab_info, task_masks=task_masks)
    mix = ObjectiveMix({"glm": objective})
    tied = {p.data_ptr() for p in encoder.parameters()}  # the decoder: the token table
    own = mix.state_dict()
    missing = [k for k in load_heads(mix, directory) if own[k].data_ptr() not in tied]
    if missing:
        raise ValueError(
            f"{directory} has no trained GLM head ({', '.join(missing)} missing from "
            "heads.safetensors); give the final/ of a ptm pretrain experiment=glm_tiny run"
        )
    return encoder.eval(), objective.eval(), tokenizer


def _has_task_table(directory: Path) -> bool:
    from safetensors import safe_open

    from ptm_core.pretraining import HEADS_FILE

    path = directory / HEADS_FILE
    if not path.is_file():
        return False
    with safe_open(str(path), framework="pt") as handle:
        return any(key.endswith("task_embeddings.weight") for key in handle.keys())  # noqa: SIM118
