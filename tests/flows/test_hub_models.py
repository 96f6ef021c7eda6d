"""``model=<Hugging Face Hub name>``: taken from the local Hugging Face cache when it is
there, else one line saying that ptm is offline and how to bring the model in as a folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from flows.config import ConfigError, compose_config
from flows.finetune import run_one

SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"
WORDS = ["glim", "vorp", "sneeth", "happy", "sad", "day", "night", "was", "a", "the", "."]


def _cache_model(cache: Path, repo_id: str) -> Path:
    """A tiny random BERT in the hub cache layout: models--org--name/{refs,snapshots}."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / SNAPSHOT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SNAPSHOT)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = transformers.BertTokenizer(
        vocab={token: i for i, token in enumerate(vocab)}, do_lower_case=True
    )
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return cache


def test_a_cached_hub_model_becomes_init_from(hub_cache: Path) -> None:
    snapshot = _cache_model(hub_cache, "acme/tiny-bert")
    for root in ("finetune", "config"):
        cfg = compose_config(["model=acme/tiny-bert"], config_name=root)
        assert Path(cfg.init_from) == snapshot
    cfg = compose_config(["model=bert_tiny"], config_name="finetune")
    assert cfg.init_from is None  # a preset stays a preset


def test_a_cached_hub_model_fine_tunes(hub_cache: Path, tmp_path: Path) -> None:
    _cache_model(hub_cache, "tiny-bert-uncased")
    run = run_one(
        [
            "task=sentiment",
            "model=tiny-bert-uncased",
            f"trainer.output_dir={tmp_path / 'run'}",
            "trainer.max_steps=2",
            "trainer.progress=false",
        ]
    )
    assert Path(run["final_dir"]).is_dir()


@pytest.mark.parametrize("name", ["bert-base-uncased", "google/bert_uncased_L-2_H-128_A-2"])
def test_an_uncached_hub_model_says_ptm_is_offline(hub_cache: Path, name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        compose_config([f"model={name}"], config_name="finetune")
    message = str(caught.value)
    assert "\n" not in message
    assert f"model={name} is not in the local Hugging Face cache ({hub_cache})" in message
    assert "offline" in message and "save_pretrained(DIR)" in message and "model=DIR" in message
    if name == "bert-base-uncased":
        assert "model=bert_base is a ptm preset with random weights" in message


def test_a_preset_typo_keeps_its_did_you_mean(hub_cache: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean model=bert_tiny"):
        compose_config(["model=bert_tny"], config_name="finetune")
