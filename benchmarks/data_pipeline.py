"""The data-pipeline benchmarks, together: storage, preparation, scale, linking.

    python -m benchmarks.data_pipeline                                # 10 MB + 100 MB, no link
    python -m benchmarks.data_pipeline --sizes 10MB,100MB,1GB --old-sizes 10MB,100MB
    python -m benchmarks.data_pipeline --parts link                   # 1M-entity KG, ~30 min
    python -m benchmarks.data_pipeline --from-results                 # re-render the tables

Parts (each also runs alone: ``python -m benchmarks.<part>``):

- ``storage``: Arrow (``datasets``) vs numpy memmap on the 100 MB corpus (:mod:`.storage`);
- ``prepare``: ``ptm prepare`` vs ``datasets.map(batched=True)``, MB/s (:mod:`.prepare_pair`);
- ``scale``: prepare + 20 BERT-mini steps per corpus size (:mod:`.scale`);
- ``link``: 1M-entity / 10M-triple KG load and ``ptm link`` on 10k/100k documents
  (:mod:`.link_scale`); not in the default parts (up to ~55 min today, runs stop at 10 min).

Each part writes ``benchmarks/results/<part>.json`` and ``.md``; this module then writes
``benchmarks/results/data_pipeline.md`` and ``.json`` from every part's latest results.
Generated data stays under ``/tmp/ptm-bench/``. Run one benchmark at a time: they time
2-process work on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmarks import link_scale, prepare_pair, scale, storage

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = {
    "storage": ("Storage: Arrow vs memmap", storage),
    "prepare_pair": ("Preparation throughput: ptm vs datasets", prepare_pair),
    "scale": ("Scale: prepare + 20 steps", scale),
    "link_scale": ("Linking and KG", link_scale),
}
ALIASES = {"prepare": "prepare_pair", "link": "link_scale"}
DEFAULT_PARTS = "storage,prepare,scale"


def run_part(part: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one part with this command's settings."""
    if part == "storage":
        return storage.run(args.storage_size, args.workers, args.repeat, args.reads)
    if part == "prepare_pair":
        return prepare_pair.run(args.storage_size, args.workers, args.repeat)
    if part == "scale":
        return scale.run(
            args.sizes.split(","), [s for s in args.old_sizes.split(",") if s], args.workers
        )
    docs = [int(d) for d in args.link_docs.split(",") if d]
    return link_scale.run(args.entities, args.triples, docs, args.timeout, args.memory_limit)


def render(out: Path) -> dict[str, Any]:
    """``data_pipeline.md`` and ``.json`` from the parts' latest JSON files in ``out``."""
    combined: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "parts": {}}
    sections = ["# Data pipeline benchmarks", ""]
    for part, (title, module) in PARTS.items():
        path = out / f"{part}.json"
        if not path.exists():
            sections += [f"## {title}", "", "Not measured yet.", ""]
            continue
        results = json.loads(path.read_text())
        combined["parts"][part] = results
        sections += [f"## {title}", "", module.markdown(results)]
    (out / "data_pipeline.json").write_text(json.dumps(combined, indent=2) + "\n")
    text = "\n".join(sections)
    (out / "data_pipeline.md").write_text(text)
    return combined


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default=DEFAULT_PARTS, help=f"comma list of {list(PARTS)}")
    parser.add_argument("--sizes", default="10MB,100MB", help="scale: corpus sizes (add 1GB)")
    parser.add_argument("--old-sizes", default="", help="scale: also the pre-#14 raw path")
    parser.add_argument("--storage-size", default="100MB", help="storage and prepare corpus")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reads", type=int, default=10_000)
    parser.add_argument("--entities", type=int, default=1_000_000)
    parser.add_argument("--triples", type=int, default=10_000_000)
    parser.add_argument("--link-docs", default="10000,100000")
    parser.add_argument("--timeout", type=float, default=600, help="link: seconds per run")
    parser.add_argument("--memory-limit", type=float, default=12 * 1024, help="link: MiB")
    parser.add_argument("--from-results", action="store_true", help="only re-render tables")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.from_results:
        for name in args.parts.split(","):
            part = ALIASES.get(name, name)
            if part not in PARTS:
                parser.error(f"unknown part {name!r}; valid: {', '.join([*PARTS, *ALIASES])}")
            print(f"== {part}", flush=True)
            results = run_part(part, args)
            options = [f"--{k.replace('_', '-')}={v}" for k, v in _explicit(parser, args).items()]
            results["command"] = " ".join(["python -m benchmarks.data_pipeline", *options])
            (args.out / f"{part}.json").write_text(json.dumps(results, indent=2) + "\n")
            (args.out / f"{part}.md").write_text(PARTS[part][1].markdown(results))
    render(args.out)
    print((args.out / "data_pipeline.md").read_text())


def _explicit(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line (those that differ from the defaults)."""
    return {
        k: v
        for k, v in vars(args).items()
        if k not in ("out", "from_results") and v != parser.get_default(k)
    }


if __name__ == "__main__":
    main()
