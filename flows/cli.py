"""The ``ptm`` command line.

ptm pretrain experiment=bert_tiny trainer.max_steps=50   # in process, no Prefect
ptm finetune task=kg_pair model=runs/demo/pretrain/final # fine-tune (in process)
ptm finetune --multirun task=kg_pair seed=0,1,2          # a sweep: mean +- std over seeds
ptm config experiment=bert_tiny                          # print the composed config
ptm config --schema family=xlm                           # the typed schemas, with defaults
ptm demo                                                 # end-to-end demo flow (Prefect)
ptm flow pretrain experiment=bert_tiny                   # the pretrain flow (Prefect)
ptm evaluate runs/demo/pretrain/final                    # evaluate + report (in process)
ptm evaluate --prefect runs/demo/pretrain/final          # the same as a Prefect flow run
ptm server start                                         # a Prefect server flow runs reuse
ptm export --format hf runs/demo/pretrain/final hf_model/  # a transformers folder
ptm predict runs/kg_pair/final rows.csv --output predictions.jsonl  # batched inference
ptm prepare data/ --output prepared/ [--tokenizer vocab.txt] [--workers 2]  # in process
ptm retrain --corpus data/ --registry runs/registry experiment=bert_tiny
ptm retrain --corpus data/ --gate-task kg_pair experiment=bert_tiny   # gate on a downstream task
ptm deploy retrain --cron "0 3 * * *" --param corpus=data/
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from flows import (
    cli_analyze,
    cli_embed_kg,
    cli_extend_vocab,
    cli_flows,
    cli_linking,
    cli_predict,
    cli_server,
    cli_wordnet,
    cli_wordnet_typing,
)
from ptm_core.atomic import DiskFullError

# Errors in the user's data, settings or disk: one ``ptm:`` line and exit 1, no traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, DiskFullError)
# `ptm compress --method onnx` without the compress extra: an ImportError that says the fix.
COMPRESS_ERRORS: tuple[type[BaseException], ...] = (*USER_ERRORS, ImportError)

OVERWRITE_HELP = "start the run afresh (trainer.resume=false): the old run is moved aside"
EPILOG = """overrides use Hydra syntax: group=option (experiment=bert_tiny, model=bert_mini)
and dotted keys (trainer.max_steps=50, data.batch_size=8, seed=1)."""


def non_negative_int(text: str) -> int:
    """An argparse type: a count (``--min-tokens -5`` is refused before any work)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptm",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("pretrain", "pre-train in this process (experiment=NAME + overrides)"),
        ("config", "print the composed config"),
    ):
        sub = commands.add_parser(name, help=text, epilog=EPILOG)
        if name == "pretrain":
            sub.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
        else:
            sub.add_argument(
                "--schema",
                action="store_true",
                help="print the typed schemas (trainer, the family's settings) with defaults",
            )
        sub.add_argument("overrides", nargs="*", help="Hydra overrides")
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune on a downstream task (task=NAME model=DIR|PRESET + overrides)",
        epilog=EPILOG,
    )
    finetune.add_argument(
        "--multirun", "-m", action="store_true", help="sweep: seed=0,1,2 lr=1e-3,3e-3 ..."
    )
    finetune.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    finetune.add_argument("overrides", nargs="*", help="Hydra overrides")
    commands.add_parser(
        "families", help="list the installed model families (what family=NAME accepts)"
    )
    flow = commands.add_parser("flow", help="run a flow under Prefect", epilog=EPILOG)
    flow.add_argument("name", choices=["pretrain", "finetune", "domain-adapt"])
    flow.add_argument("--multirun", "-m", action="store_true", help="finetune: run a sweep")
    flow.add_argument("overrides", nargs="*", help="Hydra overrides")
    demo = commands.add_parser("demo", help="end-to-end demo flow on the bundled samples")
    demo.add_argument("--output-dir", default="runs/demo")
    demo.add_argument("overrides", nargs="*", help="Hydra overrides for the pre-training")
    evaluate = commands.add_parser("evaluate", help="evaluate a model against a baseline")
    evaluate.add_argument("model_dir")
    evaluate.add_argument("--corpus", default=None)
    evaluate.add_argument("--baseline", default="random", help="'random' or a model directory")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--report", default=None, help="report path")
    evaluate.add_argument(
        "--min-tokens",
        type=non_negative_int,
        default=None,
        help="fewest scored tokens to compare with a baseline model (default 1000)",
    )
    evaluate.add_argument(
        "--task",
        action="append",
        default=None,
        help="also fine-tune on this task preset and report its dev metrics (repeatable)",
    )
    export = commands.add_parser(
        "export", help="write a final/ folder as a Hugging Face transformers folder"
    )
    export.add_argument("--format", default="hf", choices=["hf"])
    export.add_argument("source", help="a final/ of ptm pretrain or ptm finetune")
    export.add_argument("output", help="the folder to write (a new or empty one)")
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUT when it holds an earlier ptm output (never a folder ptm did not write)",
    )
    export.add_argument(
        "--text-layers-only",
        action="store_true",
        help="ERNIE-THU: export only the text layers, without the knowledge layers",
    )
    export.add_argument(
        "--peft-adapter",
        action="store_true",
        help="a finetune.peft=lora|ia3 run: write OUT/adapter (a peft adapter folder) beside "
        "the base model instead of merging the adapter into the weights",
    )
    compress = commands.add_parser(
        "compress", help="quantise, prune or ONNX-export a final/ into a new folder"
    )
    compress.add_argument("source", help="a final/ of ptm pretrain or ptm finetune")
    compress.add_argument(
        "--method",
        required=True,
        choices=["int8", "int8-weight", "int4-weight", "prune-heads", "drop-layers", "onnx"],
    )
    compress.add_argument("--output", required=True, help="the folder to write (a new one)")
    compress.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUT when it holds an earlier ptm output (never a folder ptm did not write)",
    )
    compress.add_argument("--fraction", type=float, default=None, help="prune-heads: share")
    compress.add_argument(
        "--keep", default=None, help="drop-layers: bottom:K|top:K|every-other|0,2"
    )
    compress.add_argument("--data", default=None, help="prune-heads: labelled file (default dev)")
    compress.add_argument(
        "--importance", default=None, help="prune-heads: heads.json of `ptm analyze MODEL heads`"
    )
    compress.add_argument("--group-size", type=int, default=None, help="int4-weight: 32..256")
    compress.add_argument("--exporter", default=None, choices=["dynamo", "torchscript"])
    link = commands.add_parser("link", help="link a corpus against a KG (sharded, cached)")
    link.add_argument("--corpus", required=True)
    link.add_argument("--kg", required=True, help="directory with entities.tsv/triples.tsv")
    link.add_argument("--output", required=True, help="linked corpus (.jsonl)")
    link.add_argument("--shard-size", type=int, default=8)
    link.add_argument("--dask", action="store_true", help="run shards on a local Dask cluster")
    link.add_argument("--dask-address", default=None, help="scheduler of an existing cluster")
    from flows.linker_flags import add_linker_arguments

    add_linker_arguments(link)
    prepare = commands.add_parser(
        "prepare", help="tokenize a corpus once into memory-mapped shards (cached, resumable)"
    )
    prepare.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders, globs")
    prepare.add_argument("--output", required=True, help="the prepared corpus folder")
    prepare.add_argument("--tokenizer", default=None, help="vocab.txt or folder (default: train)")
    prepare.add_argument("--vocab-size", type=int, default=8000, help="of a trained tokenizer")
    prepare.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    prepare.add_argument("--text-field", default="text", help="JSONL key / Arrow column")
    prepare.add_argument("--dask", action="store_true", help="build shards on a local Dask cluster")
    prepare.add_argument("--dask-address", default=None, help="scheduler of an existing cluster")
    cli_wordnet.add_parser(commands)
    cli_linking.add_parser(commands)
    cli_wordnet_typing.add_parser(commands)
    cli_embed_kg.add_parser(commands)
    cli_extend_vocab.add_parser(commands)
    retrain = commands.add_parser("retrain", help="one retraining round with promotion")
    retrain.add_argument("--corpus", required=True)
    retrain.add_argument("--registry", default="runs/registry")
    retrain.add_argument("--eval-corpus", default=None)
    retrain.add_argument(
        "--min-eval-tokens",
        type=non_negative_int,
        default=None,
        help="fewest scored tokens to compare candidate and champion (default 1000)",
    )
    retrain.add_argument("--force", action="store_true", help="retrain even without new data")
    retrain.add_argument(
        "--gate-task",
        default=None,
        help="promote on this task preset's dev metric (fine-tunes candidate and champion)",
    )
    retrain.add_argument("overrides", nargs="*", help="Hydra overrides for the pre-training")
    cli_predict.add_parser(commands)
    cli_analyze.add_parser(commands)
    deploy = commands.add_parser("deploy", help="schedule a flow with cron")
    deploy.add_argument("flow_name", choices=["retrain", "pretrain", "evaluate"])
    deploy.add_argument("--cron", required=True, help='e.g. "0 3 * * *"')
    deploy.add_argument("--name", default=None)
    deploy.add_argument(
        "--param", action="append", default=[], help="flow parameter KEY=JSON_OR_STRING"
    )
    deploy.add_argument("--serve", action="store_true", help="block and run the schedule here")
    cli_server.add_parser(commands)
    cli_flows.add_prefect_flags(commands)
    return parser


