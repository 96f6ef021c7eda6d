"""The ``ptm`` command line.

ptm pretrain experiment=bert_tiny trainer.max_steps=50
ptm config experiment=bert_tiny          # print the composed config
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

EPILOG = """overrides use Hydra syntax: group=option (experiment=bert_tiny, model=bert_mini)
and dotted keys (trainer.max_steps=50, data.batch_size=8, seed=1)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptm",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    pretrain = commands.add_parser(
        "pretrain", help="pre-train an encoder (experiment=NAME + overrides)", epilog=EPILOG
    )
    pretrain.add_argument("overrides", nargs="*", help="Hydra overrides")
    show = commands.add_parser("config", help="print the composed config", epilog=EPILOG)
    show.add_argument("overrides", nargs="*", help="Hydra overrides")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ptm`` script; returns the process exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from omegaconf import OmegaConf

    from flows.config import ConfigError, compose_config

    try:
        cfg = compose_config(args.overrides)
    except ConfigError as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 2
    if args.command == "config":
        print(OmegaConf.to_yaml(cfg), end="")
        return 0

    from flows.recipes import run_recipe

    try:
        result = run_recipe(cfg)
    except (ValueError, FileNotFoundError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    print(f"experiment     {cfg.experiment_name}")
    if hasattr(result, "num_examples"):
        print(f"examples       {result.num_examples}")
    print(f"final encoder  {result.encoder_dir}")
    print(f"checkpoint     {result.last_checkpoint}")
    print(f"metrics        {result.metrics_path}")
    print(f"last metrics   {json.dumps(result.final_metrics, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
