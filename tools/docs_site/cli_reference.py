"""``reference/cli.md``: every ``ptm`` command and its ``--help``, read from the parser.

The page is the argparse parser of :mod:`flows.cli` walked at build time (commands that
live in ``flows/cli_<name>.py`` modules are hooked into it there, so they appear too): a
table of the commands, then each command's arguments and its ``--help`` text exactly as
``ptm <command> --help`` prints it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

# argparse wraps help text to the terminal width: fix it so the page does not depend on
# the terminal that builds the site.
HELP_WIDTH = 96


@contextmanager
def _columns(width: int) -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _cell(text: str) -> str:
    """``text`` on one line, safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of each subcommand of ``parser``, in order."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        positional = action.metavar if isinstance(action.metavar, str) else action.dest
        name = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{positional}`"
        if action.choices is not None:
            kind = " \\| ".join(f"`{choice}`" for choice in action.choices)
        elif action.nargs == 0:
            kind = "flag"
        else:
            kind = getattr(action.type, "__name__", "str") if action.type else "str"
        if action.nargs in ("*", "+"):
            kind += " (several)"
        if action.required or (not action.option_strings and action.nargs not in ("*", "?")):
            default = "required"
        elif action.default in (None, False, argparse.SUPPRESS):
            default = ""
        else:
            default = f"`{action.default}`"
        rows.append(f"| {name} | {kind} | {default} | {_cell(action.help or '')} |")
    if not rows:
        return ["No arguments.", ""]
    return ["| argument | type | default | what |", "| --- | --- | --- | --- |", *rows, ""]


def _sections(prog: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = []
    for name, text, sub in subcommands(parser):
        command = f"{prog} {name}"
        lines += [f"{'#' * level} `{command}`", "", f"{text[:1].upper()}{text[1:]}.", ""]
        lines += _arguments(sub)
        lines += ["```text", sub.format_help().rstrip(), "```", ""]
        lines += _sections(command, sub, level + 1)
    return lines


def page() -> str:
    """The Markdown of ``reference/cli.md``."""
    from flows.cli import _parser

    with _columns(HELP_WIDTH):
        parser = _parser()
        rows = [
            f"| [`ptm {name}`](#ptm-{name.replace(' ', '-')}) | {_cell(text)} |"
            for name, text, _ in subcommands(parser)
        ]
        return "\n".join(
            [
                "# Command line",
                "",
                "*Generated from the `ptm` parser (`flows/cli.py`) when the site is built:*",
                "*what `ptm --help` and `ptm COMMAND --help` print.*",
                "",
                "| command | what |",
                "| --- | --- |",
                *rows,
                "",
                "```text",
                parser.format_help().rstrip(),
                "```",
                "",
                *_sections("ptm", parser, 2),
            ]
        )