def _setup_logging() -> None:
    from flows.cli_logging import setup_logging

    setup_logging(USER_ERRORS)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ptm`` script; returns the process exit code."""
    try:
        return _main(argv)
    except KeyboardInterrupt as exc:
        # Training says where it stopped and where the same command resumes
        # (ptm_core.training.trainer.TrainingInterrupted); 130 = 128 + SIGINT.
        print(f"ptm: {exc or 'interrupted'}", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("pretrain", "finetune") and getattr(args, "overwrite", False):
        args.overrides = [*args.overrides, "trainer.resume=false"]
    _setup_logging()
    from flows.config_errors import ConfigError  # not flows.config: Hydra costs ~1 s
    from ptm_core.progress import ProgressSettingError, check_progress_settings

    try:
        check_progress_settings()  # a typo fails now, not after the model is built
    except ProgressSettingError as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 2

    if args.command in ("pretrain", "finetune") and cli_flows.runs_as_flow(args):
        args = cli_flows.as_flow_command(args)
    if args.command == cli_server.KIND:
        return cli_server.run(args)
    if args.command == "families":
        from flows.runner import families_table

        print(families_table())
        return 0
    if args.command in ("pretrain", "config"):
        from omegaconf import OmegaConf

        from flows.config import compose_config

        try:
            cfg = compose_config(args.overrides)
        except ConfigError as exc:
            print(f"ptm: {exc}", file=sys.stderr)
            return 2
        if args.command == "config":
            if args.schema:
                from flows.config_schema import schema_text

                print(schema_text(cfg), end="")
                return 0
            print(OmegaConf.to_yaml(cfg), end="")
            return 0
        from flows.runner import run_composed
        from ptm_core.training.loggers import run_config

        config = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(config, dict)  # a composed root config is a mapping
        try:
            with run_config({str(k): v for k, v in config.items()}):  # MLflow: whole config
                result = run_composed(cfg)
        except ConfigError as exc:
            print(f"ptm: {exc}", file=sys.stderr)
            return 2
        except USER_ERRORS as exc:
            print(f"ptm: {exc}", file=sys.stderr)
            return 1
        from flows.end_table import print_pretrain_table

        print_pretrain_table(str(cfg.experiment_name), result)
        return 0
    if args.command == "finetune":
        return _finetune(args)
    if args.command == cli_wordnet.KIND:
        return cli_wordnet.run(args)
    if args.command == cli_linking.KIND:
        return cli_linking.run(args)
    if args.command == cli_wordnet_typing.KIND:
        return cli_wordnet_typing.run(args)
    if args.command == "predict":
        return cli_predict.run(args)
    if args.command == cli_analyze.KIND:
        return cli_analyze.run(args)
    if args.command == cli_extend_vocab.KIND:
        return cli_extend_vocab.run(args)
    if args.command == "compress":
        from flows.compress import compress

        try:
            compress(
                args.source,
                args.output,
                args.method,
                fraction=args.fraction,
                keep=args.keep,
                data=args.data,
                importance=args.importance,
                group_size=args.group_size,
                exporter=args.exporter,
                overwrite=args.overwrite,
            )
        except COMPRESS_ERRORS as exc:
            print(f"ptm: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "export":
        from flows.export import export

        try:
            export(
                args.source,
                args.output,
                format=args.format,
                overwrite=args.overwrite,
                text_layers_only=args.text_layers_only,
                peft_adapter=args.peft_adapter,
            )
        except USER_ERRORS as exc:
            print(f"ptm: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        cli_flows.run(args)  # in this process, or as a flow run (--prefect, PREFECT_API_URL)
    except ConfigError as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 2
    except USER_ERRORS as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    return 0


def _finetune(args: argparse.Namespace) -> int:
    """``ptm finetune``: one run, or a sweep with ``--multirun``, in this process."""
    from flows.config import ConfigError
    from flows.end_table import print_finetune_table
    from flows.finetune import run_one, run_sweep

    def run_and_show(overrides: list[str]) -> dict[str, Any]:
        run = run_one(overrides)
        print_finetune_table(run)  # each run's metrics and folders as it ends
        return run

    try:
        if args.multirun:
            print("\n" + run_sweep(args.overrides, runner=run_and_show)["table"])
            return 0
        run_and_show(args.overrides)
    except ConfigError as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 2
    except USER_ERRORS as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
