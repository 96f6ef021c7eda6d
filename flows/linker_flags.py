"""The entity linker's command-line flags, shared by the commands that link text
(``ptm link``; ``ptm evaluate-linking --kg``): one place that turns them into
:class:`~ptm_knowledge.linking.EntityLinker` keyword settings."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ptm_knowledge.kg_corpus_settings import LinkerSettings

_DEFAULTS = LinkerSettings()


def add_linker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--threshold``, ``--guard``, ... (defaults: :class:`LinkerSettings`)."""
    group = parser.add_argument_group("entity linker (docs/knowledge/linking.md)")
    group.add_argument(
        "--threshold",
        type=float,
        default=None,
        help=f"NIL threshold: lowest score linked (default {_DEFAULTS.threshold}, calibrated)",
    )
    group.add_argument("--guard", choices=["pos", "none"], default=None, help="default pos")
    group.add_argument(
        "--disambiguation", choices=["context", "overlap"], default=None, help="default context"
    )
    group.add_argument(
        "--pos-prior",
        default=None,
        help="noun-share TSV for untagged text, 'english' (default) or 'none'",
    )
    group.add_argument("--min-noun-share", type=float, default=None, help="default 0.5")
    group.add_argument("--prior-weight", type=float, default=None, help="default 0.5")
    group.add_argument(
        "--case", choices=["smart", "sensitive", "insensitive"], default=None, help="default smart"
    )
    group.add_argument(
        "--legacy-linker",
        action="store_true",
        help="the linker before #38 (guard none, overlap, threshold 0.3); other flags override",
    )


def linker_options(args: argparse.Namespace) -> dict[str, Any]:
    """Every linker setting, the defaults made explicit (they key the shard cache)."""
    from ptm_knowledge.linking import LEGACY_SETTINGS

    options = dataclasses.asdict(LinkerSettings())
    if args.legacy_linker:
        options.update(LEGACY_SETTINGS)
    for name in ("threshold", "guard", "disambiguation", "min_noun_share", "prior_weight", "case"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    if args.pos_prior is not None:
        options["pos_prior"] = None if args.pos_prior.lower() == "none" else args.pos_prior
    return options
