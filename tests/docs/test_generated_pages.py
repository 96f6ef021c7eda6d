"""The reference and results pages are generated from the code, and complete.

Every ``ptm`` command with its ``--help``, every trainer and family config key with its
type and default, every public module and every results file has its place; repository
links on published pages point at the site's pages.
"""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from flows.cli import _parser
from tools.docs_site import (
    api_reference,
    cli_reference,
    config_reference,
    hooks,
    pages,
    target_reference,
)
from tools.docs_site.pages import ROOT


def test_the_cli_page_has_every_command_and_its_help() -> None:
    page = cli_reference.page()
    commands = cli_reference.subcommands(_parser())
    assert len(commands) >= 14
    for name, _, sub in commands:
        assert f"## `ptm {name}`" in page, name
        assert f"| [`ptm {name}`](#ptm-{name})" in page, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in page, f"ptm {name} {flag}"
    assert "usage: ptm prepare [-h] --output OUTPUT" in page
    assert "| `INPUT` | str (several) | required | files, folders, globs |" in page
    assert "model=DIR\\|PRESET" in page  # a | in help text does not split the table cell


def test_the_config_page_has_every_trainer_key_with_type_and_default() -> None:
    from ptm_core.training import TrainerConfig

    rows = config_reference.rows(TrainerConfig, "trainer.")
    fields = [f for f in dataclasses.fields(TrainerConfig) if f.init]
    assert len(rows) == len(fields)
    by_key = {row.split("|")[1].strip(): row for row in rows}
    assert "| int | `1000` | Number of optimizer steps" in by_key["`trainer.max_steps`"]
    assert "| float \\| None | `1.0` |" in by_key["`trainer.max_grad_norm`"]
    assert "| str \\| None | `None` |" in by_key["`trainer.tensorboard_dir`"]
    assert "| str | required |" in by_key["`trainer.output_dir`"]


@dataclasses.dataclass
class Inner:
    """A block.

    Attributes:
        depth: how deep; a long description that
            goes on on the next line.
    """

    depth: int = 3


@dataclasses.dataclass
class Outer:
    """Settings.

    Args:
        inner: the block (``Inner``).
        names: some :class:`str` values.
    """

    inner: Inner = dataclasses.field(default_factory=Inner)
    names: list[str] = dataclasses.field(default_factory=list)


def test_nested_settings_become_dotted_keys_with_their_docs() -> None:
    rows = config_reference.rows(Outer)
    assert rows == [
        "| `inner` | Inner | (block below) | the block (`Inner`). |",
        "| `names` | list[str] | `[]` | some `str` values. |",
        "| `inner.depth` | int | `3` | how deep; a long description that goes on on the "
        "next line. |",
    ]


def test_every_model_and_objective_preset_has_its_targets_keys() -> None:
    models = target_reference.presets_by_target("model")
    assert "bert_tiny" in models["ptm_core.encoders.bert_encoder"]
    presets = {name for names in models.values() for name in names}
    assert presets == {path.stem for path in (ROOT / "configs" / "model").glob("*.yaml")}
    objectives = target_reference.presets_by_target("objective")
    assert {"mlm", "mlm_nsp"} <= set(objectives["ptm_core.objectives.MaskedLMObjective"])
    rows = target_reference.target_rows("ptm_core.objectives.MaskedLMObjective")
    mask_prob = next(row for row in rows if row.startswith("| `mask_prob` |"))
    assert "| float | `0.15` |" in mask_prob
    assert not any(row.startswith("| `_target_`") for row in rows)


def test_every_public_module_has_an_api_page() -> None:
    api = api_reference.pages()
    assert api["reference/api/ptm_core/encoders.md"] == "ptm_core.encoders"
    assert "reference/api/ptm_knowledge/linking/corpus.md" in api
    assert not [name for name in api.values() if "._" in name or name.startswith("_")]
    assert "flows.cli" not in api.values()  # its docstring is `ptm --help`: the CLI page
    assert api_reference.module_page("ptm_core.encoders.layers") == (
        "# `ptm_core.encoders.layers`\n\n::: ptm_core.encoders.layers\n"
    )
    # a package renders what it defines; what it re-exports links to where it is rendered
    package = api_reference.module_page("ptm_core.encoders")
    assert "::: ptm_core.encoders\n    options:\n      members: false\n" in package
    assert (
        "| `TransformerEncoder` | [`ptm_core.encoders.transformer`](encoders/transformer.md) |"
        in (package)
    )
    assert "| [`ptm_core.encoders.layers`](encoders/layers.md) |" in package
    index = api_reference.index_page()
    for module in api.values():
        assert f"[`{module}`]" in index


def test_every_results_file_has_a_page_generated_from_it() -> None:
    results = sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    generated = pages.generated()
    index = pages.results_index()
    for path in results:
        assert f"results/{path.stem}.md" in generated
        assert f"]({path.stem}.md)" in index
    page = generated["results/compression.md"]()
    assert page.startswith("# Compression: fine-tuned BERT-mini classifier\n")
    assert "Generated from `benchmarks/results/compression.md`" in page
    assert "| int8 (dynamic) |" in page


@pytest.mark.parametrize(
    ("source", "page", "text", "expected"),
    [
        # a package README's link to a docs page, and to another README (with its anchor)
        (
            "packages/core/README.md",
            "packages/core.md",
            "[a](../../docs/guides/python.md)",
            "[a](../guides/python.md)",
        ),
        (
            "docs/guides/knowledge.md",
            "guides/knowledge.md",
            "[b](../../packages/knowledge/README.md#kg-embeddings)",
            "[b](../packages/knowledge.md#kg-embeddings)",
        ),
        # a repository file the site does not publish: its path, in code
        (
            "ARCHITECTURE.md",
            "architecture.md",
            "[c](flows/runner.py)",
            "c (`flows/runner.py`)",
        ),
        # docs links, URLs, code and missing files are left to MkDocs
        ("docs/index.md", "index.md", "[d](install.md#with-pip)", "[d](install.md#with-pip)"),
        ("docs/index.md", "index.md", "[e](https://x.org/a.md)", "[e](https://x.org/a.md)"),
        ("docs/index.md", "index.md", "`[f](../ARCHITECTURE.md)`", "`[f](../ARCHITECTURE.md)`"),
        ("docs/index.md", "index.md", "[g](../no-such-file.md)", "[g](../no-such-file.md)"),
    ],
)
def test_repository_links_point_at_the_sites_pages(
    source: str, page: str, text: str, expected: str
) -> None:
    assert hooks.rewrite(text, ROOT / source, page) == expected
