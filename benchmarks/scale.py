"""Scale: prepare, then 20 steps of a mini RoBERTa, on generated corpora of growing size.

    python -m benchmarks.scale --sizes 10MB,100MB            # prepared path only
    python -m benchmarks.scale --sizes 10MB,100MB,1GB --old-sizes 10MB,100MB

For each size, every step in a fresh process (``python -m flows.cli``, i.e. ``ptm``):

1. ``ptm prepare CORPUS --output DIR --workers N --tokenizer TOK`` into an empty folder:
   seconds and MB/s (wall time of the command), peak memory of its process tree.
2. ``ptm pretrain experiment=roberta_tiny model=bert_mini data.prepared=DIR
   trainer.max_steps=20 trainer.log_every=1 data.num_workers=1`` (BERT-mini, 4 x 256, MLM,
   batch 16 x 128, CPU): peak RSS of the training process and of its tree (the DataLoader
   worker included), the seconds until ``metrics.jsonl`` has its first line, and the
   trainer's ``data_wait_share`` (the share of wall time spent in ``next(batches)``).
3. The same 20 steps with ``data.corpus=CORPUS`` and the cache folder where step 1
   prepared (``prepared_cache_dir``): a *second* run on an unchanged raw corpus, which must
   find the prepared copy and start at once. Its time to the first metrics line is the
   "first step" figure.

``--old-sizes`` also runs the 20 steps on the raw corpus through the code of commit
``0524cbe`` (before the prepared pipeline: the corpus read into Python lists and tokenized
up front), from a ``git worktree`` under ``/tmp/ptm-bench`` with this virtual environment.

All runs use one WordPiece vocabulary of 8,000 (trained once on the 100 MB corpus) so the
sizes differ only in the amount of text. Peak RSS is polled every 0.1 s with psutil.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env, corpus_path, ensure_tokenizer
from benchmarks.peak_rss import Measured, run_measured

RESULTS = Path(__file__).resolve().parent / "results"
OLD_COMMIT = "0524cbe"
STEPS = 20
TRAIN_ARGS = [
    "experiment=roberta_tiny",
    "model=bert_mini",
    f"trainer.max_steps={STEPS}",
    "trainer.log_every=1",
    "trainer.save_every=100000",
    "trainer.progress=false",
    "trainer.device=cpu",
]


def _ptm(*args: str) -> list[str]:
    return [sys.executable, "-m", "flows.cli", *args]


def prepared_dir(corpus: Path, tokenizer: Path, root: Path) -> Path:
    """Where ``data.corpus=corpus data.cache_dir=root`` looks for its prepared copy."""
    from ptm_core.data.prepare import prepared_cache_dir

    return Path(
        prepared_cache_dir(corpus, root, tokenizer=tokenizer, vocab_size=8000, lowercase=True)
    )


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The lines of a run's ``metrics.jsonl`` (empty if it has none)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train(
    run_dir: Path, data_args: list[str], *, timeout: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """20 training steps in a fresh process; memory, first-line time and data-wait share."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    measured = run_measured(
        _ptm("pretrain", *TRAIN_ARGS, f"trainer.output_dir={run_dir}", *data_args),
        env=env or bench_env(),
        cwd=ROOT,
        timeout=timeout,
        watch=run_dir / "metrics.jsonl",
        log=run_dir / "log.txt",
    )
    metrics = read_metrics(run_dir / "metrics.jsonl")
    result: dict[str, Any] = {**measured.to_dict(), "steps_logged": len(metrics)}
    if measured.returncode != 0:
        result["error"] = _last_error(measured)
    shares = [m["data_wait_share"] for m in metrics if "data_wait_share" in m]
    if shares:
        result["data_wait_share_first_step"] = shares[0]
        result["data_wait_share_median_after_first"] = statistics.median(shares[1:] or shares)
        result["data_wait_share_mean_after_first"] = statistics.fmean(shares[1:] or shares)
    speeds = [m["tokens_per_s"] for m in metrics[1:]]
    if speeds:
        result["tokens_per_s_median"] = statistics.median(speeds)
    return result


def _last_error(measured: Measured) -> str:
    lines = [line for line in measured.output.strip().splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-600:] if lines else "(no output)"


