"""``ptm finetune model=<a CoVe final/> task=...``: a classifier or tagger on ``[GloVe; CoVe]``.

The cove family's ``finetune`` hook. Classification tasks get ptm's BiLSTM-max
:class:`~ptm_classic.finetune.word_classifier.WordClassifier` (the paper's BCN is a
biattentive variant of it), tagging tasks the BiLSTM(-CRF)
:class:`~ptm_classic.finetune.taglm.TagLMTagger`; both read
:class:`~ptm_classic.cove.features.CoVeWordFeatures` with the GloVe rows and the MT-LSTM
frozen. ``final/`` is a word-model folder (:mod:`ptm_classic.finetune.taglm_io`) that holds
the MT-LSTM too; :func:`load_cove_task_model` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from ptm_classic.cove.features import CoVeWordFeatures
from ptm_classic.cove.mt_lstm import MTLSTM
from ptm_classic.cove.translation import load_cove
from ptm_classic.finetune.taglm import TagLMTagger, WordBatches
from ptm_classic.finetune.taglm_io import JSON_FILE, VOCAB_FILE, WEIGHTS_FILE, save_word_model
from ptm_classic.finetune.word_classifier import WordClassifier
from ptm_classic.finetune.word_features import StaticWordEmbedding
from ptm_classic.settings import CoVeSettings
from ptm_classic.static.corpus import split_words
from ptm_core.checkpoints import CheckpointError
from ptm_core.seeding import derive_seed

#: ``config.json``'s ``ptm_format`` in a CoVe fine-tune's ``final/``.
TASK_FORMAT = "ptm-cove-task/1"
TaskWords = tuple[list[list[str]], list[Any], list[str]]


def task_words(task: Any, split: str, label_names: Sequence[str] | None = None) -> TaskWords:
    """``(sentences as words, labels, label names)`` of a task file (``split``: train/dev).

    Classification text is split as the GloVe tables are (lower-cased words and punctuation;
    a pair's two texts are joined); tagging keeps the file's words (the table is looked up
    as written, then lower-cased).

    Raises:
        ValueError: a task kind other than classification or tagging.
    """
    path = getattr(task, split)
    if task.kind == "tagging":
        from ptm_core.finetune.data.conll import read_conll

        records = read_conll(path, label_names=label_names)
        names = list(records.label_names)
        rows = list(records)
        return [list(r.words) for r in rows], [list(r.tags) for r in rows], names
    if task.kind == "classification":
        from ptm_core.finetune.data.glue import read_glue

        table = read_glue(
            path,
            text_fields=task.text_fields,
            label_field=task.label_field,
            label_names=label_names,
        )
        rows = list(table)
        sentences = [split_words(" ".join(t for t in (r.text, r.pair) if t)) for r in rows]
        return sentences, [int(r.label) for r in rows], list(table.label_names)
    raise ValueError(
        f"task {task.name}: kind {task.kind!r}; CoVe's word features fine-tune "
        "classification and tagging tasks (e.g. task=gain_sentiment, task=gain_ner)"
    )


def score_words(model: Any, sentences: list[list[str]], gold: list[Any], names: list[str]) -> Any:
    """Dev metrics of a word classifier (``accuracy``) or tagger (seqeval ``f1``, ...), and
    the predictions."""
    from ptm_core.finetune.metrics import tagging_metrics

    model.eval()
    predictions: list[Any] = []
    with torch.no_grad():
        for begin in range(0, len(sentences), 64):
            chunk = sentences[begin : begin + 64]
            predictions += model.tag(chunk) if model.kind == "tagging" else model.predict(chunk)
    model.train()
    if model.kind == "tagging":
        tags = [[names[t] for t in row] for row in predictions]
        return tagging_metrics(tags, [[names[t] for t in row] for row in gold]), tags
    correct = sum(p == g for p, g in zip(predictions, gold, strict=True))
    return {"accuracy": correct / len(gold)}, [names[p] for p in predictions]


def finetune_cove(run: Any) -> Any:
    """The cove family's ``finetune`` hook (``ptm finetune model=<CoVe final/>
    task=gain_sentiment``; ``+cove.inputs=glove`` is the GloVe-alone baseline).

    Args:
        run: a :class:`~ptm_core.families.runner.FinetuneRun`; ``settings`` a
            :class:`~ptm_classic.settings.CoVeSettings` (``task``, ``finetune``: ``lstm_hidden``,
            ``dropout``, ``random_init`` = an MT-LSTM from random init; ``cove``).

    Returns:
        :class:`~ptm_core.finetune.scoring.FinetuneResult`; ``eval.json`` has the dev metrics.

    Raises:
        ValueError: no ``init_from``, or a ``finetune`` switch these models do not have.
    """
    from ptm_core.finetune.scoring import train_and_score
    from ptm_core.finetune.task_spec import TaskSpec

    settings: CoVeSettings = run.settings
    task = TaskSpec.from_mapping(settings.task)
    task.check_files()
    if not run.init_from:
        raise ValueError(
            "init_from: CoVe's features come from a trained MT-LSTM; give model=<the final/ "
            "of ptm pretrain experiment=cove_tiny>"
        )
    options = settings.finetune
    if options.peft != "none":
        raise ValueError(
            f"finetune.peft={options.peft} is not supported for a CoVe model ({run.init_from}): "
            "the MT-LSTM stays frozen and only the task model trains; set finetune.peft=none"
        )
    for key in ("feature_based", "text_to_text"):
        if getattr(options, key):
            raise ValueError(
                f"finetune.{key}=true is not supported for a CoVe model ({run.init_from}); "
                "drop it (CoVe is always feature-based: the MT-LSTM is frozen)"
            )
    train, train_labels, names = task_words(task, "train")
    dev, dev_labels, _ = task_words(task, "dev", names)
    translation = load_cove(run.init_from)
    mtlstm = translation.encoder
    if options.random_init:
        torch.manual_seed(derive_seed(run.seed, "random-mtlstm"))
        mtlstm = MTLSTM(mtlstm.input_size, mtlstm.hidden_size)
    torch.manual_seed(derive_seed(run.trainer.seed, "task-head"))
    features = CoVeWordFeatures(
        translation.glove, mtlstm, inputs=settings.cove.inputs, layers=settings.cove.layers
    )
    model: TagLMTagger | WordClassifier
    common: dict[str, Any] = {
        "label_names": names,
        "lstm_hidden": options.lstm_hidden,
        "dropout": options.dropout,
    }
    if task.kind == "tagging":
        model = TagLMTagger(features, len(names), crf=settings.cove.crf, **common)
    else:
        model = WordClassifier(features, len(names), **common)
    record = {
        "task": task.to_dict(),
        "cove_source": str(run.init_from),
        "random_init": options.random_init,
    }
    # config.json says what the folder is (every fine-tuned final/ has one); taglm.json and
    # taglm.safetensors hold the model.
    config = {"ptm_format": TASK_FORMAT, "model_type": "cove_word_model", "kind": task.kind}
    extra = {"config.json": json.dumps(config, indent=2) + "\n"}
    data = WordBatches(model.encode, train, train_labels, batch_size=task.batch_size, seed=run.seed)
    return train_and_score(
        model,
        data,
        run.trainer,
        save_final=lambda directory: save_word_model(
            model, directory, task_config=record, extra_files=extra
        ),
        score=lambda: score_words(model, dev, dev_labels, names),
        name=task.name,
        metric=str(task.metric),
    )


def load_cove_task_model(directory: str | Path) -> TagLMTagger | WordClassifier:
    """Read the ``final/`` of a CoVe fine-tune (:func:`finetune_cove`), in eval mode.

    Raises:
        CheckpointError: a missing or damaged file, naming it and the fix.
    """
    path = Path(directory)
    json_path = path / JSON_FILE
    try:
        record = json.loads(json_path.read_text(encoding="utf-8"))
        spec = record["features"]["cove"]
        vocab = (path / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{path}: not a CoVe fine-tuned folder ({exc}); copy the whole final/ of "
            "`ptm finetune model=<CoVe final/> task=...`"
        ) from None
    glove = StaticWordEmbedding(vocab, torch.zeros(len(vocab), int(spec["input_size"])))
    mtlstm = MTLSTM(int(spec["input_size"]), int(spec["hidden_size"]))
    features = CoVeWordFeatures(glove, mtlstm, inputs=spec["inputs"], layers=spec["layers"])
    settings, names = record["settings"], record["label_names"]
    model: TagLMTagger | WordClassifier
    if record["kind"] == "tagging":
        model = TagLMTagger(
            features,
            len(names),
            label_names=names,
            crf=bool(settings["crf"]),
            constraint=settings["constraint"],
            lstm_hidden=int(settings["lstm_hidden"]),
            lstm_layers=int(settings["lstm_layers"]),
            dropout=float(settings["dropout"]),
        )
    else:
        model = WordClassifier(
            features,
            len(names),
            label_names=names,
            lstm_hidden=int(settings["lstm_hidden"]),
            dropout=float(settings["dropout"]),
        )
    state = load_file(str(path / WEIGHTS_FILE))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(
            f"{path / WEIGHTS_FILE}: does not fit {json_path} (missing {missing[:4]}, "
            f"unexpected {unexpected[:4]}); copy both files from one save"
        )
    return model.eval()


__all__ = ["finetune_cove", "load_cove_task_model", "score_words", "task_words"]
