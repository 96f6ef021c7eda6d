"""XLM's claim on two generated languages that share no token: TLM gives zero-shot transfer.

    python -m benchmarks.xlm_gain --seeds 0,1,2 --threads 1   # run 4 of results/xlm_gain.md
    python -m benchmarks.xlm_gain --render --notes-file NOTES.md   # rewrite the markdown only

The seeds' claim (Lample & Conneau, 2019): a classifier fine-tuned on one language transfers
to another above chance, and MLM+TLM pre-training transfers better than MLM-only. The bundled
en/fr/de sample is too small to teach alignment (``benchmarks/xlm_zero_shot.py``: every arm at
chance), so this benchmark uses the generated setting of ``data_specs/xlm_gain``: language
``xa`` (English-like) and ``xb`` (its word-for-word relexification in Greek letters, another
word order), no shared token, monolingual corpora per language and a parallel corpus. With
disjoint vocabularies MLM alone has no anchor between the languages; TLM on the parallel
pairs is the only thing that can align them.

For each seed ``s`` (pre-training and fine-tuning seed):

1. generate the corpora once (``make_data.py``, cached under ``--work`` by the generator's
   fingerprint; the task files are the committed ones);
2. pre-train two tiny XLMs with :func:`benchmarks.xlm_zero_shot.pretrain` on the same
   corpora: MLM only (the parallel sides feed the MLM streams too) vs MLM + TLM
   (``--tlm-steps`` TLM batches per MLM batch, both directions);
3. fine-tune each with :func:`ptm_multilingual.finetune.finetune_xlm_classifier` on
   ``task/train.xa.tsv`` (xa only) and score ``dev.xa`` / ``dev.xb`` (new sentences, the
   ``xb`` ones zero-shot) and ``dev_heldout.xa`` / ``dev_heldout.xb`` (nouns that only the
   corpora show), plus the same architecture at random init as the no-pre-training
   reference. (``task/val.{xa,xb}.tsv`` is for choosing fine-tuning settings without
   looking at ``dev``; it is not scored here.)

Chance is the majority-class share (50%). Figures are mean ± sample std over the seeds; the
gain table gives per-seed differences on ``dev.xb``. Each invocation is appended to the
``runs`` of ``benchmarks/results/<--name>.json`` and listed in the markdown, whatever it
showed. Writes ``benchmarks/results/<--name>.{md,json}`` unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from benchmarks.fixtures import BENCH_DIR, ROOT, load_script
from benchmarks.xlm_zero_shot import RESULTS, finetune_once, fmt, mean_std, pretrain

GEN_DIR = ROOT / "data_specs" / "xlm_gain"
A, B = "xa", "xb"
SETS = {"xa": ("dev", A), "xb": ("dev", B), "xa_heldout": ("dev_heldout", A)}
SETS["xb_heldout"] = ("dev_heldout", B)


def generator() -> ModuleType:
    """``data_specs/xlm_gain/make_data.py`` as a module."""
    return load_script(GEN_DIR / "make_data.py", "xlm_gain_make_data")


def ensure_data(work: Path, mono: int, parallel: int, order: str) -> Path:
    """The generated corpora and task files, written once per generator version, size and
    word order (``--order mild`` writes the committed task files again)."""
    digest = hashlib.sha256((GEN_DIR / "make_data.py").read_bytes())
    digest.update(f"{mono}/{parallel}/{order}".encode())
    out = work / f"data-{digest.hexdigest()[:12]}"
    if not (out / "done").exists():
        module = generator()
        module.write_corpora(out, 0, mono, parallel, order)
        module.write_tasks(out / "task", order)
        (out / "done").write_text("ok\n")
    return out


def settings_key(args: Any) -> str:
    return (
        f"pt{args.pretrain_steps}-{args.layers}x{args.hidden}-v{args.vocab_size}"
        f"-lr{args.pretrain_lr:g}-t{args.tlm_steps}"
    )


def command(args: Any) -> str:
    return (
        f"python -m benchmarks.xlm_gain --seeds {args.seeds} --pretrain-steps "
        f"{args.pretrain_steps} --layers {args.layers} --hidden {args.hidden} --vocab-size "
        f"{args.vocab_size} --pretrain-lr {args.pretrain_lr:g} --tlm-steps {args.tlm_steps} "
        f"--mono {args.mono} --parallel {args.parallel} --order {args.order} --steps {args.steps} --lr {args.lr:g} "
        f"--freeze {args.freeze} --threads {args.threads}"
    )


def gains(raw: dict[tuple[str, str], list[dict[str, float]]], freeze: str) -> dict[str, Any]:
    """Per-seed differences on ``dev.xb`` (zero-shot) for one fine-tuning protocol."""
    protocol = f"fine-tune, freeze={freeze}"
    tlm = [r["xb"] for r in raw[("mlm+tlm", protocol)]]
    mlm = [r["xb"] for r in raw[("mlm", protocol)]]
    rand = [r["xb"] for r in raw[("random init", "fine-tune, freeze=none")]]
    chance = [r["chance/xb"] for r in raw[("mlm+tlm", protocol)]]
    out = {}
    for name, minus in (("mlm+tlm - mlm", mlm), ("mlm+tlm - chance", chance)):
        diff = [t - m for t, m in zip(tlm, minus, strict=True)]
        out[name] = {**mean_std(diff), "won": sum(d > 0 for d in diff)}
    diff = [m - c for m, c in zip(mlm, chance, strict=True)]
    out["mlm - chance"] = {**mean_std(diff), "won": sum(d > 0 for d in diff)}
    diff = [t - r for t, r in zip(tlm, rand, strict=True)]
    out["mlm+tlm - random init"] = {**mean_std(diff), "won": sum(d > 0 for d in diff)}
    return out


def signed(cell: dict[str, Any]) -> str:
    per_seed = ", ".join(f"{100 * v:+.1f}" for v in cell["values"])
    return (
        f"{100 * cell['mean']:+.1f} ± {100 * cell['std']:.1f} | {per_seed} "
        f"| {cell['won']}/{len(cell['values'])}"
    )


def report(payload: dict[str, Any]) -> str:
    latest = payload["latest"]
    chance = latest["chance"]
    lines = [
        "# XLM cross-lingual transfer on two generated languages with no shared token",
        "",
        f"Command: `{latest['command']}` ({latest['wall_s'] / 60:.1f} min on 1 thread)",
        "",
        "Setting (`data_specs/xlm_gain/README.md`): `xa` is an English-like language, `xb` "
        "its word-for-word relexification in Greek letters (word order: "
        f"`--order {latest['args']['order']}`; mild = noun-adjective, sov = S O PP V with "
        "noun-adjective and postpositions); the shared BPE vocabulary has no token common to both but the "
        "specials. Pre-training reads the same generated corpora in both arms "
        f"({latest['corpus']}). The classifier is fine-tuned on `task/train.xa.tsv` only "
        "(240 sentences, label = kind of the subject, person or animal; half the objects are "
        "persons or animals too, so a bag of words does not decide it). `dev` = 200 new "
        "sentences with the training nouns, `xb` its translation (no `xb` word was seen in "
        "fine-tuning); `dev_heldout` = 200 sentences whose nouns only the corpora show. "
        f"Accuracy (%), mean ± std over seeds {latest['args']['seeds']} (pre-training and "
        f"fine-tuning seed). Chance (majority class): {100 * chance['xb']:.1f} on every set.",
        "",
        "| pre-training | protocol | dev xa | dev xb (zero-shot) | heldout xa | heldout xb "
        "(zero-shot) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in latest["rows"]:
        cells = " | ".join(fmt(row[name]) for name in SETS)
        lines.append(f"| {row['arm']} | {row['protocol']} | {cells} |")
    lines += [
        "",
        "Gain on `dev xb` (zero-shot), percentage points, per seed:",
        "",
        "| protocol | comparison | mean ± std | per seed | seeds won |",
        "| --- | --- | --- | --- | --- |",
    ]
    for freeze, table in latest["gains"].items():
        for name, cell in table.items():
            lines.append(f"| freeze={freeze} | {name} | {signed(cell)} |")
    lines += [
        "",
        "## Every invocation tried (oldest first; `dev xb` zero-shot accuracy, mean ± std)",
        "",
        "| # | command | mlm | mlm+tlm | random init | mlm+tlm - mlm, seeds won | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, run in enumerate(payload["runs"], start=1):
        head = run["headline"]
        lines.append(
            f"| {i} | `{run['command']}` | {head['mlm']} | {head['mlm+tlm']} | "
            f"{head['random init']} | {head['gain']} | {run.get('note', '')} |"
        )
    if payload.get("notes"):
        lines += ["", "## Notes", "", payload["notes"].strip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--pretrain-steps", type=int, default=2500)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=1500)
    parser.add_argument("--pretrain-lr", type=float, default=5e-3)
    parser.add_argument("--tlm-steps", type=int, default=2, help="TLM batches per MLM batch")
    parser.add_argument("--mono", type=int, default=25_000, help="sentences per language")
    parser.add_argument("--parallel", type=int, default=15_000, help="sentence pairs")
    parser.add_argument(
        "--order", default="mild", help="xb's word order: mild (noun-adjective) or sov"
    )
    parser.add_argument("--steps", type=int, default=200, help="fine-tuning steps")
    parser.add_argument("--lr", type=float, default=1e-3, help="fine-tuning peak lr")
    parser.add_argument("--freeze", default="none,embeddings")
    parser.add_argument("--work", type=Path, default=BENCH_DIR / "xlm-gain")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="xlm_gain", help="results/<name>.{md,json}")
    parser.add_argument("--note", default="", help="a note for the runs table")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--notes-file", type=Path, help="markdown kept as the results' Notes (else the last)"
    )
    parser.add_argument(
        "--render", action="store_true", help="only rewrite the markdown from the json"
    )
    args = parser.parse_args(argv)
    path = RESULTS / f"{args.name}.json"
    if args.render:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if args.notes_file:
            payload["notes"] = args.notes_file.read_text(encoding="utf-8")
            path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        (RESULTS / f"{args.name}.md").write_text(report(payload), encoding="utf-8")
        return payload
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    freezes = args.freeze.split(",")
    start = time.time()
    data = ensure_data(args.work, args.mono, args.parallel, args.order)
    task = data / "task"
    work = args.work / f"{data.name}-{settings_key(args)}"
    train = (task / f"train.{A}.tsv", A)
    dev = {A: task / f"dev.{A}.tsv", B: task / f"dev.{B}.tsv"}
    extra = {f"{lang}_heldout": (task / f"dev_heldout.{lang}.tsv", lang) for lang in (A, B)}
    raw: dict[tuple[str, str], list[dict[str, float]]] = {}

    def tune(final: Path, name: str, seed: int, freeze: str, random_init: bool) -> None:
        out = work / "ft" / f"{name}-{freeze}-s{seed}-{args.steps}-{args.lr:g}"
        scores = finetune_once(
            final, out, seed, freeze, random_init, args, train=train, dev=dev, extra=extra
        )
        arm = "random init" if random_init else name.replace("-", "+")
        raw.setdefault((arm, f"fine-tune, freeze={freeze}"), []).append(scores)
        shown = {k: round(v, 3) for k, v in scores.items() if not k.startswith("chance")}
        print(f"[{time.time() - start:.0f}s] {arm} freeze={freeze} seed {seed}: {shown}")

    for seed in seeds:
        finals = {}
        for arm in ("mlm", "mlm+tlm"):
            finals[arm] = pretrain(
                work,
                arm,
                seed,
                args.pretrain_steps,
                args.layers,
                monolingual=data / "mono",
                parallel=data / "parallel",
                directions=[f"{A}-{B}", f"{B}-{A}"],
                vocab_size=args.vocab_size,
                hidden=args.hidden,
                learning_rate=args.pretrain_lr,
                tlm_steps=args.tlm_steps,
            )
            print(f"[{time.time() - start:.0f}s] pre-trained {arm} seed {seed}", flush=True)
            for freeze in freezes:
                tune(finals[arm], arm.replace("+", "-"), seed, freeze, False)
        tune(finals["mlm+tlm"], "random", seed, "none", True)
    rows = [
        {"arm": arm, "protocol": protocol, **{n: mean_std([r[n] for r in runs]) for n in SETS}}
        for (arm, protocol), runs in raw.items()
    ]
    first = next(iter(raw.values()))[0]
    size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    latest = {
        "command": command(args),
        "args": {k: str(v) for k, v in vars(args).items()},
        "wall_s": time.time() - start,
        "corpus": f"{args.mono:,} sentences per language + {args.parallel:,} pairs, "
        f"{size / 1e6:.1f} MB, `python data_specs/xlm_gain/make_data.py --mono {args.mono} "
        f"--parallel {args.parallel} --order {args.order}`",
        "chance": {n: first[f"chance/{n}"] for n in SETS},
        "rows": rows,
        "gains": {freeze: gains(raw, freeze) for freeze in freezes},
        "raw": [{"arm": a, "protocol": p, "runs": r} for (a, p), r in raw.items()],
    }
    previous = json.loads(path.read_text()) if path.exists() else {"runs": []}
    main_protocol = f"fine-tune, freeze={freezes[0]}"
    by_arm = {row["arm"]: row for row in rows if row["protocol"] == main_protocol}
    by_arm["random init"] = next(r for r in rows if r["arm"] == "random init")
    gain = latest["gains"][freezes[0]]["mlm+tlm - mlm"]
    headline = {arm: fmt(row["xb"]) for arm, row in by_arm.items()}
    headline["gain"] = (
        f"{100 * gain['mean']:+.1f} ± {100 * gain['std']:.1f}, {gain['won']}/{len(seeds)} "
        f"(freeze={freezes[0]})"
    )
    run = {"command": latest["command"], "headline": headline, "note": args.note}
    payload = {"runs": [*previous["runs"], run], "latest": latest}
    notes = args.notes_file.read_text(encoding="utf-8") if args.notes_file else None
    if notes or previous.get("notes"):
        payload["notes"] = notes or previous["notes"]
    text = report(payload)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        (RESULTS / f"{args.name}.md").write_text(text, encoding="utf-8")
    return payload


if __name__ == "__main__":
    main()