def prepare(corpus: Path, tokenizer: Path, out: Path, workers: int, timeout: float) -> dict:
    """``ptm prepare`` into an empty ``out`` in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = BENCH_DIR / "logs" / f"prepare-{corpus.stem}.log"
    measured = run_measured(
        _ptm(
            "prepare",
            str(corpus),
            "--output",
            str(out),
            "--workers",
            str(workers),
            "--tokenizer",
            str(tokenizer),
        ),
        env=bench_env(),
        cwd=ROOT,
        timeout=timeout,
        log=log,
    )
    result: dict[str, Any] = measured.to_dict()
    if measured.returncode != 0:
        result["error"] = _last_error(measured)
        return result
    mb = corpus.stat().st_size / 1e6
    result["mb_per_s"] = mb / measured.wall_s
    flow_s = _flow_seconds(log.read_text(encoding="utf-8", errors="replace"))
    if flow_s:
        result["flow_s"] = flow_s
        result["flow_mb_per_s"] = mb / flow_s
    return result


def _flow_seconds(log: str) -> float | None:
    """Seconds from Prefect's "Beginning flow run" to the flow's "Finished in state" line.

    The command's wall time also holds the temporary Prefect server's start and stop.
    """
    stamps = re.findall(
        r"^(\d\d):(\d\d):(\d\d\.\d+) \| INFO +\| Flow run '[^']+' - (.*)$", log, re.M
    )
    begin = [s for s in stamps if s[3].startswith("Beginning flow run")]
    end = [s for s in stamps if s[3].startswith("Finished in state")]
    if not begin or not end:
        return None

    def seconds(stamp: tuple[str, ...]) -> float:
        return int(stamp[0]) * 3600 + int(stamp[1]) * 60 + float(stamp[2])

    return (seconds(end[-1]) - seconds(begin[0])) % 86400


def old_worktree() -> Path:
    """A checkout of :data:`OLD_COMMIT` under ``/tmp/ptm-bench`` (made once)."""
    tree = BENCH_DIR / f"old-{OLD_COMMIT}"
    if not (tree / "flows" / "cli.py").exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), OLD_COMMIT],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return tree


def train_old(corpus: Path, tokenizer: Path, run_dir: Path, timeout: float) -> dict[str, Any]:
    """The same 20 steps through the raw, in-memory path of commit ``0524cbe``."""
    tree = old_worktree()
    sources = [tree / "packages" / p / "src" for p in ("core", "knowledge", "multilingual")]
    sources += [tree / "packages" / "multimodal" / "src", tree]
    env = bench_env(PYTHONPATH=":".join(map(str, sources)), PTM_ROOT=str(tree))
    data = [f"data.corpus={corpus}", f"data.tokenizer={tokenizer}"]
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    measured = run_measured(
        _ptm("pretrain", *TRAIN_ARGS, f"trainer.output_dir={run_dir}", *data),
        env=env,
        cwd=tree,
        timeout=timeout,
        watch=run_dir / "metrics.jsonl",
        log=run_dir / "log.txt",
    )
    metrics = read_metrics(run_dir / "metrics.jsonl")
    result: dict[str, Any] = {**measured.to_dict(), "steps_logged": len(metrics)}
    if measured.returncode != 0:
        result["error"] = _last_error(measured)
    return result


def second_run(
    corpus: Path, tokenizer: Path, cache_root: Path, run_dir: Path, repeat: int
) -> dict[str, Any]:
    """The second run on the unchanged raw corpus, ``repeat`` times: the run with the median
    time to its first metrics line, with every run's time beside it."""
    runs = [
        train(
            run_dir,
            [
                f"data.corpus={corpus}",
                f"data.cache_dir={cache_root}",
                f"data.tokenizer={tokenizer}",
                "data.num_workers=1",
            ],
            timeout=600,
        )
        for _ in range(repeat)
    ]
    firsts = [r["first_line_s"] for r in runs if r.get("first_line_s") is not None]
    if not firsts:
        return runs[-1]
    middle = sorted(firsts)[(len(firsts) - 1) // 2]
    chosen = next(r for r in runs if r.get("first_line_s") == middle)
    return {**chosen, "first_line_s_runs": firsts}


def run(
    sizes: list[str],
    old_sizes: list[str],
    workers: int,
    *,
    prepare_timeout: float = 3600,
    train_timeout: float = 1800,
    second_runs: int = 1,
    second_run_only: bool = False,
) -> dict[str, Any]:
    """Every size in turn; the JSON-ready results.

    ``second_run_only``: the cache folder of an earlier run of this benchmark is reused (it
    must hold the size's prepared copy) and only the second run is timed.
    """
    tokenizer = ensure_tokenizer(corpus_path("100MB"))
    cache_root = BENCH_DIR / "scale" / "cache"
    runs = BENCH_DIR / "scale" / "runs"
    per_size: dict[str, Any] = {}
    for size in sizes:
        start = time.perf_counter()
        corpus = corpus_path(size)
        entry: dict[str, Any] = {
            "corpus_bytes": corpus.stat().st_size,
            "corpus_ready_s": time.perf_counter() - start,
        }
        target = prepared_dir(corpus, tokenizer, cache_root)
        if second_run_only:
            if not (target / "manifest.json").is_file():
                raise SystemExit(f"--second-run-only: {target} holds no prepared corpus")
        else:
            print(f"[{size}] prepare -> {target}", flush=True)
            entry["prepare"] = prepare(corpus, tokenizer, target, workers, prepare_timeout)
        if second_run_only or "error" not in entry["prepare"]:
            if not second_run_only:
                print(f"[{size}] train, data.prepared", flush=True)
                entry["train_prepared"] = train(
                    runs / f"{size}-prepared",
                    [f"data.prepared={target}", "data.tokenizer=null", "data.num_workers=1"],
                    timeout=train_timeout,
                )
            print(f"[{size}] train, data.corpus (second run, cached)", flush=True)
            entry["train_cached_raw"] = second_run(
                corpus, tokenizer, cache_root, runs / f"{size}-cached-raw", second_runs
            )
        if size in old_sizes:
            print(f"[{size}] train, old raw path ({OLD_COMMIT})", flush=True)
            entry["train_old_raw"] = train_old(
                corpus, tokenizer, runs / f"{size}-old", timeout=train_timeout
            )
        entry["date"] = time.strftime("%Y-%m-%d")
        entry["command"] = " ".join(["python -m benchmarks.scale", *sys.argv[1:]])
        per_size[size] = entry
        print(json.dumps({size: entry}, indent=1), flush=True)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "workers": workers,
        "steps": STEPS,
        "tokenizer": str(tokenizer),
        "command": " ".join(["python -m benchmarks.scale", *sys.argv[1:]]),
        "sizes": per_size,
    }


