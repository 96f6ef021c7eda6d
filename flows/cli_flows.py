"""The ``ptm`` commands that have a Prefect flow: run in this process, or as a flow run.

``ptm prepare``, ``ptm link``, ``ptm evaluate`` and ``ptm embed-kg`` (like ``ptm pretrain``
and ``ptm finetune``) do their work in this process: no Prefect server, no flow run, no
``import prefect``. They run as flows, reporting to a Prefect API, when the user asks:

- ``--prefect`` on the command (``ptm flow pretrain|finetune`` for those two), or ``--dask``
  (a Dask task runner is Prefect's);
- a configured ``PREFECT_API_URL`` (environment or active Prefect profile), for the four
  commands that were flows before (not ``pretrain``/``finetune``: their flow runs print no
  end table on stdout yet, and they ran in process before as now);
- always for ``ptm demo``, ``ptm retrain`` and ``ptm deploy``, which are flows.

A flow run reports to the user's server, else to the one ``ptm server start`` runs, else to
a temporary one that dies with the command (:func:`flows.local_server.prefect_api`).
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Sequence
from typing import Any

from flows import cli_embed_kg
from flows.execution import prefect_configured

#: Commands that are flows, whatever the flags.
FLOW_COMMANDS = ("flow", "demo", "retrain", "deploy")
#: Commands that run in this process unless asked to run as a flow.
WITH_FLOW = ("prepare", "evaluate", "link", "embed-kg", "pretrain", "finetune")
#: Of those, the ones a configured ``PREFECT_API_URL`` alone turns into flow runs.
FLOW_WHEN_CONFIGURED = ("prepare", "evaluate", "link", "embed-kg")
PREFECT_HELP = (
    "run as a Prefect flow run (prepare/link/evaluate/embed-kg: the default when "
    "PREFECT_API_URL is set); it reports to the "
    "server of `ptm server start` when one runs"
)


def add_prefect_flags(commands: Any) -> None:
    """Give each command of :data:`WITH_FLOW` its ``--prefect`` flag."""
    for name in WITH_FLOW:
        commands.choices[name].add_argument("--prefect", action="store_true", help=PREFECT_HELP)


def runs_as_flow(args: argparse.Namespace) -> bool:
    """Whether this command line runs as a Prefect flow run (see the module docstring)."""
    if args.command in FLOW_COMMANDS:
        return True
    if args.command not in WITH_FLOW:
        return False
    asked = getattr(args, "prefect", False) or getattr(args, "dask", False)
    if asked or getattr(args, "dask_address", None):
        return True
    return args.command in FLOW_WHEN_CONFIGURED and prefect_configured()


def as_flow_command(args: argparse.Namespace) -> argparse.Namespace:
    """``ptm pretrain|finetune --prefect ...`` as the ``ptm flow pretrain|finetune ...`` it is."""
    return argparse.Namespace(
        command="flow",
        name=args.command,
        multirun=getattr(args, "multirun", False),
        overrides=args.overrides,
    )


def check(args: argparse.Namespace) -> None:
    """Arguments that can be checked without Prefect fail before any server or work."""
    if args.command == "evaluate":
        from flows.evaluation import check_evaluation

        check_evaluation(args.model_dir, args.corpus, args.baseline, args.report)
    if args.command == "prepare":
        from ptm_core.data.prepare import check_output_folder, check_preparation_settings
        from ptm_core.data.sources import find_inputs

        check_preparation_settings(vocab_size=args.vocab_size, workers=args.workers)
        find_inputs(args.inputs)
        check_output_folder(args.output)
    if args.command == "link":
        from flows.entity_linking import check_output_file

        check_output_file(args.output)
    if args.command == "embed-kg":
        cli_embed_kg.check(args)
    if args.command == "flow" and args.name == "domain-adapt":
        from flows.domain_adaptation import parse_settings

        parse_settings(args.overrides)


def run(args: argparse.Namespace) -> Any:
    """Check the arguments, then run the command in this process or as a flow run."""
    check(args)
    if not runs_as_flow(args):
        return _run_work(args, as_flow=False)
    from flows.local_server import prefect_api

    with prefect_api():
        return _run_flow(args)


#: command -> (the flow, the function it wraps), as ``module:name``.
_WORK = {
    "evaluate": ("flows.evaluate:evaluate", "flows.evaluation:evaluate_in_process"),
    "link": ("flows.link_entities:link_entities", "flows.entity_linking:link_entities_in_process"),
    "prepare": (
        "flows.prepare_corpus:prepare_corpus",
        "flows.preparation:prepare_corpus_in_process",
    ),
    "embed-kg": (
        "flows.embed_knowledge_graph:embed_knowledge_graph",
        "flows.kg_embedding:embed_knowledge_graph_in_process",
    ),
}


def _work(args: argparse.Namespace, as_flow: bool) -> Any:
    """The flow (with a Dask task runner for ``--dask``) or the plain function it wraps."""
    module, _, name = _WORK[args.command][0 if as_flow else 1].partition(":")
    work = getattr(importlib.import_module(module), name)
    if as_flow and (getattr(args, "dask", False) or getattr(args, "dask_address", None)):
        from prefect_dask import DaskTaskRunner

        address = args.dask_address
        work = work.with_options(
            task_runner=DaskTaskRunner(address=address) if address else DaskTaskRunner()
        )
    return work


def _run_work(args: argparse.Namespace, as_flow: bool) -> Any:
    """``prepare``, ``link``, ``evaluate`` or ``embed-kg``: the same call either way."""
    work = _work(args, as_flow)
    if args.command == "evaluate":
        from flows.evaluation_data import MIN_COMPARE_TOKENS

        limit = MIN_COMPARE_TOKENS if args.min_tokens is None else int(args.min_tokens)
        return work(
            args.model_dir,
            args.corpus,
            args.baseline,
            args.seed,
            args.report,
            args.task,
            min_tokens=limit,
        )
    if args.command == "link":
        from flows.linker_flags import linker_options

        return work(args.corpus, args.kg, args.output, args.shard_size, linker_options(args))
    if args.command == "prepare":
        on_dask = as_flow and bool(args.dask or args.dask_address)
        return work(
            args.inputs,
            args.output,
            tokenizer=args.tokenizer,
            vocab_size=args.vocab_size,
            workers=0 if on_dask else args.workers,
            text_field=args.text_field,
        )
    return work(args.kg, args.output, args.model, **cli_embed_kg.keywords(args))


def _run_flow(args: argparse.Namespace) -> Any:
    if args.command in _WORK:
        return _run_work(args, as_flow=True)
    if args.command == "flow":
        if args.name == "domain-adapt":
            from flows.domain_adapt_flow import domain_adapt_flow

            return domain_adapt_flow(args.overrides)
        if args.name == "finetune":
            from flows.finetune_flow import finetune

            return finetune(args.overrides, multirun=args.multirun)
        from flows.pretrain import pretrain

        return pretrain(args.overrides)
    if args.command == "demo":
        from flows.demo import demo

        return demo(args.output_dir, args.overrides)
    if args.command == "retrain":
        from flows.retrain import retrain

        return retrain(
            args.corpus,
            args.registry,
            args.overrides,
            args.eval_corpus,
            force=args.force,
            gate_task=args.gate_task,
            **({} if args.min_eval_tokens is None else {"min_eval_tokens": args.min_eval_tokens}),
        )
    if args.command == "deploy":
        from flows.deploy import deploy

        deployment = deploy(
            args.flow_name,
            cron=args.cron,
            name=args.name,
            parameters=parse_params(args.param),
            serve=args.serve,
        )
        print(f"deployment {deployment} scheduled with cron {args.cron!r}")
        print("inspect it with `prefect deployment ls`; run the schedule with `--serve`")
        return None
    raise AssertionError(args.command)


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``--param KEY=VALUE`` items of ``ptm deploy``: VALUE as JSON, else as a string."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params
