"""XNLG's claim on two generated languages: zero-shot generation needs stage 2.

    python -m benchmarks.xnlg_gain --seeds 0,1,2 --threads 1
    python -m benchmarks.xnlg_gain --render            # rewrite the markdown from the json

The claim (Chi et al., 2020): fine-tune generation in one language, generate in another
zero-shot; decoder pre-training (stage 2: XAE + DAE under the frozen stage-1 encoder) is
what lets the decoder write the second language. Setting: ``data_specs/xlm_gain``'s ``xa``
(English-like) and ``xb`` (its relexification in Greek letters, no shared token) and the
headline task of ``data_specs/xnlg_gain`` (source sentence -> "subject verb object"),
fine-tuned on ``xa`` only; ``dev.xb`` is scored zero-shot against ``xb`` references.

For each seed ``s``:

1. stage 1: one tiny XLM, MLM + TLM on the generated corpora
   (:func:`benchmarks.xlm_zero_shot.pretrain`, both directions), shared by both arms;
2. **XNLG**: stage 2 through the ``xnlg`` family's plan (decoder from the encoder, encoder
   frozen, XAE both directions + DAE with the reference's noise), then fine-tuning as the
   reference's zero-shot recipe (``train=encoder_layers``);
3. **no stage 2**: the same stage-1 encoder and a decoder started from it (as stage 2
   starts), fine-tuned on ``xa`` with every parameter trained (``train=all``: it has to
   learn cross-attention during fine-tuning; training only the encoder layers would leave
   its cross-attention random);
4. each fine-tuned model generates (greedy) for ``dev.xa`` and ``dev.xb``; BLEU (sacrebleu)
   and ROUGE-L F1 (rouge-score) against the references; plus the share of ``xb`` outputs
   written in ``xb``'s script (Greek letters), which says whether the decoder wrote the
   language it was asked for.

Figures are mean ± sample std over seeds. Each invocation is appended to the ``runs`` of
``benchmarks/results/xnlg_gain.json``; the markdown shows the latest.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchmarks.fixtures import BENCH_DIR, ROOT
from benchmarks.xlm_gain import ensure_data
from benchmarks.xlm_zero_shot import RESULTS, pretrain
from ptm_core.families.runner import PretrainRun, run_pretraining
from ptm_core.training import TrainerConfig
from ptm_multilingual.families import XNLG
from ptm_multilingual.settings import XLMData
from ptm_multilingual.tokenizer import SharedBPETokenizer
from ptm_multilingual.xnlg import XNLGModel, XNLGObjective
from ptm_multilingual.xnlg.finetune import finetune_generation
from ptm_multilingual.xnlg.pretraining import build_stage2_model
from ptm_multilingual.xnlg.settings import XNLGFinetune, XNLGOptions, XNLGSettings

TASK = ROOT / "data_specs" / "xnlg_gain" / "task"
A, B = "xa", "xb"
ARMS = ("XNLG (stage 1 + stage 2)", "no stage 2 (stage 1 + decoder)")
METRICS = ("bleu", "rougeL", "script")


def greek_share(texts: list[str]) -> float:
    """Share of outputs whose letters are all Greek (xb's script), in percent."""

    def greek(text: str) -> bool:
        letters = [c for c in text if c.isalpha()]
        return bool(letters) and all("\u0370" <= c <= "\u03ff" for c in letters)

    return 100.0 * sum(greek(t) for t in texts) / max(len(texts), 1)


def trainer(out: Path, steps: int, lr: float, seed: int) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(out),
        max_steps=steps,
        learning_rate=lr,
        warmup_ratio=0.05,
        log_every=50,
        save_every=10 * steps,
        progress=False,
        device="cpu",
        seed=seed,
    )


def settings_for(data: Path, args: Any, *, freeze: bool = True) -> XNLGSettings:
    return XNLGSettings(
        data=XLMData(
            corpus=str(data / "mono"),
            parallel=str(data / "parallel"),
            max_length=48,
            batch_size=32,
            batches_per_epoch=1000,
        ),
        xnlg=XNLGOptions(decoder_layers=args.decoder_layers, freeze_encoder=freeze),
    )


