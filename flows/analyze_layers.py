"""``ptm analyze MODEL layers``: linear probes on every layer, with control tasks.

:func:`layers` reads labelled spans (CoNLL word tags, or KG mentions typed by their
entity), pools each span's frozen states at every representation of the model (and of
``compare``, or of the same architecture at random init), trains the per-layer, scalar-mix
and control probes of :mod:`ptm_core.analysis.layer_probes` for each seed, and writes
``layers.json``, ``layers.md`` and ``layers.png`` into one output folder.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from flows.analyze import KIND
from flows.analyze_layers_report import layers_markdown, plot_layers

if TYPE_CHECKING:
    from ptm_core.analysis.layer_features import Pooling

logger = logging.getLogger(__name__)

#: The ``compare`` value that probes the model's own architecture at random init.
RANDOM_INIT = "random-init"


def load_layer_encoder(
    folder: str | Path, *, random_init_seed: int | None = None
) -> tuple[torch.nn.Module, Any, int]:
    """``(encoder, tokenizer backend, pad id)`` of a model folder, for frozen features.

    A ptm ``final/`` of a text family with one encoder (BERT, RoBERTa, ALBERT, ELECTRA,
    SpanBERT, ERNIE-Baidu, KEPLER, WKLM, ModernBERT, XLNet; ERNIE-THU with its knowledge
    layers and no entity inputs) or a Hugging Face folder :func:`load_encoder` reads.

    Args:
        folder: the model folder.
        random_init_seed: keep the architecture and tokenizer, re-initialise every weight
            from this seed (the "same model from random init" baseline).

    Raises:
        ValueError / CheckpointError / FileNotFoundError: the folder is not one (names it).
    """
    from ptm_core.checkpoints import read_json_object
    from ptm_core.checkpoints.encoder import load_encoder
    from ptm_core.encoders.factory import encoder_from_config
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_knowledge.probing.models import ERNIE_THU

    directory = Path(folder)
    kind = read_json_object(directory / "config.json").get("ptm_model")
    encoder: torch.nn.Module
    if kind == ERNIE_THU:
        from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

        if random_init_seed is not None:
            raise ValueError(
                f"{directory}: an ERNIE-THU folder has no random-init baseline here; compare "
                "with --compare <a text model's folder>"
            )
        encoder = KnowledgeableEncoder.from_pretrained(directory)
    else:
        encoder = load_encoder(directory)
        if random_init_seed is not None:
            torch.manual_seed(random_init_seed)
            encoder = encoder_from_config(encoder.config)
    tokenizer = load_task_tokenizer(directory)
    return encoder.eval(), tokenizer.backend, int(tokenizer.vocab_info.pad_id)


def _label_texts(
    conll: str | Path | None,
    column: int,
    kg: str | Path | None,
    text: str | Path | None,
    test_conll: str | Path | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    if (conll is None) == (kg is None):
        raise ValueError("give the labels: --conll FILE (word tags) or --kg DIR --text FILE")
    if test_conll is not None and conll is None:
        raise ValueError("--test-conll goes with --conll (the train and dev sentences)")
    if conll is not None:
        from ptm_core.analysis.probe_labels import conll_texts

        texts = conll_texts(conll, column)
        info: dict[str, Any] = {"kind": "conll", "file": str(conll), "column": column}
        if test_conll is not None:
            info.update(test_file=str(test_conll), test_from=len(texts))
            texts += conll_texts(test_conll, column)
        return texts, info
    if text is None:
        raise ValueError("--kg needs --text FILE: the text whose KG mentions are probed")
    from ptm_knowledge.probing.entity_types import entity_type_texts

    assert kg is not None  # one of conll and kg is given (checked above)
    typed, counts = entity_type_texts(kg, text)
    return typed, {"kind": "kg", "kg": str(kg), "text": str(text), **counts}


def _device(name: str) -> torch.device:
    from ptm_core.training.trainer import resolve_device

    try:
        return resolve_device(name)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(
            f"--device {name!r}: {exc}".replace("trainer.device=", "--device ")
        ) from None


def _sample(texts: list[Any], labels: dict[str, Any], limit: int) -> tuple[list[Any], dict]:
    """At most ``limit`` texts of each part (train file, test file), a seeded sample in order."""
    import random

    if limit < 1:
        raise ValueError(f"--max-texts is {limit}; give 1 or more")
    cut = labels.get("test_from", len(texts))
    kept = []
    for part in (range(cut), range(cut, len(texts))):
        chosen = part if len(part) <= limit else random.Random(0).sample(part, limit)
        kept.append(sorted(chosen))
    if "test_from" in labels:
        labels = {**labels, "test_from": len(kept[0])}
    labels = {**labels, "texts_total": len(texts), "max_texts": limit}
    return [texts[i] for i in kept[0] + kept[1]], labels


def layers(
    model: str | Path,
    output: str | Path,
    *,
    conll: str | Path | None = None,
    column: int = -1,
    test_conll: str | Path | None = None,
    kg: str | Path | None = None,
    text: str | Path | None = None,
    compare: str | Path | None = None,
    pooling: str = "first",
    seeds: tuple[int, ...] = (0,),
    settings: Any = None,
    batch_size: int = 32,
    max_texts: int | None = None,
    device: str = "auto",
    overwrite: bool = False,
) -> dict[str, Any]:
    """Layer probes of ``model`` (and ``compare``) on the labels of ``conll`` or ``kg``.

    Args:
        model: a model folder (:func:`load_layer_encoder`).
        output: the folder to write (``overwrite`` replaces an earlier analysis only).
        conll: a CoNLL file; ``column`` is the label's column (1 = the second, -1 = last).
        column: see ``conll``.
        test_conll: a CoNLL file whose sentences are the test split (the ``conll`` file's
            are then split into train and dev only).
        kg: a KG folder with entity types; ``text`` is the text its mentions are found in.
        text: see ``kg``.
        compare: a second model folder, or ``"random-init"`` for ``model``'s architecture
            re-initialised (with each seed).
        pooling: ``"first"`` piece of a span, or the ``"mean"`` of its pieces.
        seeds: one probe run per seed (split, control labels, probe init, random init).
        settings: a :class:`~ptm_core.analysis.layer_probes.ProbeSettings`.
        batch_size: texts per forward pass.
        max_texts: probe a seeded sample of at most this many texts (of each file with
            ``test_conll``): the features of every span at every layer are held in memory
            (spans x (layers + 1) x hidden x 4 bytes, twice for the scalar mix).
        device: where the model runs: ``auto`` (CUDA when present), ``cpu``, ``cuda[:N]``;
            the probes are small and train on the CPU.
        overwrite: replace an earlier ``ptm analyze`` output at ``output``.

    Returns:
        ``{"models": [{"model", "runs", "summary", "dropped"}, ...], "labels": ...,
        "output": ..., "markdown": ...}``.
    """
    from ptm_core.analysis.layer_features import span_features
    from ptm_core.analysis.layer_probes import ProbeSettings, mean_and_std, probe_layers
    from ptm_core.atomic import atomic_directory, check_output_directory

    out = Path(output)
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    if not seeds:
        raise ValueError("give at least one seed (--seeds 0,1,2)")
    settings = settings or ProbeSettings()
    where = _device(device)
    texts, labels = _label_texts(conll, column, kg, text, test_conll)
    if max_texts is not None:
        texts, labels = _sample(texts, labels, max_texts)
    arms: list[tuple[str, str | Path, bool]] = [(str(model), model, False)]
    if compare is not None:
        if str(compare) == RANDOM_INIT:
            arms.append((f"{model} (random init)", model, True))
        else:
            arms.append((str(compare), compare, False))
    models = []
    for name, folder, random_init in arms:
        runs = []
        features = None
        for seed in seeds:
            if features is None or random_init:
                encoder, backend, pad_id = load_layer_encoder(
                    folder, random_init_seed=seed if random_init else None
                )
                features = span_features(
                    encoder,
                    backend,
                    texts,
                    pad_id=pad_id,
                    pooling=cast("Pooling", pooling),
                    batch_size=batch_size,
                    device=where,
                )
            logger.info("%s, seed %d: %d spans", name, seed, len(features.labels))
            probed = probe_layers(
                features, seed=seed, settings=settings, test_from=labels.get("test_from")
            )
            runs.append({"seed": seed, **probed})
        assert features is not None
        models.append(
            {
                "model": name,
                "random_init": random_init,
                "spans": len(features.labels),
                "dropped": features.dropped,
                "runs": runs,
                "summary": mean_and_std(runs),
            }
        )
    record = {
        "labels": labels,
        "pooling": pooling,
        "seeds": list(seeds),
        "settings": asdict(settings),
        "models": models,
    }
    markdown = layers_markdown(record)
    with atomic_directory(
        out, kind=KIND, overwrite=overwrite, option="--overwrite", legacy=False
    ) as tmp:
        (tmp / "layers.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        plot_layers(record, tmp / "layers.png")
        (tmp / "layers.md").write_text(markdown, encoding="utf-8")
    return {**record, "output": str(out), "markdown": markdown}
