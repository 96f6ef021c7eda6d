"""`ptm link`'s linker flags: every setting explicit, --legacy-linker, overrides, the cache."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from flows.entity_linking import _prior_files
from flows.linker_flags import add_linker_arguments, linker_options
from ptm_knowledge.kg_corpus_settings import LinkerSettings
from ptm_knowledge.linking import LEGACY_SETTINGS
from ptm_knowledge.linking.noun_share import ENGLISH_NOUN_SHARE


def _parse(*argv: str) -> dict:
    parser = argparse.ArgumentParser()
    add_linker_arguments(parser)
    return linker_options(parser.parse_args(list(argv)))


def test_defaults_are_explicit_and_the_linkers() -> None:
    assert _parse() == dataclasses.asdict(LinkerSettings())


def test_legacy_linker_then_overrides() -> None:
    legacy = _parse("--legacy-linker")
    assert {k: legacy[k] for k in LEGACY_SETTINGS} == LEGACY_SETTINGS
    tuned = _parse("--legacy-linker", "--threshold", "0.4", "--pos-prior", "none")
    assert tuned["threshold"] == 0.4 and tuned["guard"] == "none" and tuned["pos_prior"] is None


def test_the_prior_file_keys_the_shard_cache(tmp_path: Path) -> None:
    assert _prior_files(_parse()) == [ENGLISH_NOUN_SHARE]
    assert _prior_files(_parse("--guard", "none")) == []
    own = tmp_path / "shares.tsv"
    own.write_text("dog\t0.9\n", encoding="utf-8")
    assert _prior_files(json.loads(json.dumps(_parse("--pos-prior", str(own))))) == [own]
