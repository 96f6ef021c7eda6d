"""Fine-tune KnowBERT on a task: the candidates of the task text feed its KARs.

As in the paper (Peters et al., 2019, section 4), fine-tuning runs the whole model: the
task text gets the same candidate mentions as pre-training (every KG's alias matches,
:class:`~ptm_knowledge.knowbert.candidates.AliasCandidates`), the linkers weight the
candidates' entity embeddings and the KARs recontextualise, and a core task head reads a
pooled vector. ``use_kar=False`` is the ablation: the same text encoder, its KARs left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ptm_core.finetune.data.features import Batch, pad_rows
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.model import TaskOutput, write_task_directory
from ptm_core.finetune.scoring import FinetuneResult, train_task
from ptm_core.finetune.task_data import TaskData, read_task
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_knowledge.kg import load_knowledge_graph
from ptm_knowledge.knowbert.candidates import AliasCandidates, CandidateTransform
from ptm_knowledge.knowbert.kar import FIRST_ENTITY_ROW
from ptm_knowledge.knowbert.model import KNOWBERT_CONFIG, KnowBertEncoder
from ptm_knowledge.mention_task_model import POOLS, MentionPooledTaskModel, text_task_head

RECIPE = "knowbert_finetune"
CANDIDATE_KEYS = ("candidate_spans", "candidate_entities", "candidate_priors")


class KnowBertFeaturizer:
    """BERT sentence (pair) inputs plus every KG's candidate mentions.

    Args:
        tokenizer: the model's tokenizer.
        candidates: the :class:`CandidateTransform` of the model's KGs (no gold).
        max_length: longest row, specials included.
        kind: ``classification`` (long labels) or ``regression`` (float labels).
    """

    def __init__(
        self,
        tokenizer: TaskTokenizer,
        candidates: CandidateTransform,
        max_length: int = 128,
        *,
        kind: Literal["classification", "regression"] = "classification",
    ) -> None:
        self.tokenizer = tokenizer
        self.candidates = candidates
        self.max_length = max_length
        self.kind = kind

    def featurize(self, rows: Sequence[Any]) -> Batch:
        pairs = [e.pair is not None for e in rows]
        if any(pairs) and not all(pairs):
            raise ValueError("a batch mixes single sentences and sentence pairs; use one kind")
        encoded = self.tokenizer.encode_batch(
            [e.text for e in rows],
            [e.pair or "" for e in rows] if all(pairs) else None,
            max_length=self.max_length,
        )
        batch: Batch = {
            "input_ids": pad_rows([e.input_ids for e in encoded], self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([e.attention_mask for e in encoded], 0),
            "token_type_ids": pad_rows([e.token_type_ids for e in encoded], 0),
        }
        found = self.candidates.candidates(batch)
        batch.update({k: found[k] for k in CANDIDATE_KEYS})
        labels = [e.label for e in rows]
        if all(label is not None for label in labels):
            dtype = torch.float32 if self.kind == "regression" else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
        elif any(label is not None for label in labels):
            raise ValueError(
                "KnowBertFeaturizer: some examples of the batch have labels and some do not; "
                "label every example, or none (a file to predict on)"
            )
        return batch


class KnowBertTaskModel(MentionPooledTaskModel):
    """KnowBERT with a core sequence-level task head.

    ``pool="mentions"``: the mean of the final states over the pieces of the candidate
    mentions (any KG; the [CLS] state for a row without one); ``"first"``: [CLS].
    ``use_kar=False``: the text encoder alone (the KARs are kept, unused, so the folder
    still loads as KnowBERT).

    Inputs (``forward(batch)``): the text keys, the candidate keys, ``labels`` optional.
    """

    family = "KnowBERT"
    task_hint = "e.g. task=kg_entity_typing"
    recipe = RECIPE
    encoder: KnowBertEncoder

    def __init__(
        self,
        encoder: KnowBertEncoder,
        head: nn.Module,
        kind: str,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        use_kar: bool = True,
        pool: str = "mentions",
    ) -> None:
        super().__init__(encoder, head, kind, num_labels, label_names=label_names, pool=pool)
        self.use_kar = use_kar

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        text = {
            "input_ids": batch["input_ids"],
            "attention_mask": batch.get("attention_mask"),
            "token_type_ids": batch.get("token_type_ids"),
        }
        if self.use_kar:
            hidden = self.encoder(**text, **{k: batch.get(k) for k in CANDIDATE_KEYS})
        else:
            hidden = self.encoder.text_encoder(**text)
        states = hidden.last_hidden_state  # (B, L, D)
        spans = batch.get("candidate_spans")
        mentions = None if spans is None else mention_positions(spans, states.shape[1])
        return self.score(self.pool_states(states, mentions), batch)

    def settings(self) -> dict[str, Any]:
        """What ``task.json`` records about the model (besides the task)."""
        return self.record({"use_kar": self.use_kar})

    def checkpoint_config(self) -> dict[str, Any]:
        return {**self.settings(), "encoder": self.encoder.text_config.to_dict()}


def mention_positions(spans: Tensor, length: int) -> Tensor:
    """``(B, K, S, 2)`` inclusive spans -> ``(B, L)`` bool, True inside any span."""
    positions = torch.arange(length, device=spans.device).view(1, 1, 1, -1)
    start, end = spans[..., :1], spans[..., 1:]
    inside = (positions >= start) & (positions <= end) & (start > -1)  # (B, K, S, L)
    return inside.any(dim=2).any(dim=1)


def candidate_transform(
    encoder: KnowBertEncoder, tokenizer: Any, kg_paths: dict[str, str] | None = None
) -> CandidateTransform:
    """The candidate generators of ``encoder``'s KGs (their folders as recorded, unless
    ``kg_paths`` names others)."""
    generators = []
    for name in encoder.kg_names:
        spec = encoder.specs[name]
        path = (kg_paths or {}).get(name) or spec.kg
        if not path or not Path(path).is_dir():
            raise FileNotFoundError(
                f"KnowBERT KG {name!r}: its folder {path} is gone; the candidates are its "
                "aliases. Give its new place (knowbert.kgs.<name>.kg)"
            )
        rows = {entity: FIRST_ENTITY_ROW + i for i, entity in enumerate(spec.entity_ids)}
        generators.append(AliasCandidates(load_knowledge_graph(path), tokenizer, rows))
    return CandidateTransform(generators)


def _data(
    task: TaskSpec,
    split: str,
    tokenizer: TaskTokenizer,
    candidates: CandidateTransform,
    label_names: Sequence[str] | None,
) -> TaskData:
    if task.format != "glue" or task.kind not in ("classification", "regression"):
        raise ValueError(
            f"task {task.name}: KnowBERT fine-tuning reads GLUE-style classification or "
            f"regression files; this task is {task.kind} ({task.format}); pick such a task "
            "(e.g. task=kg_entity_typing)"
        )
    data = read_task(task, split, tokenizer, label_names)
    kind: Literal["classification", "regression"] = (
        "regression" if task.kind == "regression" else "classification"
    )
    featurizer = KnowBertFeaturizer(tokenizer, candidates, task.max_length, kind=kind)
    return TaskData(data.examples, data.examples, featurizer, data.label_names)


def finetune_knowbert(
    task: TaskSpec,
    *,
    model_dir: str | Path,
    trainer: TrainerConfig,
    seed: int = 0,
    dropout: float = 0.1,
    use_kar: bool = True,
    pool: str = "mentions",
    num_workers: int = 0,
    provenance: dict[str, Any] | None = None,
) -> FinetuneResult:
    """Fine-tune a KnowBERT ``final/`` on ``task`` and score its dev set.

    Returns:
        The core :class:`~ptm_core.finetune.scoring.FinetuneResult`; ``final/`` is a
        KnowBERT folder plus ``task_head.safetensors`` and ``task.json``.
    """
    model_dir = Path(model_dir)
    if not (model_dir / KNOWBERT_CONFIG).is_file():
        raise FileNotFoundError(
            f"{model_dir / KNOWBERT_CONFIG}: not found; model_dir must be the final/ of a "
            "KnowBERT pre-training (ptm pretrain experiment=knowbert_tiny)"
        )
    task.check_files()
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    tokenizer = load_task_tokenizer(model_dir)
    encoder = KnowBertEncoder.from_pretrained(model_dir)
    candidates = candidate_transform(encoder, tokenizer)
    train = _data(task, "train", tokenizer, candidates, None)
    dev = _data(task, "dev", tokenizer, candidates, train.label_names)
    num_labels = 1 if task.kind == "regression" else len(train.label_names)
    head = text_task_head(encoder, task.kind, num_labels, dropout)
    model = KnowBertTaskModel(
        encoder, head, task.kind, num_labels,
        label_names=train.label_names or None, use_kar=use_kar, pool=pool,
    )  # fmt: skip
    print(f"{task.name}: KnowBERT fine-tuning, KARs {'on' if use_kar else 'off (ablation)'}")
    record = {"task": task.to_dict(), **({"provenance": provenance} if provenance else {})}

    def save_final(final: Path) -> None:
        kar_state = {
            k: v.detach().cpu().contiguous()
            for k, v in encoder.state_dict().items()
            if not k.startswith("text_encoder.")
        }
        specs = {"kgs": {name: vars(spec) for name, spec in encoder.specs.items()}}

        def write_kars(tmp: Path) -> None:
            from safetensors.torch import save_file

            save_file(kar_state, str(tmp / "knowbert_layers.safetensors"))
            (tmp / KNOWBERT_CONFIG).write_text(json.dumps(specs, indent=2) + "\n")

        write_task_directory(
            encoder.text_encoder,
            {f"head.{k}": v for k, v in head.state_dict().items()},
            model.settings(),
            record,
            final,
            extra_writers=[write_kars, tokenizer.save],
            writer="finetune_knowbert",
        )

    return train_task(
        model,
        task,
        train,
        dev,
        trainer,
        save_final=save_final,
        seed=seed,
        num_workers=num_workers,
        group_by_length=False,
    )


__all__ = [
    "POOLS",
    "RECIPE",
    "KnowBertFeaturizer",
    "KnowBertTaskModel",
    "candidate_transform",
    "finetune_knowbert",
    "mention_positions",
]
