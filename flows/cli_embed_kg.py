"""``ptm embed-kg``: entity embeddings of a KG folder with PyKEEN (presets, early stopping).

ptm embed-kg --kg kg/sample --output emb                 # preset auto: small for this KG
ptm embed-kg --kg kg/wn18rr --output emb --model RotatE  # medium preset (5k-50k entities)
ptm embed-kg --kg kg/wn18rr --output emb --dim 200 --epochs 300 --negatives 128

A KG folder with train.tsv/valid.tsv/test.tsv (``ptm wordnet-kg --style wn18rr``) is used
as split there; otherwise 10% + 10% of triples.tsv are held out for validation and test.
Presets and the papers' settings: docs/knowledge/kg-embeddings.md.
"""

from __future__ import annotations

import argparse
from typing import Any

KIND = "embed-kg"
#: Flag -> train_kg_embeddings keyword (None = the preset's value).
_SETTINGS = {
    "dim": "embedding_dim",
    "epochs": "num_epochs",
    "batch_size": "batch_size",
    "lr": "learning_rate",
    "negatives": "num_negatives",
    "eval_every": "eval_every",
    "patience": "patience",
    "valid_sample": "valid_sample",
}


def add_parser(commands: Any) -> None:
    """Add ``embed-kg`` to the ``ptm`` sub-commands."""
    embed = commands.add_parser(
        KIND,
        help="embed a KG with PyKEEN (TransE, RotatE, ComplEx, DistMult)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    embed.add_argument("--kg", required=True, help="KG folder (entities.tsv, triples.tsv)")
    embed.add_argument("--output", required=True)
    embed.add_argument("--model", default="TransE", help="TransE, RotatE, ComplEx, DistMult, ...")
    embed.add_argument(
        "--preset",
        default="auto",
        choices=["auto", "small", "medium", "large"],
        help="size preset (auto: small < 5k entities <= medium <= 50k < large)",
    )
    embed.add_argument("--dim", type=int, default=None, help="embedding width (preset's)")
    embed.add_argument("--epochs", type=int, default=None, help="most epochs (preset's)")
    embed.add_argument("--batch-size", type=int, default=None)
    embed.add_argument("--lr", type=float, default=None, help="Adam learning rate")
    embed.add_argument("--negatives", type=int, default=None, help="negatives per positive")
    embed.add_argument(
        "--eval-every", type=int, default=None, help="epochs between validation evaluations"
    )
    embed.add_argument(
        "--patience",
        type=int,
        default=None,
        help="evaluations without 1%% MRR gain before stopping (0: never stop)",
    )
    embed.add_argument(
        "--valid-sample",
        type=int,
        default=None,
        help="validation triples scored at each early-stopping evaluation (0: all; preset's)",
    )
    embed.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    embed.add_argument("--threads", type=int, default=None, help="CPU threads (torch's default)")
    embed.add_argument("--seed", type=int, default=0)
    embed.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUT when it holds an earlier ptm output (never a folder ptm did not write)",
    )


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The explicit settings of the command line, as train_kg_embeddings keywords."""
    return {key: getattr(args, flag) for flag, key in _SETTINGS.items()}


def check(args: argparse.Namespace) -> None:
    """Fail on a bad setting or output folder before any work (or Prefect server) starts.

    Raises:
        ValueError: one line naming the flag.
    """
    from flows.kg_embedding import check_output
    from ptm_knowledge.kg import check_embedding_settings

    check_embedding_settings(preset=args.preset, **settings(args))
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"threads (--threads) is {args.threads}; it must be at least 1")
    if args.device not in ("auto", "cpu") and not args.device.startswith("cuda"):
        raise ValueError(f"device (--device) is {args.device!r}; use auto, cpu or cuda[:N]")
    check_output(args.output, overwrite=args.overwrite)


def keywords(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``embed_knowledge_graph`` (the flow, or its work in
    process) that the command line gives."""
    return {
        "preset": args.preset,
        "seed": args.seed,
        "device": args.device,
        "threads": args.threads,
        "overwrite": args.overwrite,
        **settings(args),
    }