def stage2(stage1: Path, out: Path, data: Path, args: Any, seed: int) -> Path:
    if (out / "final" / "model.safetensors").exists():
        return out / "final"
    settings = settings_for(data, args)
    result = run_pretraining(
        XNLG,
        PretrainRun(
            settings=settings,
            model=None,
            objectives={"xnlg": partial(XNLGObjective)},
            weights={"xnlg": 1.0},
            trainer=trainer(out, args.stage2_steps, args.stage2_lr, seed),
            seed=seed,
            init_from=str(stage1),
        ),
    )
    return Path(result.encoder_dir)


def tune(model: XNLGModel, tok: SharedBPETokenizer, out: Path, part: str, args: Any, seed: int):
    options = XNLGFinetune(
        train_file=str(TASK / f"train.{A}.tsv"),
        train_lang=A,
        dev={A: str(TASK / f"dev.{A}.tsv"), B: str(TASK / f"dev.{B}.tsv")},
        batch_size=16,
        max_source_length=48,
        max_target_length=16,
        train=part,
        bleu_max_order=2,  # 2-3 word headlines: corpus BLEU-4 is 0 without a 4-gram
    )
    torch.manual_seed(seed)
    result = finetune_generation(
        model, tok, options, trainer(out, args.steps, args.lr, seed), seed=seed
    )
    scores = {}
    for lang in (A, B):
        for name in ("bleu", "rougeL"):
            scores[f"{lang}/{name}"] = result.final_metrics[f"dev/{lang}/{name}"]
        scores[f"{lang}/script"] = greek_share(result.generations[lang])
    scores["examples"] = {lang: result.generations[lang][:3] for lang in (A, B)}
    return scores


def mean_std(values: list[float]) -> dict[str, Any]:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std, "values": values}


