"""XLM zero-shot cross-lingual transfer: fine-tune on English, score French and German.

    python -m benchmarks.xlm_zero_shot --seeds 0,1,2

The seeds' claim (Lample & Conneau, 2019, XNLI protocol at toy scale): a classifier
fine-tuned on one language transfers to another above chance, and MLM+TLM pre-training
transfers better than MLM-only. For each seed ``s``:

1. pre-train two tiny XLMs on the bundled en/fr/de sample with seed ``s`` (the settings of
   ``tests/multilingual/test_xlm_crosslingual.py``: ``--layers`` (1), 4 heads, 64 wide, 1500 steps of
   32 rows, lr 5e-3; MLM only vs 1 MLM : 2 TLM batches in all six directions). A run whose
   ``final/`` exists under the work folder is reused;
2. fine-tune each with :func:`ptm_multilingual.finetune.finetune_xlm_classifier` (seed
   ``s``) on ``data_specs/monolingual_corpus/classification/en.tsv`` and score ``fr.tsv``
   and ``de.tsv`` (zero-shot) and ``en.tsv``, in each ``--freeze`` mode, plus the same
   architecture at random init (``random_init=True``) as the no-pre-training reference;
3. the frozen-feature probe :func:`ptm_multilingual.zero_shot_transfer` on the same
   checkpoints (logistic regression on mean-pooled states, no fine-tuning).

Chance is the majority-class share of each dev set. Figures are mean ± sample std over the
seeds. Writes ``benchmarks/results/xlm_zero_shot.{md,json}`` unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchmarks.fixtures import BENCH_DIR, ROOT
from ptm_core.families.runner import PretrainRun, run_pretraining
from ptm_core.training import TrainerConfig
from ptm_multilingual import (
    SharedBPETokenizer,
    XLMEncoder,
    XLMMaskedLMObjective,
    xlm_text_encoder,
    zero_shot_transfer,
)
from ptm_multilingual.families import XLM
from ptm_multilingual.finetune import (
    XLMSentenceFeaturizer,
    evaluate_xlm_classifier,
    finetune_xlm_classifier,
    read_language_tsv,
)
from ptm_multilingual.settings import XLMData, XLMSettings

RESULTS = Path(__file__).resolve().parent / "results"
DATA = ROOT / "data_specs"
CLASSIFICATION = DATA / "monolingual_corpus" / "classification"
DIRECTIONS = ["en-fr", "fr-en", "en-de", "de-en", "de-fr", "fr-de"]
ARMS = {"mlm": 0, "mlm+tlm": 2}  # arm -> TLM batches per MLM batch
LANGS = ("en", "fr", "de")


def pretrain(
    work: Path,
    arm: str,
    seed: int,
    steps: int,
    layers: int = 1,
    *,
    monolingual: Path = DATA / "monolingual_corpus" / "sample",
    parallel: Path = DATA / "parallel_corpus" / "sample",
    directions: Sequence[str] = DIRECTIONS,
    vocab_size: int = 400,
    hidden: int = 64,
    learning_rate: float = 5e-3,
    tlm_steps: int | None = None,
) -> Path:
    """Pre-train (or reuse) one tiny XLM; returns its ``final/``.

    The keywords default to this benchmark's setting (the bundled en/fr/de sample);
    ``benchmarks/xlm_gain.py`` passes its generated corpora. ``tlm_steps`` overrides the
    arm's TLM batches per MLM batch (:data:`ARMS`).
    """
    run = work / f"{arm.replace('+', '-')}-s{seed}"
    if (run / "final" / "model.safetensors").exists():
        return run / "final"
    data = XLMData(
        corpus=str(monolingual),
        parallel=str(parallel),
        vocab_size=vocab_size,
        stream_length=32,
        max_length=48,
        batch_size=32,
        mlm_steps=1,
        tlm_steps=ARMS[arm] if tlm_steps is None or ARMS[arm] == 0 else tlm_steps,
        directions=list(directions),
    )
    result = run_pretraining(
        XLM,
        PretrainRun(
            settings=XLMSettings(data=data),
            model=partial(
                xlm_text_encoder,
                hidden_size=hidden,
                num_layers=layers,
                num_heads=4,
                max_positions=64,
                dropout=0.0,
                attention_dropout=0.0,
            ),
            objectives={"xlm_mlm": XLMMaskedLMObjective},
            weights={},
            trainer=TrainerConfig(
                output_dir=str(run),
                max_steps=steps,
                learning_rate=learning_rate,
                warmup_ratio=0.05,
                log_every=100,
                save_every=10 * steps,
                progress=False,
                device="cpu",
                seed=seed,
            ),
            seed=seed,
        ),
    )
    return result.encoder_dir


def finetune_once(
    model_dir: Path,
    out: Path,
    seed: int,
    freeze: str,
    random_init: bool,
    args: Any,
    *,
    train: tuple[Path, str] = (CLASSIFICATION / "en.tsv", "en"),
    dev: Mapping[str, Path] | None = None,
    extra: Mapping[str, tuple[Path, str]] | None = None,
) -> dict[str, float]:
    """One fine-tuning run; returns ``{lang: accuracy}`` and ``chance/<lang>``.

    ``train``/``dev`` default to this benchmark's en/fr/de classification files; ``extra``
    names more dev sets, ``name -> (file, lang)``, scored with the fine-tuned model (their
    keys join the returned ones, with ``chance/<name>``).
    """
    dev = dev if dev is not None else {lang: CLASSIFICATION / f"{lang}.tsv" for lang in LANGS}
    result = finetune_xlm_classifier(
        model_dir,
        train=train,
        dev=dev,
        trainer=TrainerConfig(
            output_dir=str(out),
            max_steps=args.steps,
            learning_rate=args.lr,
            warmup_ratio=0.1,
            log_every=50,
            save_every=10 * args.steps,
            progress=False,
            device="cpu",
            seed=seed,
            resume=False,
        ),
        batch_size=16,
        max_length=48,
        seed=seed,
        freeze=freeze,
        random_init=random_init,
    )
    metrics = result.final_metrics
    scores = {lang: float(metrics[f"dev/{lang}/accuracy"]) for lang in dev}
    scores.update({f"chance/{lang}": float(metrics[f"dev/{lang}/chance"]) for lang in dev})
    if extra:
        assert result.model is not None
        tokenizer = SharedBPETokenizer.from_directory(result.encoder_dir)
        names = read_language_tsv(train[0])[1]
        for name, (path, lang) in extra.items():
            rows = read_language_tsv(path, names)[0]
            featurizer = XLMSentenceFeaturizer(tokenizer, lang, 48)
            got, _ = evaluate_xlm_classifier(result.model, rows, featurizer)
            labels = [int(r.label or 0) for r in rows]
            scores[name] = float(got["accuracy"])
            scores[f"chance/{name}"] = max(labels.count(k) for k in set(labels)) / len(labels)
    return scores


def probe(model_dir: Path, seed: int) -> dict[str, float]:
    """The frozen-feature probe, en -> each language."""

    def load(lang: str) -> tuple[list[str], list[str], str]:
        lines = (CLASSIFICATION / f"{lang}.tsv").read_text(encoding="utf-8").splitlines()
        labels, texts = zip(*(line.split("\t") for line in lines if line.strip()), strict=True)
        return list(texts), list(labels), lang

    encoder = XLMEncoder.from_pretrained(model_dir)
    tokenizer = SharedBPETokenizer.from_directory(model_dir)
    scores = {}
    for lang in LANGS:
        got = zero_shot_transfer(encoder, tokenizer, load("en"), load(lang), seed=seed)
        scores[lang] = got["test_accuracy"]
    return scores


def mean_std(values: Sequence[float]) -> dict[str, Any]:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std, "values": list(values)}


def fmt(cell: dict[str, Any]) -> str:
    return f"{100 * cell['mean']:.1f} ± {100 * cell['std']:.1f}"


def report(rows: list[dict[str, Any]], chance: dict[str, float], args: Any) -> str:
    lines = [
        "# XLM zero-shot cross-lingual transfer (tiny, bundled en/fr/de sample)",
        "",
        f"Command: `python -m benchmarks.xlm_zero_shot --seeds {args.seeds} "
        f"--pretrain-steps {args.pretrain_steps} --layers {args.layers} --steps {args.steps} "
        f"--lr {args.lr} --freeze {args.freeze}`",
        "",
        "Classifier trained on en only (120 sentences, animal vs person); accuracy (%) on each "
        f"language, mean ± std over seeds {args.seeds} (pre-training and fine-tuning seed). "
        f"Chance (majority class): en {100 * chance['en']:.1f}, fr {100 * chance['fr']:.1f}, "
        f"de {100 * chance['de']:.1f}. en is the training set itself.",
        "",
        "| pre-training | protocol | en | fr (zero-shot) | de (zero-shot) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['arm']} | {row['protocol']} | {fmt(row['en'])} | {fmt(row['fr'])} "
            f"| {fmt(row['de'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--pretrain-steps", type=int, default=1500)
    parser.add_argument("--layers", type=int, default=1, help="pre-trained layers")
    parser.add_argument("--steps", type=int, default=150, help="fine-tuning steps")
    parser.add_argument("--lr", type=float, default=2e-3, help="fine-tuning peak lr")
    parser.add_argument("--freeze", default="none,embeddings")
    parser.add_argument("--work", type=Path, default=BENCH_DIR / "xlm-zero-shot")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    freezes = args.freeze.split(",")
    raw: dict[tuple[str, str], list[dict[str, float]]] = {}
    chance: dict[str, float] = {}
    start = time.time()
    for seed in seeds:
        for arm in ARMS:
            final = pretrain(args.work, arm, seed, args.pretrain_steps, args.layers)
            print(f"[{time.time() - start:.0f}s] pre-trained {arm} seed {seed}", flush=True)
            for freeze in freezes:
                out = args.work / "ft" / f"{arm.replace('+', '-')}-{freeze}-s{seed}"
                scores = finetune_once(final, out, seed, freeze, False, args)
                chance = {lang: scores[f"chance/{lang}"] for lang in LANGS}
                raw.setdefault((arm, f"fine-tune, freeze={freeze}"), []).append(scores)
                print(f"  {arm} freeze={freeze}: {scores}", flush=True)
            raw.setdefault((arm, "frozen probe"), []).append(probe(final, seed))
        out = args.work / "ft" / f"random-s{seed}"
        final = args.work / f"mlm-tlm-s{seed}" / "final"
        scores = finetune_once(final, out, seed, "none", True, args)
        raw.setdefault(("random init", "fine-tune, freeze=none"), []).append(scores)
        print(f"  random init: {scores}", flush=True)
    rows = [
        {
            "arm": arm,
            "protocol": protocol,
            **{lang: mean_std([r[lang] for r in runs]) for lang in LANGS},
        }
        for (arm, protocol), runs in raw.items()
    ]
    text = report(rows, chance, args)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "xlm_zero_shot.md").write_text(text, encoding="utf-8")
        payload = {"args": {k: str(v) for k, v in vars(args).items()}, "chance": chance}
        payload["rows"] = rows
        (RESULTS / "xlm_zero_shot.json").write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
