"""Fine-tuning speed: ptm's fine-tuning epoch against the transformers Trainer at its best.

    python -m benchmarks.finetune_speed --sizes mini,base --pairs 3 --threads 1

One process times, in interleaved pairs (the order rotates every pair), one epoch of:

* **ptm**: what ``ptm finetune`` runs (``TaskBatches`` over the task file, featurized per
  batch, a ``TaskModel`` on the core ``Trainer`` with fine-tuning's defaults:
  ``precision=auto``, which is bf16 autocast on a CPU with AVX-512 BF16 or AMX,
  ``unpad=auto``, batches grouped by length, featurized on a prefetch thread, the last
  layer at ``[CLS]`` only, ``log_every=20``);
* **Trainer bf16 + group_by_length**: transformers' ``Trainer`` with ``bf16=True``,
  ``train_sampling_strategy="group_by_length"`` (``group_by_length=True`` before
  transformers 5), ``attn_implementation="sdpa"``: the fastest equivalent setting (the
  headline ratio);
* **Trainer default**: the same in fp32 with random batches (the second column).

The task (:mod:`benchmarks.finetune_task`) is a GLUE-like sentence classification with a
lognormal length spread (8..128 tokens, median 28); both sides start from the same random
``BertForSequenceClassification`` weights (BERT-mini or BERT-base shape) and use batch 16,
AdamW, lr 2e-5, linear decay. transformers tokenizes with ``datasets.map`` once, outside
the timing; ptm's per-batch featurizing is inside it. ptm's checkpoint writes (it saves one
at the end of every run, for resume) are timed apart and left out of its examples/s (the
Trainer's default writes none in an epoch this short).

Peak memory is the whole process's (``VmHWM``) in a child process per side, one epoch, in
each side's default precision (ptm: auto = bf16 here; transformers: fp32).

The header names the CPU and its bf16 GEMM peak (:mod:`benchmarks.gemm_peak`) measured in
the same run. Writes ``benchmarks/results/finetune_speed.{md,json}``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.finetune_task import (
    MAX_TOKENS,
    MEDIAN_TOKENS,
    MIN_TOKENS,
    TaskFolder,
    hf_dataset,
    make_task_folder,
    padding_share,
    token_lengths,
)
from benchmarks.fixtures import bench_env
from benchmarks.gemm_peak import gemm_peak
from benchmarks.paired import CpuSteal, machine_name, steal_note
from benchmarks.peak_rss import status_mb

RESULTS = Path(__file__).resolve().parent / "results"
BATCH, LR = 16, 2e-5
SIDES = ("ptm", "hf_bf16", "hf_fp32")
LABELS = {
    "ptm": "ptm finetune",
    "hf_bf16": "Trainer bf16 + group_by_length",
    "hf_fp32": "Trainer default (fp32)",
}
DEFAULT_ROWS = {"mini": 1008, "base": 96}
Run = tuple[float, float, float, float]


class _Epoch:
    """One side's epoch as a callable returning ``(wall s, CPU s, checkpoint wall s,
    checkpoint CPU s)``."""

    def __init__(self, side: str, folder: TaskFolder) -> None:
        self.side = side
        self.folder = folder
        if side == "ptm":
            self._setup_ptm()
        else:
            self.dataset, self.tokenizer = hf_dataset(folder)

    def _setup_ptm(self) -> None:
        from ptm_core import TransformerEncoder
        from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
        from ptm_core.finetune.task_data import read_task
        from ptm_core.finetune.task_spec import TaskSpec

        task = TaskSpec(
            name="speed",
            kind="classification",
            train=str(self.folder.train),
            dev=str(self.folder.dev),
            batch_size=BATCH,
        )
        self.train = read_task(task, "train", load_task_tokenizer(self.folder.model))
        self.encoder = TransformerEncoder.from_pretrained(self.folder.model)

    def __call__(self) -> Run:
        with tempfile.TemporaryDirectory() as out:
            if self.side == "ptm":
                return self._ptm(out)
            return self._hf(out)

    def _ptm(self, out: str) -> Run:
        from ptm_core.finetune.data.task_batches import TaskBatches
        from ptm_core.finetune.model import build_task_model
        from ptm_core.training import TrainerConfig
        from ptm_core.training.trainer import Trainer

        saving = [0.0, 0.0]

        class TimedSaves(Trainer):
            def _save(self, *args: Any, **kwargs: Any) -> Path:
                wall, cpu = time.perf_counter(), time.process_time()
                try:
                    return super()._save(*args, **kwargs)
                finally:
                    saving[0] += time.perf_counter() - wall
                    saving[1] += time.process_time() - cpu

        model = build_task_model(copy.deepcopy(self.encoder), "classification", 2, 0.1)
        data = TaskBatches(
            self.train.rows, self.train.featurizer, BATCH, seed=0, group_by_length=True
        )
        config = TrainerConfig(
            output_dir=out,
            max_steps=len(data),
            learning_rate=LR,
            warmup_ratio=0.0,
            log_every=20,
            save_every=200,
            progress=False,
        )
        trainer = TimedSaves(model, data, config)
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.fit()
        return time.perf_counter() - wall, time.process_time() - cpu, saving[0], saving[1]

    def _hf(self, out: str) -> Run:
        from transformers import BertForSequenceClassification, Trainer, TrainingArguments

        bf16 = self.side == "hf_bf16"
        model = BertForSequenceClassification.from_pretrained(
            self.folder.model, attn_implementation="sdpa"
        )
        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=BATCH,
            num_train_epochs=1,
            learning_rate=LR,
            bf16=bf16,
            train_sampling_strategy="group_by_length" if bf16 else "random",
            use_cpu=True,
            report_to=[],
            disable_tqdm=True,
            logging_steps=20,
        )
        trainer = Trainer(
            model=model, args=args, train_dataset=self.dataset, processing_class=self.tokenizer
        )
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.train()
        return time.perf_counter() - wall, time.process_time() - cpu, 0.0, 0.0


def time_sides(epochs: dict[str, Callable[[], Run]], pairs: int) -> dict[str, list[Run]]:
    """Each side once per round, the order rotated every round; a warm-up round first."""
    names = list(epochs)
    for name in names:
        epochs[name]()
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for round_ in range(pairs):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            runs[name].append(epochs[name]())
            print(f"  {name}: wall {runs[name][-1][0]:.1f} s, cpu {runs[name][-1][1]:.1f} s")
    return runs


def peak_memory_mb(side: str, folder: TaskFolder, threads: int) -> float:
    """Whole-process peak RSS (MiB) of one epoch of ``side`` in a fresh process."""
    code = (
        "import torch, sys; torch.set_num_threads(int(sys.argv[3]));"
        "from pathlib import Path; from benchmarks.finetune_speed import child_epoch;"
        "child_epoch(sys.argv[1], Path(sys.argv[2]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, side, str(folder.root), str(threads)],
        capture_output=True,
        text=True,
        env=bench_env(),
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def child_epoch(side: str, root: Path) -> None:
    """Run one epoch of ``side`` on the task folder at ``root``; print ``VmHWM`` in MiB."""
    rows = [
        (text, int(label))
        for text, label in (
            line.rsplit("\t", 1)
            for line in (root / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
        )
    ]
    folder = TaskFolder(root, root / "train.tsv", root / "dev.tsv", root / "model", rows)
    _Epoch(side, folder)()
    print(status_mb("VmHWM"))


def summarize(runs: dict[str, list[Run]], rows: int) -> dict[str, Any]:
    """Examples/s per side (median, min, max; CPU and wall) and the per-round ratios."""

    def rate(run: Run, index: int) -> float:  # index 0: wall, 1: CPU; saves left out
        return rows / max(run[index] - run[index + 2], 1e-9)

    out: dict[str, Any] = {"sides": {}, "ratios": {}}
    for side, values in runs.items():
        out["sides"][side] = {
            clock: {
                "median": statistics.median(rate(v, i) for v in values),
                "min": min(rate(v, i) for v in values),
                "max": max(rate(v, i) for v in values),
            }
            for clock, i in (("cpu", 1), ("wall", 0))
        }
        out["sides"][side]["checkpoint_s"] = statistics.median(v[2] for v in values)
        out["sides"][side]["checkpoint_cpu_s"] = statistics.median(v[3] for v in values)
    for other in ("hf_bf16", "hf_fp32"):
        for clock, i in (("cpu", 1), ("wall", 0)):
            ratios = [
                rate(ours, i) / rate(theirs, i)
                for ours, theirs in zip(runs["ptm"], runs[other], strict=True)
            ]
            out["ratios"][f"{other}_{clock}"] = {
                "median": statistics.median(ratios),
                "min": min(ratios),
                "max": max(ratios),
            }
    return out


def markdown(results: dict[str, Any]) -> str:
    """The results page."""
    head = results["header"]
    lines = [
        "# Fine-tuning speed: ptm vs the transformers Trainer",
        "",
        f"CPU: {head['cpu']}; bf16 GEMM peak (BERT-base FFN shape, best of 20): "
        f"{head['gemm_peak_gflops']['1']:.0f} GFLOP/s on 1 thread, "
        f"{head['gemm_peak_gflops']['2']:.0f} GFLOP/s on 2. torch {head['torch']}, "
        f"transformers {head['transformers']}; {head['threads']} thread(s) per process.",
        "",
        f"Command: `{head['command']}` (niceness {head.get('niceness', 'not recorded')}, "
        f"load average {head['load_before']} before, {head['load_after']} after, on a 2-core "
        "machine; the spread of the rounds is shown).",
        "",
        f"Task: GLUE-like single-sentence classification, lengths lognormal "
        f"{MIN_TOKENS}..{MAX_TOKENS} tokens (median {MEDIAN_TOKENS:.0f}), batch {BATCH}; "
        "padding share of random batches "
        f"{100 * head['padding_random']:.0f}%, of length-sorted ones "
        f"{100 * head['padding_sorted']:.0f}%. Examples/s over one epoch, median of "
        f"{head['pairs']} interleaved rounds [min-max]; ratio = ptm / Trainer per round.",
        "",
        "| size | rows | clock | ptm ex/s | Trainer bf16+group_by_length ex/s | **ratio** "
        "| Trainer fp32 ex/s | ratio vs fp32 | peak MB ptm (bf16) | peak MB Trainer (fp32) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def spread(stat: dict[str, float], fmt: str = ".1f") -> str:
        return f"{stat['median']:{fmt}} [{stat['min']:{fmt}}-{stat['max']:{fmt}}]"

    for size, row in results["sizes"].items():
        sides, ratios, memory = row["sides"], row["ratios"], row.get("peak_mb", {})
        for clock in ("cpu", "wall"):
            lines.append(
                f"| {size} | {row['rows']} | {clock} | {spread(sides['ptm'][clock])} "
                f"| {spread(sides['hf_bf16'][clock])} "
                f"| **{spread(ratios['hf_bf16_' + clock], '.2f')}** "
                f"| {spread(sides['hf_fp32'][clock])} "
                f"| {spread(ratios['hf_fp32_' + clock], '.2f')} "
                f"| {memory.get('ptm', float('nan')):.0f} "
                f"| {memory.get('hf_fp32', float('nan')):.0f} |"
            )
    lines += [
        "",
        "ptm's checkpoint writes (median s per epoch, left out of its examples/s): "
        + ", ".join(
            f"{size} {row['sides']['ptm']['checkpoint_s']:.1f} s"
            for size, row in results["sizes"].items()
        )
        + ". No row uses a pre-training-only trick.",
        *steal_note(head.get("steal")),
        *([""] + results["notes"] if results.get("notes") else []),
    ]
    return "\n".join(lines) + "\n"


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="mini,base")
    parser.add_argument("--rows", default="", help="size=rows,... (default mini=1008,base=96)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    rows_of = dict(DEFAULT_ROWS)
    rows_of.update({k: int(v) for k, v in (p.split("=") for p in args.rows.split(",") if p)})
    lengths = token_lengths(4000, 0)
    header: dict[str, Any] = {
        "cpu": machine_name(),
        "gemm_peak_gflops": {str(t): gemm_peak(t) for t in (1, 2)},
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": args.threads,
        "pairs": args.pairs,
        "command": "python -m benchmarks.finetune_speed " + " ".join(sys.argv[1:]),
        "load_before": _load(),
        "niceness": os.nice(0),
        "padding_random": padding_share(lengths, BATCH),
        "padding_sorted": padding_share(sorted(lengths), BATCH),
    }
    steal = CpuSteal()
    results: dict[str, Any] = {"header": header, "sizes": {}}
    for size in args.sizes.split(","):
        rows = rows_of[size]
        print(f"{size}: {rows} rows")
        folder = make_task_folder(size, rows)
        try:
            runs = time_sides({side: _Epoch(side, folder) for side in SIDES}, args.pairs)
            row = {"rows": rows, **summarize(runs, rows), "runs": runs}
            if not args.no_memory:
                row["peak_mb"] = {
                    side: peak_memory_mb(side, folder, args.threads) for side in ("ptm", "hf_fp32")
                }
            results["sizes"][size] = row
        finally:
            folder.close()
    header["load_after"] = _load()
    header["steal"] = steal.share()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "finetune_speed.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "finetune_speed.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
