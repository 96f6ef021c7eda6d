"""The English noun-share prior: built from WordNet's sense counts, shipped, rebuilt equal."""

from __future__ import annotations

from pathlib import Path

import pytest
from wordnet_paths import FIXTURE, system_wordnet

from ptm_knowledge.linking import NounShare
from ptm_knowledge.linking.noun_share import ENGLISH_NOUN_SHARE
from ptm_knowledge.linking.wordnet_prior import main, wordnet_noun_shares


def test_builder_reads_the_fixture_in_the_real_format() -> None:
    # the fixture has no *.exc files: morphy's rules still apply, nothing fails
    shares = wordnet_noun_shares(FIXTURE)
    assert all(0.0 <= v <= 1.0 for v in shares.values())


def test_english_shares_from_wordnet() -> None:
    shares = wordnet_noun_shares(system_wordnet())
    assert shares["wild"] < 0.1 and shares["last"] < 0.1 and shares["out"] < 0.1
    assert shares["found"] < 0.1  # the verb "find" (verb.exc) outweighs the noun "found"
    assert shares["dog"] > 0.9 and shares["man"] > 0.9
    assert "horseshoe crab" not in shares  # a noun only: unlisted, counts as a noun


def test_shipped_table_is_what_the_builder_writes(tmp_path: Path) -> None:
    system_wordnet()
    out = tmp_path / "shares.tsv"
    assert main([str(out), "--wordnet-dir", str(system_wordnet())]) == 0
    assert out.read_text(encoding="utf-8") == ENGLISH_NOUN_SHARE.read_text(encoding="utf-8")
    assert NounShare.load("english").get("Wild") == pytest.approx(0.019)