def _cell(result: dict[str, Any] | None, key: str, fmt: str = "{:.1f}") -> str:
    if not result:
        return "not run"
    if result.get("timed_out"):
        return f"killed at {result['wall_s'] / 60:.0f} min"
    if "error" in result and key not in result:
        return "failed"
    value = result.get(key)
    return "" if value is None else fmt.format(value)


def markdown(results: dict[str, Any]) -> str:
    """Tables: preparation, training on prepared data, the old path, and the targets."""
    sizes = results["sizes"]
    lines = [
        f"Scale ({results['date']}, {results['workers']} preparation processes, "
        f"{results['steps']} steps of BERT-mini MLM, batch 16 x 128, CPU, one DataLoader "
        f"worker). {_commands(results)}",
        "",
        "| corpus | prepare s (flow / command) | prepare MB/s (flow) | "
        "prepare peak PSS (tree), MiB | "
        "train peak RSS, MiB (main / tree PSS) | first metrics line, s "
        "(prepared / 2nd raw run) | data wait share (median step) | old path: peak RSS MiB, "
        "first line s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, e in sizes.items():
        prep = e.get("prepare", {})
        tp, tc, old = e.get("train_prepared"), e.get("train_cached_raw"), e.get("train_old_raw")
        train_rss = (
            f"{_cell(tp, 'peak_rss_mb', '{:,.0f}')} / {_cell(tp, 'peak_tree_pss_mb', '{:,.0f}')}"
        )
        first = f"{_cell(tp, 'first_line_s')} / {_cell(tc, 'first_line_s')}"
        share = _cell(tp, "data_wait_share_median_after_first", "{:.1%}")
        old_cell = (
            f"{_cell(old, 'peak_rss_mb', '{:,.0f}')}, {_cell(old, 'first_line_s')}"
            if old
            else "not run"
        )
        lines.append(
            f"| {size} | {_cell(prep, 'flow_s')} / {_cell(prep, 'wall_s')} | "
            f"{_cell(prep, 'flow_mb_per_s', '{:.2f}')} | "
            f"{_cell(prep, 'peak_tree_pss_mb', '{:,.0f}')} | {train_rss} | {first} | {share} | "
            f"{old_cell} |"
        )
    targets = _targets(sizes)
    if targets:
        lines += ["", *targets]
    return "\n".join(lines) + "\n"


def _commands(results: dict[str, Any]) -> str:
    """``Command: `...`.`` or, for sizes measured by several commands, each of them."""
    commands = list(
        dict.fromkeys(e.get("command", results["command"]) for e in results["sizes"].values())
    )
    if len(commands) == 1:
        return f"Command: `{commands[0]}`."
    return "Commands: " + "; ".join(f"`{c}`" for c in commands) + "."


def _targets(sizes: dict[str, Any]) -> list[str]:
    """Our targets for the data pipeline, checked against what was measured."""
    out = []
    small, large = sizes.get("10MB", {}), sizes.get("1GB", {})
    peaks = {
        s: e["train_prepared"]["peak_rss_mb"]
        for s, e in sizes.items()
        if e.get("train_prepared", {}).get("returncode") == 0
    }
    if peaks:
        worst = max(peaks.values())
        gib, gb = worst <= 1.5 * 1024, worst * 2**20 <= 1.5e9
        verdict = "met" if gb else ("met in GiB, not in decimal GB" if gib else "NOT met")
        out.append(
            f"- Peak RSS of training <= 1.5 GB at every size: max {worst:,.0f} MiB = "
            f"{worst * 2**20 / 1e9:.2f} GB ({verdict}; 1.5 GiB = 1,536 MiB)."
        )
    if "10MB" in peaks and "1GB" in peaks:
        ratio = peaks["1GB"] / peaks["10MB"]
        out.append(
            f"- Flat: 1 GB / 10 MB peak RSS = {ratio:.2f}x ({'met' if ratio <= 1.3 else 'NOT met'}"
            ", target <= 1.3x)."
        )
    cached = large.get("train_cached_raw", {})
    if cached.get("first_line_s") is not None:
        first = cached["first_line_s"]
        each = cached.get("first_line_s_runs", [first])
        runs = f"median of {len(each)} runs: " + ", ".join(f"{x:.1f}" for x in each) + " s; "
        out.append(
            f"- Second run on the unchanged 1 GB corpus: first metrics line after {first:.1f} s "
            f"({runs if len(each) > 1 else ''}{'met' if first <= 10 else 'NOT met'}, target "
            "<= 10 s (#36); includes interpreter, torch import, config, model build and the "
            "first step)."
        )
    shares = [
        e["train_prepared"]["data_wait_share_median_after_first"]
        for e in (small, sizes.get("100MB", {}), large)
        if "data_wait_share_median_after_first" in e.get("train_prepared", {})
    ]
    if shares:
        out.append(
            f"- Data wait share of step time (median step after the first): max "
            f"{max(shares):.1%} over the sizes ({'met' if max(shares) <= 0.05 else 'NOT met'}"
            ", target <= 5%)."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10MB,100MB")
    parser.add_argument("--old-sizes", default="", help="also the raw path of 0524cbe")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--fresh", action="store_true", help="drop the sizes of an earlier scale.json"
    )
    parser.add_argument(
        "--second-runs", type=int, default=1, help="time the second run this many times"
    )
    parser.add_argument(
        "--second-run-only",
        action="store_true",
        help="only the second run, on the cache of an earlier run (kept: its other figures)",
    )
    args = parser.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    old = [s for s in args.old_sizes.split(",") if s]
    results = run(
        sizes,
        old,
        args.workers,
        second_runs=args.second_runs,
        second_run_only=args.second_run_only,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    previous = args.out / "scale.json"
    if not args.fresh and previous.exists():
        # Sizes measured by an earlier command stay (each says its own date and command).
        earlier = json.loads(previous.read_text())
        for entry in earlier["sizes"].values():
            entry.setdefault("date", earlier["date"])
            entry.setdefault("command", earlier["command"])
        merged = {
            size: {**earlier["sizes"].get(size, {}), **entry} if args.second_run_only else entry
            for size, entry in {**earlier["sizes"], **results["sizes"]}.items()
        }
        results["sizes"] = dict(sorted(merged.items(), key=lambda kv: kv[1]["corpus_bytes"]))
    (args.out / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "scale.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
