"""Fine-tuning a SentiLARE folder: the ``sentilr`` family's task adapter.

As the reference (thu-coai/SentiLARE ``finetune/run_sent_sentilr_roberta.py``): the task text
gets the same word-level knowledge as pre-training (the folder's saved POS and polarity
settings), POS and polarity embeddings are added to every piece, and the sentence-label
input is "unknown" everywhere; a classification head reads ``[CLS]``. Sentence-level
classification (one text per row, GLUE-style files) is what the paper fine-tunes this way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ptm_core.checkpoints.io import CheckpointError, check_state
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.families.core_settings import refuse_unread_finetune_options
from ptm_core.families.runner import FinetuneRun
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.features import SentenceFeaturizer
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.model import (
    TaskModel,
    TaskOutput,
    build_task_model,
    load_task_model,
    save_task_model,
)
from ptm_core.finetune.recipe import FinetuneResult
from ptm_core.finetune.scoring import evaluate_task, train_and_score
from ptm_core.finetune.task_data import TaskData, read_task, task_num_labels
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import WordPieceTokenizer
from ptm_text.sentilr.checkpoint import load_sentilr
from ptm_text.sentilr.data import annotate_text
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER, KnowledgeAnnotator
from ptm_text.sentilr.model import POLARITY_KEY, POS_KEY, SentiLRKnowledgeEmbeddings
from ptm_text.sentilr.pretraining import annotator_from
from ptm_text.sentilr.settings import SentiLRSettings

logger = logging.getLogger(__name__)
KNOWLEDGE_FILE = "sentilr_knowledge.safetensors"


class SentiLRFeaturizer:
    """A sentence featurizer's batch plus each piece's POS and polarity (``sentilr_pos``,
    ``sentilr_polarity``, ``(B, L)``; "other"/"neutral" at specials and padding).

    Args:
        inner: the task's :class:`~ptm_core.finetune.data.features.SentenceFeaturizer`.
        tokenizer: the model's WordPiece tokenizer.
        annotator: the folder's knowledge annotator.
        max_length: the task's row length.
    """

    def __init__(
        self,
        inner: Any,
        tokenizer: WordPieceTokenizer,
        annotator: KnowledgeAnnotator,
        max_length: int,
    ) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.annotator = annotator
        self.max_length = max_length

    def featurize(self, rows: Sequence[SentenceExample]) -> dict[str, Tensor]:
        if any(row.pair is not None for row in rows):
            raise ValueError(
                "SentiLARE fine-tunes sentence-level classification (one text per row); this "
                "task has sentence pairs: set text_fields to one column"
            )
        batch = self.inner.featurize(rows)
        length = batch["input_ids"].shape[1]
        pos = torch.full((len(rows), length), OTHER, dtype=torch.long)
        polarity = torch.full((len(rows), length), NEUTRAL, dtype=torch.long)
        for i, row in enumerate(rows):
            piece = annotate_text(row.text, self.tokenizer, self.annotator, self.max_length)
            size = len(piece.input_ids)
            if batch["input_ids"][i, :size].tolist() != piece.input_ids:
                raise ValueError(
                    f"row {i} of a batch: the task's pieces and SentiLARE's word pieces differ "
                    f"for {row.text[:60]!r}; the folder's tokenizer must be WordPiece"
                )
            pos[i, :size] = torch.tensor(piece.pos)
            polarity[i, :size] = torch.tensor(piece.polarity)
        return {**batch, POS_KEY: pos, POLARITY_KEY: polarity}


class SentiLRTaskModel(nn.Module):
    """A :class:`~ptm_core.finetune.model.TaskModel` whose encoder input adds SentiLARE's
    knowledge embeddings (POS, polarity, and the "unknown" sentence label).

    Args:
        task: the task model (core encoder + head).
        knowledge: the pre-trained knowledge tables (fine-tuned with the rest).
    """

    def __init__(self, task: TaskModel, knowledge: SentiLRKnowledgeEmbeddings) -> None:
        super().__init__()
        self.task = task
        self.knowledge = knowledge

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        pos, polarity = batch[POS_KEY], batch[POLARITY_KEY]
        unknown = pos.new_full(pos.shape, self.knowledge.num_labels)
        extra = self.knowledge(pos, polarity, unknown)  # (B, L, E)
        return self.task({**batch, "extra_embeds": extra})

    def checkpoint_config(self) -> dict[str, Any]:
        return {**self.task.checkpoint_config(), "sentilr": True}


def finetune_sentilr(run: FinetuneRun) -> FinetuneResult:
    """The ``sentilr`` family's ``finetune`` hook (``run.settings``: :class:`SentiLRSettings`).

    ``finetune.random_init=true`` keeps the folder's architecture, tokenizer and knowledge
    settings with fresh weights (the "no pre-training" baseline).
    """
    settings: SentiLRSettings = run.settings
    if settings.task is None:
        raise ValueError("no task: give task=<name> (configs/task/) to fine-tune on")
    if run.init_from is None:
        raise ValueError(
            "family sentilr fine-tunes a SentiLARE folder: give model=<the final/ of "
            "`ptm pretrain experiment=sentilr_tiny`>"
        )
    task = TaskSpec.from_mapping(settings.task)
    task.check_files()
    if task.kind != "classification" or task.format != "glue":
        raise ValueError(
            f"task {task.name}: SentiLARE fine-tunes sentence classification (kind "
            f"classification, format glue); this task is {task.kind}/{task.format}"
        )
    options = settings.finetune
    refuse_unread_finetune_options(
        options, "SentiLARE", ("random_init", "dropout", "num_workers", "group_by_length")
    )
    directory = Path(run.init_from)
    network = load_sentilr(directory)
    record = network.record
    if options.random_init:
        torch.manual_seed(run.seed)
        fresh = SentiLRKnowledgeEmbeddings(
            network.knowledge.pos.embedding_dim, network.knowledge.num_labels
        )
        network.encoder, network.knowledge = encoder_from_config(network.encoder.config), fresh
    tokenizer = WordPieceTokenizer.from_directory(directory)
    annotator = annotator_from(record)
    logger.info("%s: POS from %s, polarity from %s", task.name, *annotator.sources.values())
    train = _with_knowledge(read_task(task, "train", tokenizer), tokenizer, annotator, task)
    dev = _with_knowledge(
        read_task(task, "dev", tokenizer, train.label_names), tokenizer, annotator, task
    )
    torch.manual_seed(derive_seed(run.trainer.seed, "task-head"))
    model = SentiLRTaskModel(
        build_task_model(
            network.encoder,
            task.kind,
            task_num_labels(task, train),
            options.dropout,
            label_names=train.label_names or None,
        ),
        network.knowledge,
    )
    config = {
        "task": task.to_dict(),
        "feature_based": False,
        "family": "sentilr",
        "sentilr": record,
        "provenance": {"init_from": str(directory), "random_init": options.random_init},
    }

    def save_final(folder: Path) -> None:
        def knowledge(path: Path) -> None:
            state = {k: v.detach().contiguous() for k, v in model.knowledge.state_dict().items()}
            save_file(state, str(path / KNOWLEDGE_FILE))

        save_task_model(model.task, folder, task_config=config,
                        extra_writers=[tokenizer.save, knowledge])  # fmt: skip

    data = TaskBatches(
        train.rows,
        train.featurizer,
        task.batch_size,
        seed=run.seed,
        num_workers=options.num_workers,
        group_by_length=options.group_by_length,
    )
    return train_and_score(
        model,
        data,
        run.trainer,
        save_final=save_final,
        score=lambda: evaluate_task(model, task, dev),
        name=task.name,
        metric=str(task.metric),
    )


def _with_knowledge(
    data: TaskData, tokenizer: WordPieceTokenizer, annotator: KnowledgeAnnotator, task: TaskSpec
) -> TaskData:
    featurizer = SentiLRFeaturizer(data.featurizer, tokenizer, annotator, task.max_length)
    return dataclasses.replace(data, featurizer=featurizer)


def load_sentilr_task(directory: str | Path) -> SentiLRTaskModel:
    """A fine-tuned SentiLARE ``final/``: the task model and its knowledge tables (the
    ``task_loaders`` hook: ``task.json`` carries the ``sentilr`` record)."""
    folder = Path(directory)
    task, record = load_task_model(folder)
    path = folder / KNOWLEDGE_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{path}: missing; a SentiLARE fine-tune writes its knowledge tables there"
        )
    width = task.encoder.config.embedding_size or task.encoder.config.hidden_size
    knowledge = SentiLRKnowledgeEmbeddings(width, int(record["sentilr"]["num_labels"]))
    check_state(knowledge, load_file(str(path)), source=str(path))
    return SentiLRTaskModel(task, knowledge)


class SentiLRPredictions:
    """``ptm predict`` on a fine-tuned SentiLARE classifier (the ``predictors`` hook): the
    input rows (any table format of the task) annotated as in training, scored in batches.

    Args:
        directory: the fine-tuned ``final/``.
        path: the rows to predict on.
        device: where to run.
        batch_size: rows per forward pass (default: the task's ``eval_batch_size``).
    """

    def __init__(
        self, directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        from ptm_core.finetune.recipe import load_finetuned

        model, tokenizer, task, record = load_finetuned(directory)
        if not isinstance(tokenizer, WordPieceTokenizer):
            raise CheckpointError(f"{directory}: a SentiLARE folder has a WordPiece vocab.txt")
        self.model = model.to(device).eval()
        self.device = torch.device(device)
        self.task, self.path = task, path
        self.kind = task.kind
        self.names = list(record.get("label_names") or [])
        self.batch_size = int(batch_size or task.eval_batch_size)
        inner = SentenceFeaturizer(tokenizer, task.max_length)
        self.featurizer = SentiLRFeaturizer(
            inner, tokenizer, annotator_from(record["sentilr"]), task.max_length
        )

    def records(self) -> Iterator[dict[str, Any]]:
        from ptm_core.finetune.predict_inputs import prediction_rows

        chunk: list[Any] = []
        for row in prediction_rows(self.task, self.path):
            chunk.append(row)
            if len(chunk) == self.batch_size:
                yield from self._score(chunk)
                chunk = []
        if chunk:
            yield from self._score(chunk)

    def _score(self, rows: list[Any]) -> Iterator[dict[str, Any]]:
        from ptm_core.finetune.predict import record_of

        batch = self.featurizer.featurize([example for _values, example in rows])
        inputs = {k: v.to(self.device) for k, v in batch.items() if k != "labels"}
        with torch.inference_mode():
            p = self.model(inputs).logits.float().softmax(-1).cpu()
        for (values, _example), scores in zip(rows, p.tolist(), strict=True):
            best = max(range(len(scores)), key=scores.__getitem__)
            name = lambda i: self.names[i] if i < len(self.names) else i  # noqa: E731
            yield record_of(
                values,
                {
                    "prediction": name(best),
                    "score": round(scores[best], 6),
                    "scores": {name(i): round(s, 6) for i, s in enumerate(scores)},
                },
            )
