"""Fine-tune ERNIE-THU on a task, with entity inputs from the linker at fine-tuning time.

ERNIE (Zhang et al., 2019, section 4) fine-tunes like BERT, except that every input also
carries its entities: the task text goes through the entity linker (TAGME in the paper,
:class:`~ptm_knowledge.linking.EntityLinker` here), each mention's entity is aligned to the
first word piece of the mention, and the K-Encoder fuses the entity's KG embedding (the
frozen TransE table the pre-training used) into that token. Here:

- **linking**: a task file is linked once and the mentions are cached in
  ``<cache_dir>/task-links/`` under a key of the file's bytes, the KG files' bytes and the
  linker settings (:func:`task_links`), so no epoch, run or seed links it again;
- **data**: the core GLUE reader (``format: glue``; ``classification`` or ``regression``),
  rows paired with their mentions (:class:`LinkedRows`), batched per batch by
  :class:`ErnieFeaturizer` on core :class:`~ptm_core.finetune.data.TaskBatches`;
- **model**: :class:`ErnieTaskModel`: the pre-trained
  :class:`~ptm_knowledge.ernie.thu_encoder.KnowledgeableEncoder` + a core task head;
  ``use_entities=False`` is the kg-free ablation (the same model, no entity embedding is
  fused anywhere);
- **run**: :func:`~ptm_core.finetune.recipe.train_and_score` (core Trainer, ``final/``,
  ``eval.json``); :func:`load_ernie_finetuned` / :func:`predict_ernie` read ``final/``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from ptm_core.atomic import atomic_write_text
from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.features import Batch, pad_rows
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.model import (
    TASK_HEAD_FILE,
    TASK_JSON,
    TaskOutput,
    build_task_head,
    head_settings,
    read_task_json,
    read_trained_state,
    task_loss,
    write_task_directory,
)
from ptm_core.finetune.recipe import (
    FinetuneResult,
    TaskData,
    evaluate_task,
    read_task,
    train_and_score,
)
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder
from ptm_knowledge.linking.alignment import NO_ENTITY, align_mentions_to_pieces

RECIPE = "ernie_thu_finetune"
LINKS_FORMAT = "ptm-task-links/1"
POOLS = ("mentions", "first")
Pool = Literal["mentions", "first"]
# One mention as cached: character span in its segment and the entity id.
Span = tuple[int, int, str]


# ------------------------------------------------------------------------------ linking


def default_links_dir() -> Path:
    """``$PTM_CACHE_DIR/task-links`` or ``~/.cache/ptm/task-links``."""
    root = os.environ.get("PTM_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "ptm") / "task-links"


def _kg_files(kg: str | Path) -> list[Path]:
    kg = Path(kg)
    if kg.is_dir():
        return [p for p in (kg / "entities.tsv", kg / "triples.tsv") if p.is_file()]
    return [kg]


def links_key(path: str | Path, kg: str | Path, linker_options: Mapping[str, Any]) -> str:
    """SHA-256 of the task file's bytes, the KG files' bytes and the linker settings."""
    digest = hashlib.sha256(LINKS_FORMAT.encode())
    for file in [Path(path), *_kg_files(kg)]:
        digest.update(b"\x00" + file.name.encode() + b"\x00" + file.read_bytes())
    digest.update(json.dumps(dict(linker_options), sort_keys=True).encode())
    return digest.hexdigest()


def task_links(
    path: str | Path,
    examples: Sequence[SentenceExample],
    kg: str | Path,
    *,
    linker_options: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
) -> list[tuple[list[Span], list[Span]]]:
    """The linked mentions of every example of a task file, linked once and cached.

    Each example's ``text`` and ``pair`` are linked separately with an
    :class:`~ptm_knowledge.linking.EntityLinker` over ``kg``; the result is written
    atomically to ``<cache_dir>/links-<key>.jsonl`` (one line per example) and read back by
    every later call with the same file, KG and settings.

    Args:
        path: the task file ``examples`` were read from (its bytes key the cache).
        examples: its examples (:func:`~ptm_core.finetune.data.read_glue`).
        kg: the KG folder (``entities.tsv`` + ``triples.tsv``) the linker matches against.
        linker_options: :class:`EntityLinker` keyword arguments (``threshold``, ...).
        cache_dir: the cache folder (default :func:`default_links_dir`).

    Returns:
        Per example, ``(text mentions, pair mentions)`` as ``(start, end, entity_id)``.
    """
    options = dict(linker_options or {})
    if not Path(kg).exists():
        raise FileNotFoundError(
            f"kg={kg}: not found; give the KG folder (entities.tsv + triples.tsv) the "
            "ERNIE-THU model was pre-trained with"
        )
    cache = Path(cache_dir) if cache_dir is not None else default_links_dir()
    target = cache / f"links-{links_key(path, kg, options)[:32]}.jsonl"
    if target.is_file():
        rows = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
        if len(rows) == len(examples):
            return [([_span(m) for m in a], [_span(m) for m in b]) for a, b in rows]
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker

    linker = EntityLinker(load_knowledge_graph(kg), **options)
    texts = [e.text for e in examples]
    pairs = [e.pair or "" for e in examples]
    linked = []
    for a, b in zip(linker.link_batch(texts), linker.link_batch(pairs), strict=True):
        linked.append(
            ([(m.start, m.end, m.entity_id) for m in a], [(m.start, m.end, m.entity_id) for m in b])
        )
    cache.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, "".join(json.dumps([a, b]) + "\n" for a, b in linked))
    return linked


def _span(item: list[Any]) -> Span:
    start, end, entity = item
    return int(start), int(end), str(entity)


@dataclass(frozen=True)
class LinkedExample:
    """A task example and its linked mentions (character spans in ``text`` / ``pair``)."""

    example: SentenceExample
    mentions: tuple[Span, ...]
    pair_mentions: tuple[Span, ...] = ()


class LinkedRows(Sequence[LinkedExample]):
    """``examples[i]`` paired with ``links[i]``, built when indexed (the reader stays lazy)."""

    def __init__(
        self, examples: Sequence[SentenceExample], links: Sequence[tuple[list[Span], list[Span]]]
    ) -> None:
        if len(examples) != len(links):
            raise ValueError(f"{len(examples)} examples but {len(links)} linked rows")
        self.examples = examples
        self.links = links

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        a, b = self.links[index]
        return LinkedExample(self.examples[index], tuple(a), tuple(b))

    def __iter__(self) -> Iterator[LinkedExample]:
        return (self[i] for i in range(len(self)))


def link_coverage(rows: Sequence[LinkedExample], entity_index: Mapping[str, int]) -> dict[str, Any]:
    """How much of a task the linker reached: rows with a mention whose entity has an
    embedding, mentions in all, and mentions of entities outside the table."""
    with_entity = mentions = unknown = 0
    for row in rows:
        spans = [*row.mentions, *row.pair_mentions]
        mentions += len(spans)
        unknown += sum(entity not in entity_index for *_, entity in spans)
        with_entity += any(entity in entity_index for *_, entity in spans)
    return {
        "rows": len(rows),
        "rows_with_entity": with_entity,
        "mentions": mentions,
        "mentions_outside_table": unknown,
    }


# ------------------------------------------------------------------------------ features


class ErnieFeaturizer:
    """BERT sentence (pair) inputs plus one entity index per word piece (ERNIE-THU).

    The text is encoded as :class:`~ptm_core.finetune.data.SentenceFeaturizer` encodes it;
    each mention's entity goes on the first piece of its mention
    (:func:`~ptm_knowledge.linking.align_mentions_to_pieces`); mentions of entities
    outside ``entity_index`` are dropped.

    Args:
        tokenizer: the model's tokenizer.
        entity_index: entity id -> row of the model's KG embedding table.
        max_length: longest row, specials included.
        kind: ``classification`` (long labels) or ``regression`` (float labels).

    Returns (of :meth:`featurize`):
        ``input_ids``, ``attention_mask``, ``token_type_ids``, ``entity_ids`` (``-1`` =
        none): ``(B, L)``; ``labels`` ``(B,)`` when the examples have labels.
    """

    def __init__(
        self,
        tokenizer: WordPieceTokenizer,
        entity_index: Mapping[str, int],
        max_length: int = 128,
        *,
        kind: Literal["classification", "regression"] = "classification",
    ) -> None:
        self.tokenizer = tokenizer
        self.entity_index = dict(entity_index)
        self.max_length = max_length
        self.kind = kind

    def featurize(self, rows: Sequence[LinkedExample]) -> Batch:
        """One batch from ``rows`` (all single sentences or all pairs)."""
        examples = [row.example for row in rows]
        has_pair = [e.pair is not None for e in examples]
        if any(has_pair) and not all(has_pair):
            raise ValueError("a batch mixes single sentences and sentence pairs; use one kind")
        encoded = self.tokenizer.encode_batch(
            [e.text for e in examples],
            [e.pair or "" for e in examples] if all(has_pair) else None,
            max_length=self.max_length,
        )
        entity_rows = []
        for row, enc in zip(rows, encoded, strict=True):
            ids = [NO_ENTITY] * len(enc)
            for segment, spans in ((0, row.mentions), (1, row.pair_mentions)):
                outside = [
                    int(special or kind != segment)
                    for special, kind in zip(
                        enc.special_tokens_mask, enc.token_type_ids, strict=True
                    )
                ]
                aligned = align_mentions_to_pieces(enc.offsets, spans, self.entity_index, outside)
                ids = [a if a != NO_ENTITY else i for i, a in zip(ids, aligned, strict=True)]
            entity_rows.append(ids)
        batch = {
            "input_ids": pad_rows([e.input_ids for e in encoded], self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([e.attention_mask for e in encoded], 0),
            "token_type_ids": pad_rows([e.token_type_ids for e in encoded], 0),
            "entity_ids": pad_rows(entity_rows, NO_ENTITY),
        }
        labels = [e.label for e in examples]
        if all(label is not None for label in labels):
            dtype = torch.float32 if self.kind == "regression" else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
        elif any(label is not None for label in labels):
            line = next(e.line for e in examples if e.label is None)
            raise ValueError(
                f"ErnieFeaturizer: the example on line {line} has no label but others in the "
                "batch do; label every example, or none (a file to predict on)"
            )
        return batch


# ------------------------------------------------------------------------------ model


class ErnieTaskModel(nn.Module):
    """ERNIE-THU with a core sequence-level task head (Zhang et al., 2019, section 4).

    The head reads one vector per row: with ``pool="mentions"`` the mean of the final
    states at the pieces that carry a linked entity (the [CLS] state for a row without
    one), as ERNIE's entity typing reads its entity marker; with ``pool="first"`` the
    [CLS] state. With one K-Encoder layer, [CLS] attends before entities are fused, so its
    state never sees them: ``"mentions"`` is the default.

    Args:
        encoder: the pre-trained :class:`KnowledgeableEncoder`.
        head: a core ``classification``/``regression`` head (``build_task_head``).
        kind: ``classification`` or ``regression``.
        num_labels: classes (1 for regression).
        label_names: class names in index order.
        use_entities: False is the kg-free ablation: no entity is passed to the encoder,
            so no KG embedding is fused (the pooled positions stay the linked mentions').
        pool: ``"mentions"`` or ``"first"``.

    Inputs (``forward(batch)``): ``input_ids``, ``attention_mask``, ``token_type_ids``,
    ``entity_ids`` ``(B, L)``; ``labels`` ``(B,)`` optional.
    """

    def __init__(
        self,
        encoder: KnowledgeableEncoder,
        head: nn.Module,
        kind: str,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        use_entities: bool = True,
        pool: Pool = "mentions",
    ) -> None:
        super().__init__()
        if kind not in ("classification", "regression"):
            raise ValueError(
                f"ERNIE-THU fine-tuning supports classification and regression, not {kind!r}; "
                "use a GLUE-style task (configs/task/*.yaml with kind: classification)"
            )
        if pool not in POOLS:
            raise ValueError(f"unknown pool {pool!r}; valid: {', '.join(POOLS)}")
        self.encoder = encoder
        self.head = head
        self.kind = kind
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.use_entities = use_entities
        self.pool = pool

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        input_ids = batch["input_ids"]
        entity_ids = batch.get("entity_ids")
        if entity_ids is None:
            entity_ids = torch.full_like(input_ids, NO_ENTITY)
        hidden = self.encoder(
            input_ids=input_ids,
            attention_mask=batch.get("attention_mask"),
            position_ids=batch.get("position_ids"),
            token_type_ids=batch.get("token_type_ids"),
            entity_ids=entity_ids if self.use_entities else None,
        ).last_hidden_state  # (B, L, D)
        pooled = hidden[:, 0]  # (B, D)
        if self.pool == "mentions":
            at = (entity_ids >= 0).to(hidden.dtype)  # (B, L)
            count = at.sum(1, keepdim=True)  # (B, 1)
            mean = (hidden * at[..., None]).sum(1) / count.clamp(min=1)
            pooled = torch.where(count > 0, mean, pooled)
        logits = self.head(pooled[:, None, :])  # (B, N)
        loss, metrics = task_loss(self.kind, logits, batch)
        return TaskOutput(loss=loss, logits=logits, metrics=metrics)

    def settings(self) -> dict[str, Any]:
        """What ``task.json`` records about the model (besides the task)."""
        return {
            "recipe": RECIPE,
            "kind": self.kind,
            "num_labels": self.num_labels,
            "label_names": self.label_names,
            **head_settings(self.head),
            "use_entities": self.use_entities,
            "entity_pool": self.pool,
        }

    def checkpoint_config(self) -> dict[str, Any]:
        """What the trainer's checkpoints record in ``config.json`` beside the weights."""
        return {
            **self.settings(),
            "knowledge": self.encoder.options,
            "encoder": self.encoder.config.to_dict(),
        }


def build_ernie_task_model(
    encoder: KnowledgeableEncoder,
    kind: str,
    num_labels: int,
    dropout: float = 0.1,
    *,
    label_names: Sequence[str] | None = None,
    use_entities: bool = True,
    pool: Pool = "mentions",
) -> ErnieTaskModel:
    """Put a fresh core head for ``kind`` on an ERNIE-THU encoder (see :class:`ErnieTaskModel`)."""
    config = encoder.config
    head = build_task_head(
        config.hidden_size, kind, num_labels, dropout, initializer_range=config.initializer_range
    )
    return ErnieTaskModel(
        encoder,
        head,
        kind,
        num_labels,
        label_names=label_names,
        use_entities=use_entities,
        pool=pool,
    )


def save_ernie_task_model(
    model: ErnieTaskModel,
    directory: str | Path,
    *,
    entity_ids: Sequence[str],
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write ``final/`` atomically: the T-Encoder (``config.json``, ``model.safetensors``),
    ``task_head.safetensors`` (``knowledge.*``: aggregators, projection and entity table;
    ``head.*``: the task head), ``knowledge_config.json`` (the K-Encoder settings and
    ``entity_ids``) and ``task.json`` (``recipe: ernie_thu_finetune``)."""
    encoder = model.encoder
    state = {
        f"knowledge.{k}": v
        for k, v in encoder.state_dict().items()
        if not k.startswith("text_encoder.")
    }
    state.update({f"head.{k}": v for k, v in model.head.state_dict().items()})
    knowledge = json.dumps({**encoder.options, "entity_ids": list(entity_ids)}, indent=2) + "\n"

    def write_knowledge(tmp: Path) -> None:
        (tmp / KNOWLEDGE_CONFIG).write_text(knowledge, encoding="utf-8")

    return write_task_directory(
        encoder.text_encoder,
        state,
        model.settings(),
        task_config,
        directory,
        extra_writers=[write_knowledge, *extra_writers],
        writer="save_ernie_task_model",
    )


def load_ernie_task_model(directory: str | Path) -> tuple[ErnieTaskModel, dict[str, Any]]:
    """Load what :func:`save_ernie_task_model` wrote.

    Returns:
        ``(model, record)``: the model in eval mode and ``task.json`` (``entity_ids`` added
        from ``knowledge_config.json``).

    Raises:
        CheckpointError: not an ERNIE-THU fine-tuned folder, or mismatched files; the
            message names the file and the fix.
    """
    directory = Path(directory)
    record = read_task_json(directory / TASK_JSON)
    if record.get("recipe") != RECIPE:
        raise CheckpointError(
            f"{directory / TASK_JSON}: recipe is {record.get('recipe')!r}, not {RECIPE!r}; load "
            "this final/ with ptm_core.finetune.recipe.load_finetuned"
        )
    knowledge_path = directory / KNOWLEDGE_CONFIG
    if not knowledge_path.is_file():
        raise CheckpointError(
            f"{knowledge_path}: missing; copy the whole final/ folder finetune_ernie_thu wrote"
        )
    options = json.loads(knowledge_path.read_text(encoding="utf-8"))
    entity_ids = options.pop("entity_ids", None) or []
    head_path = directory / TASK_HEAD_FILE
    stored = load_file(str(head_path)) if head_path.is_file() else {}
    table = stored.get("knowledge.entity_table", torch.zeros(len(entity_ids), 1))
    layers = options.pop("num_knowledge_layers")
    encoder = KnowledgeableEncoder(
        TransformerEncoder.from_pretrained(directory), table, layers, **options
    )
    model = build_ernie_task_model(
        encoder,
        record["kind"],
        record["num_labels"],
        float(record.get("dropout", 0.1)),
        label_names=record.get("label_names"),
        use_entities=bool(record.get("use_entities", True)),
        pool=cast(Pool, record.get("entity_pool", "mentions")),
    )
    expected = {
        **{
            f"knowledge.{k}": v
            for k, v in encoder.state_dict().items()
            if not k.startswith("text_encoder.")
        },
        **{f"head.{k}": v for k, v in model.head.state_dict().items()},
    }
    state = read_trained_state(
        head_path,
        expected,
        what="ERNIE-THU knowledge layers and task head",
        described=f"kind={record['kind']!r}, num_labels={record['num_labels']}, {KNOWLEDGE_CONFIG}",
        fix="copy task.json, knowledge_config.json and task_head.safetensors from the same run",
    )
    knowledge = {
        k.removeprefix("knowledge."): v for k, v in state.items() if k.startswith("knowledge.")
    }
    encoder.load_state_dict({**encoder.state_dict(), **knowledge})
    model.head.load_state_dict(
        {k.removeprefix("head."): v for k, v in state.items() if k.startswith("head.")}
    )
    return model.eval(), {**record, "entity_ids": entity_ids}


# ------------------------------------------------------------------------------ recipe


def _linked_data(
    task: TaskSpec,
    split: str,
    tokenizer: WordPieceTokenizer,
    entity_index: Mapping[str, int],
    kg: str | Path,
    label_names: Sequence[str] | None,
    *,
    path: str | Path | None = None,
    labelled: bool = True,
    linker_options: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
) -> TaskData:
    """A task file read by the core GLUE reader, linked (cached) and featurized for ERNIE."""
    if task.format != "glue" or task.kind not in ("classification", "regression"):
        raise ValueError(
            f"task {task.name}: ERNIE-THU fine-tuning reads GLUE-style classification or "
            f"regression files; this task is {task.kind} ({task.format}). Pick such a task "
            "(e.g. task=kg_entity_typing)"
        )
    file = path if path is not None else getattr(task, split)
    data = read_task(task, split, tokenizer, label_names, path=file, labelled=labelled)
    links = task_links(file, data.examples, kg, linker_options=linker_options, cache_dir=cache_dir)
    rows = LinkedRows(data.examples, links)
    kind = cast(Literal["classification", "regression"], task.kind)
    featurizer = ErnieFeaturizer(tokenizer, entity_index, task.max_length, kind=kind)
    return TaskData(rows, rows, featurizer, data.label_names, labelled=data.labelled)


def finetune_ernie_thu(
    task: TaskSpec,
    *,
    model_dir: str | Path,
    kg: str | Path,
    trainer: TrainerConfig,
    seed: int = 0,
    dropout: float = 0.1,
    use_entities: bool = True,
    pool: Pool = "mentions",
    linker_options: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
    num_workers: int = 0,
    provenance: Mapping[str, Any] | None = None,
) -> FinetuneResult:
    """Fine-tune a pre-trained ERNIE-THU ``final/`` on ``task`` and score its dev set.

    Args:
        task: a GLUE-style ``classification`` or ``regression`` task.
        model_dir: the ``final/`` of ``ptm pretrain experiment=ernie_thu_tiny`` (model,
            tokenizer, KG embedding table and its ``entity_ids``).
        kg: the KG folder the linker matches task text against (the pre-training's).
        trainer: core trainer settings.
        seed: batch order seed (the trainer's ``seed`` sets the head's init and dropout).
        dropout: head dropout.
        use_entities: False = the kg-free ablation (see :class:`ErnieTaskModel`).
        pool: ``"mentions"`` or ``"first"`` (see :class:`ErnieTaskModel`).
        linker_options: :class:`~ptm_knowledge.linking.EntityLinker` settings.
        cache_dir: where task links are cached (default :func:`default_links_dir`).
        num_workers: processes that featurize training batches.
        provenance: JSON-ready facts kept in ``task.json``.

    Returns:
        The core :class:`~ptm_core.finetune.recipe.FinetuneResult`; ``final/`` loads with
        :func:`load_ernie_task_model`, ``eval.json`` holds ``dev/<metric>``.
    """
    model_dir = Path(model_dir)
    if not (model_dir / KNOWLEDGE_CONFIG).is_file():
        raise FileNotFoundError(
            f"{model_dir / KNOWLEDGE_CONFIG}: not found; model_dir must be the final/ of an "
            "ERNIE-THU pre-training (ptm pretrain experiment=ernie_thu_tiny)"
        )
    task.check_files()
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    tokenizer = WordPieceTokenizer.from_directory(model_dir)
    encoder = KnowledgeableEncoder.from_pretrained(model_dir)
    entity_ids = json.loads((model_dir / KNOWLEDGE_CONFIG).read_text())["entity_ids"] or []
    index = {entity: i for i, entity in enumerate(entity_ids)}
    options = dict(linker_options or {})
    train = _linked_data(
        task, "train", tokenizer, index, kg, None, linker_options=options, cache_dir=cache_dir
    )
    dev = _linked_data(
        task, "dev", tokenizer, index, kg, train.label_names, linker_options=options,
        cache_dir=cache_dir,
    )  # fmt: skip
    coverage = {s: link_coverage(d.rows, index) for s, d in (("train", train), ("dev", dev))}
    print(f"{task.name}: linked {json.dumps(coverage)}")
    num_labels = 1 if task.kind == "regression" else len(train.label_names)
    model = build_ernie_task_model(
        encoder,
        task.kind,
        num_labels,
        dropout,
        label_names=train.label_names or None,
        use_entities=use_entities,
        pool=pool,
    )
    record = {
        "task": task.to_dict(),
        "kg": str(Path(kg).resolve()),
        "linker": options,
        "link_coverage": coverage,
        **({"provenance": dict(provenance)} if provenance else {}),
    }
    batches = TaskBatches(
        train.rows, train.featurizer, task.batch_size, seed=seed, num_workers=num_workers
    )
    return train_and_score(
        model,
        batches,
        trainer,
        save_final=lambda final: save_ernie_task_model(
            model, final, entity_ids=entity_ids, task_config=record, extra_writers=[tokenizer.save]
        ),
        score=lambda: evaluate_task(model, task, dev)[0],
        name=task.name,
        metric=str(task.metric),
    )


def predict_ernie(
    directory: str | Path,
    path: str | Path | None = None,
    *,
    labelled: bool = True,
    device: str = "cpu",
    cache_dir: str | Path | None = None,
    reinitialise: Callable[[nn.Module], None] | None = None,
) -> tuple[dict[str, float], list[Any]]:
    """Predict with an ERNIE-THU ``final/`` on a file of its task (default: its dev file).

    The file is linked against the KG ``task.json`` names (cached as in training).

    Args:
        directory: the run's ``final/``.
        path: a GLUE-style file of the task's columns.
        labelled: whether the file has a label column (metrics are empty without).
        device: where to run.
        cache_dir: the link cache (default :func:`default_links_dir`).
        reinitialise: applied to the loaded model first (``ptm evaluate``'s random-init
            baseline).

    Returns:
        ``(metrics, predictions)``: the task's metrics; label names (classification) or
        values (regression).
    """
    model, record = load_ernie_task_model(directory)
    if reinitialise is not None:
        reinitialise(model)
    model.to(device)
    task = TaskSpec.from_mapping(record["task"])
    tokenizer = WordPieceTokenizer.from_directory(directory)
    index = {entity: i for i, entity in enumerate(record["entity_ids"])}
    names = record.get("label_names") or None
    data = _linked_data(
        task,
        "dev",
        tokenizer,
        index,
        record["kg"],
        names,
        path=path,
        labelled=labelled,
        linker_options=record.get("linker"),
        cache_dir=cache_dir,
    )
    metrics, predictions = evaluate_task(model, task, data, device=torch.device(device))
    if task.kind == "classification" and names:
        predictions = [names[i] for i in predictions]
    return metrics, predictions


def is_ernie_finetuned(directory: str | Path) -> bool:
    """Whether ``directory`` is a ``final/`` of :func:`finetune_ernie_thu`."""
    path = Path(directory) / TASK_JSON
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("recipe") == RECIPE
    except (OSError, ValueError, AttributeError):
        return False


__all__ = [
    "POOLS",
    "RECIPE",
    "ErnieFeaturizer",
    "ErnieTaskModel",
    "LinkedExample",
    "LinkedRows",
    "build_ernie_task_model",
    "default_links_dir",
    "finetune_ernie_thu",
    "is_ernie_finetuned",
    "link_coverage",
    "load_ernie_task_model",
    "predict_ernie",
    "save_ernie_task_model",
    "task_links",
]