def report(payload: dict[str, Any]) -> str:
    latest = payload["runs"][-1]
    lines = [
        "# XNLG: zero-shot generation in a second language (generated xa/xb, headline task)",
        "",
        "`" + latest["command"] + "`",
        "",
        f"Seeds {latest['seeds']}; {latest['minutes']:.1f} min on {latest['threads']} thread(s). "
        "Fine-tuned on `xa` only; `xb` is zero-shot. BLEU-2 (sacrebleu, 13a, lowercased; the "
        "headlines have 2-3 words, so corpus BLEU-4 is 0 whenever no output has a 4-gram) and "
        "ROUGE-L F1 (rouge-score, whitespace tokens) in %, mean ± sample std over seeds; "
        "`xb script` = share of `xb` outputs written in Greek letters (`xb`'s script).",
        "",
        "| arm | fine-tuned | xa BLEU-2 | xa ROUGE-L | **xb BLEU-2 (zero-shot)** | **xb ROUGE-L** | xb script |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in latest["rows"]:
        cells = [
            f"{row[k]['mean']:.1f} ± {row[k]['std']:.1f}"
            for k in ("xa/bleu", "xa/rougeL", "xb/bleu", "xb/rougeL", "xb/script")
        ]
        lines.append(f"| {row['arm']} | {row['train']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Per-seed xb BLEU-2: "
        + "; ".join(
            f"{row['arm']}: {', '.join(f'{v:.1f}' for v in row['xb/bleu']['values'])}"
            for row in latest["rows"]
        ),
    ]
    lines += ["", "Examples (seed 0, first dev rows):", ""]
    for row in latest["rows"]:
        for lang in (A, B):
            shown = " / ".join(row["examples"][lang])
            lines.append(f"- {row['arm']}, {lang}: {shown}")
    lines += ["", "## Settings", "", "```json", json.dumps(latest["settings"], indent=2), "```"]
    if payload.get("notes"):
        lines += ["", "## Notes", "", payload["notes"].strip()]
    lines += ["", "## Runs", ""]
    for run in payload["runs"]:
        ours, base = run["rows"][0], run["rows"][1]
        gain = {k: ours[k]["mean"] - base[k]["mean"] for k in ("xb/bleu", "xb/rougeL")}
        lines.append(
            f"- {run['date']}: `{run['command']}`: xb BLEU gain {gain['xb/bleu']:+.1f}, "
            f"xb ROUGE-L gain {gain['xb/rougeL']:+.1f}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--stage1-steps", type=int, default=400)
    parser.add_argument("--stage2-steps", type=int, default=300)
    parser.add_argument("--steps", type=int, default=150, help="fine-tuning steps")
    parser.add_argument("--lr", type=float, default=1e-3, help="fine-tuning peak lr")
    parser.add_argument("--stage2-lr", type=float, default=2e-3)
    parser.add_argument("--layers", type=int, default=2, help="encoder layers")
    parser.add_argument("--decoder-layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=600)
    parser.add_argument("--mono", type=int, default=3000, help="sentences per language")
    parser.add_argument("--parallel", type=int, default=3000, help="sentence pairs")
    parser.add_argument("--work", type=Path, default=BENCH_DIR / "xnlg-gain")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--notes-file", type=Path)
    parser.add_argument("--render", action="store_true")
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    path = RESULTS / "xnlg_gain.json"
    if args.render:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if args.notes_file:
            payload["notes"] = args.notes_file.read_text(encoding="utf-8")
            path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        (RESULTS / "xnlg_gain.md").write_text(report(payload), encoding="utf-8")
        return payload
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    start = time.time()
    data = ensure_data(args.work, args.mono, args.parallel, "mild")
    # Stage 1 is shared by every run of the same encoder settings; stage 2 and the
    # fine-tunes are keyed by their own.
    encoder_key = f"{args.stage1_steps}-{args.layers}-{args.hidden}-{args.vocab_size}"
    stage1_work = args.work / f"{data.name}-s1-{encoder_key}"
    work = stage1_work / f"s2-{args.stage2_steps}-{args.decoder_layers}-{args.stage2_lr:g}"
    raw: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for seed in seeds:
        stage1 = pretrain(
            stage1_work,
            "mlm+tlm",
            seed,
            args.stage1_steps,
            args.layers,
            monolingual=data / "mono",
            parallel=data / "parallel",
            directions=[f"{A}-{B}", f"{B}-{A}"],
            vocab_size=args.vocab_size,
            hidden=args.hidden,
            learning_rate=5e-3,
            tlm_steps=2,
        )
        print(f"[{time.time() - start:.0f}s] stage 1 seed {seed}", flush=True)
        final = stage2(stage1, work / f"stage2-s{seed}", data, args, seed)
        print(f"[{time.time() - start:.0f}s] stage 2 seed {seed}", flush=True)
        tok = SharedBPETokenizer.from_directory(final)
        runs = [
            (ARMS[0], "encoder_layers", XNLGModel.from_pretrained(final)),
            (
                ARMS[1],
                "all",
                build_stage2_model(stage1, settings_for(data, args, freeze=False), seed)[0],
            ),
        ]
        for arm, part, model in runs:
            out = work / "ft" / f"{arm.split()[0]}-{part}-s{seed}-{args.steps}-{args.lr:g}"
            scores = tune(model, tok, out, part, args, seed)
            raw.setdefault((arm, part), []).append(scores)
            shown = {k: round(v, 1) for k, v in scores.items() if k != "examples"}
            print(f"[{time.time() - start:.0f}s] {arm} seed {seed}: {shown}", flush=True)
    rows = []
    for (arm, part), runs in raw.items():
        row: dict[str, Any] = {"arm": arm, "train": part, "examples": runs[0]["examples"]}
        for lang in (A, B):
            for name in METRICS:
                row[f"{lang}/{name}"] = mean_std([r[f"{lang}/{name}"] for r in runs])
        rows.append(row)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    latest = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["python -m benchmarks.xnlg_gain", *given]),
        "seeds": seeds,
        "threads": args.threads,
        "minutes": (time.time() - start) / 60,
        "settings": settings,
        "rows": rows,
    }
    payload = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    payload["runs"].append(latest)
    if args.notes_file:
        payload["notes"] = args.notes_file.read_text(encoding="utf-8")
    text = report(payload)
    print(text)
    if not args.no_write:
        path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (RESULTS / "xnlg_gain.md").write_text(text, encoding="utf-8")
    return payload


if __name__ == "__main__":
    main()
