"""Multimodal scale: peak RSS of prepare + 20 VisualBERT steps on growing image-text sets.

    python -m benchmarks.multimodal_scale --sizes 1000,10000,50000

For each size a synthetic set of ``N`` scenes, one caption each, is generated once
(``ptm_multimodal.synthetic`` scenes with the synthetic detector's 32-d region features,
2-3 regions per image, 18 classes; :func:`write_scenes`). Then, each in a fresh ``ptm pretrain`` process
(``experiment=visualbert_tiny data.train_dir=DIR data.eval_dir=null trainer.max_steps=20``,
batch 64, CPU):

1. **new, first run**: ``data.prepare=true`` with an empty cache: the pairs are prepared
   (caption shards, feature shards, manifest) and 20 steps run on them, read per index.
2. **new, second run**: the same command again: the cache is found by its fingerprint and
   nothing is prepared.
3. **old**: ``data.prepare=false``: the pairs and all features are read into memory and
   every caption is encoded up front (the path every run took before the prepared format;
   the same code, kept for small data).

Peak RSS is that of the process tree, polled every 0.1 s with psutil
(:mod:`benchmarks.peak_rss`). Results go to ``benchmarks/results/multimodal_scale.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env
from benchmarks.peak_rss import run_measured

RESULTS = Path(__file__).resolve().parent / "results"
STEPS = 20


def write_scenes(folder: Path, size: int, seed: int = 11) -> Path:
    """``size`` scenes of :func:`ptm_multimodal.synthetic.make_scene` (captions, boxes) with
    region features drawn like :func:`~ptm_multimodal.synthetic.detect` (one-hot colour and
    shape plus N(0, 0.3) noise; class softmax), vectorised with numpy: the per-image torch
    detector takes ~30 ms an image on a busy machine, too slow for 50k scenes."""
    import numpy as np
    import torch

    from ptm_core.atomic import atomic_write_text, save_safetensors
    from ptm_multimodal.synthetic import (
        COLORS,
        DETECTOR_FEATURE_SIZE,
        NUM_CLASSES,
        SHAPES,
        detector_spec,
        make_scene,
        vocabulary,
    )

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    scenes = [make_scene(i, seed) for i in range(size)]
    shapes = [shape for scene in scenes for shape in scene.shapes]
    total = len(shapes)
    features = rng.standard_normal((total, DETECTOR_FEATURE_SIZE), dtype=np.float32) * 0.3
    logits = rng.standard_normal((total, NUM_CLASSES), dtype=np.float32)
    rows = np.arange(total)
    color = np.array([list(COLORS).index(s.color) for s in shapes])
    kind = np.array([SHAPES.index(s.shape) for s in shapes])
    features[rows, color] += 1.0
    features[rows, len(COLORS) + kind] += 1.0
    logits[rows, color * len(SHAPES) + kind] += 4.0
    classes = np.exp(logits - logits.max(1, keepdims=True))
    classes /= classes.sum(1, keepdims=True)
    boxes = np.array([s.box for s in shapes], dtype=np.float32)
    save_safetensors(
        {
            "features": torch.from_numpy(features),
            "boxes": torch.from_numpy(boxes),
            "classes": torch.from_numpy(classes.astype(np.float32)),
        },
        folder / "features.safetensors",
    )
    index = {
        "format": "ptm-region-features/1",
        "spec": detector_spec().to_dict(),
        "images": [
            {
                "image_id": s.image_id,
                "width": s.size,
                "height": s.size,
                "num_regions": len(s.shapes),
            }
            for s in scenes
        ],
    }
    atomic_write_text(folder / "features.json", json.dumps(index, indent=1) + "\n")
    atomic_write_text(folder / "vocab.txt", "\n".join(vocabulary()) + "\n")
    pairs = (json.dumps({"image_id": s.image_id, "caption": s.caption}) for s in scenes)
    atomic_write_text(folder / "pairs.jsonl", "\n".join(pairs) + "\n")
    return folder


def dataset(size: int) -> Path:
    """The generated set of ``size`` pairs (written once under the bench folder)."""
    folder = BENCH_DIR / "image_text" / f"fast-scenes-{size}"
    if not (folder / "pairs.jsonl").exists():
        started = time.perf_counter()
        write_scenes(folder, size)
        print(f"generated {size} pairs in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def train(data: Path, run_dir: Path, cache: Path, *, prepare: bool) -> dict[str, Any]:
    """One ``ptm pretrain`` of 20 steps, measured."""
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        "experiment=visualbert_tiny",
        f"data.train_dir={data}",
        "data.eval_dir=null",
        f"data.prepare={'true' if prepare else 'false'}",
        f"data.cache_dir={cache}",
        f"trainer.max_steps={STEPS}",
        "trainer.log_every=1",
        "trainer.save_every=100000",
        "trainer.progress=false",
        "trainer.device=cpu",
        f"trainer.output_dir={run_dir}",
    ]
    measured = run_measured(
        command, env=bench_env(), cwd=ROOT, timeout=1800, watch=run_dir / "metrics.jsonl"
    )
    if measured.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{measured.output}")
    return measured.to_dict()


def data_side(data: Path, cache: Path, mode: str) -> dict[str, float]:
    """In this process: RSS after the imports, then peak RSS after opening the pairs
    (``mode``: ``first`` prepares into an empty ``cache``, ``second`` finds it, ``old``
    reads everything whole) and building 20 batches of 64. Prints one JSON line."""
    import resource

    import psutil

    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_multimodal.data import ImageTextBatches, read_image_text_pairs
    from ptm_multimodal.prepared import open_image_text

    base = psutil.Process().memory_info().rss
    started = time.perf_counter()
    tokenizer = WordPieceTokenizer.from_vocab(data / "vocab.txt")
    if mode == "old":
        batches = ImageTextBatches(read_image_text_pairs(data), tokenizer, 64, seed=0)
    else:
        if mode == "first":
            shutil.rmtree(cache, ignore_errors=True)
        batches = ImageTextBatches(open_image_text(data, cache_dir=cache), tokenizer, 64, seed=0)
    opened = time.perf_counter() - started
    for _, _ in zip(range(STEPS), batches.iter_batches(0), strict=False):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    out = {
        "base_mb": base / 2**20,
        "peak_mb": peak / 2**20,
        "data_mb": (peak - base) / 2**20,
        "open_s": opened,
        "batches_s": time.perf_counter() - started - opened,
    }
    print(json.dumps(out), flush=True)
    return out


def measure_data_side(size: int) -> dict[str, Any]:
    """:func:`data_side` for each mode, each in a fresh process."""
    import subprocess

    data = dataset(size)
    cache = BENCH_DIR / "image_text" / f"data-cache-{size}"
    row = {}
    for mode in ("first", "second", "old"):
        command = [
            sys.executable,
            "-m",
            "benchmarks.multimodal_scale",
            "--data-side",
            str(data),
            "--cache",
            str(cache),
            "--mode",
            mode,
        ]
        done = subprocess.run(command, env=bench_env(), cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
        row[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def run(sizes: list[int], command: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for size in sizes:
        data = dataset(size)
        cache = BENCH_DIR / "image_text" / f"cache-{size}"
        shutil.rmtree(cache, ignore_errors=True)
        row = {
            "pairs": size,
            "new_first": train(data, BENCH_DIR / "image_text" / "run", cache, prepare=True),
            "new_second": train(data, BENCH_DIR / "image_text" / "run", cache, prepare=True),
            "old": train(data, BENCH_DIR / "image_text" / "run", cache, prepare=False),
            "prepared_mb": sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20,
            "data_side": measure_data_side(size),
        }
        results[str(size)] = row
        print(json.dumps(row), flush=True)
        save(results, command)  # after each size: a long run keeps what it measured
    return results


def save(results: dict[str, Any], command: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "multimodal_scale.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "multimodal_scale.md").write_text(write_markdown(results, command))


def write_markdown(results: dict[str, Any], command: str) -> str:
    lines = [
        "# Multimodal scale: prepare + 20 VisualBERT steps",
        "",
        f"Command: `{command}` (2 shared CPU cores; one run each).",
        "",
        "Peak RSS of the process tree (MiB) of `ptm pretrain experiment=visualbert_tiny "
        "data.train_dir=<N generated pairs> trainer.max_steps=20`; wall seconds to the end of "
        "the run in brackets. *new, first run* prepares into an empty cache, *second run* "
        "finds it; *old* is `data.prepare=false` (everything read and encoded up front).",
        "",
        "| pairs | prepared folder MiB | new, first run | new, second run | old |",
        "|---|---|---|---|---|",
    ]
    for row in results.values():

        def cell(m: dict[str, Any]) -> str:
            return f"{m['peak_tree_rss_mb']:,.0f} ({m['wall_s']:.0f} s)"

        lines.append(
            f"| {row['pairs']:,} | {row['prepared_mb']:.1f} | {cell(row['new_first'])} | "
            f"{cell(row['new_second'])} | {cell(row['old'])} |"
        )
    measured = [row for row in results.values() if "data_side" in row]
    if measured:
        lines += [
            "",
            "The data side alone, in a fresh process each: MiB of RSS above the process's "
            "RSS after its imports, at the peak of opening the pairs and building 20 batches "
            "of 64 (seconds to open in brackets). The runs above start from about 950 MiB of "
            "imports (torch, Hydra, Prefect), which hides most of the difference and varies by about "
            "100 MiB between runs on a loaded machine.",
            "",
            "| pairs | new, first run (prepare) | new, second run | old (read whole) |",
            "|---|---|---|---|",
        ]
        for row in measured:
            side = row["data_side"]

            def part(m: dict[str, Any]) -> str:
                return f"{m['data_mb']:,.1f} ({m['open_s']:.1f} s)"

            lines.append(
                f"| {row['pairs']:,} | {part(side['first'])} | {part(side['second'])} | "
                f"{part(side['old'])} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument(
        "--only-data-side",
        action="store_true",
        help="measure the data side alone and add it to the saved results",
    )
    parser.add_argument("--data-side", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.data_side is not None:
        data_side(args.data_side, args.cache, args.mode)
        return
    if args.only_data_side:
        saved = json.loads((RESULTS / "multimodal_scale.json").read_text())
        for size in args.sizes.split(","):
            saved[size]["data_side"] = measure_data_side(int(size))
            save(saved, f"python -m benchmarks.multimodal_scale --sizes {args.sizes}")
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    command = f"python -m benchmarks.multimodal_scale --sizes {args.sizes}"
    results = run(sizes, command)
    print(write_markdown(results, command))


if __name__ == "__main__":
    main()
