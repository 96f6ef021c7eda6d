"""``ptm export --format hf`` on extension families: an XLM ``final/`` (written by
``ptm pretrain experiment=xlm_mlm_tiny``) loads in transformers' ``AutoModel`` (an
``XLMModel``) with the same hidden states (fp32, 1e-5, language ids given) and
``AutoTokenizer`` gives the ids of ptm's shared BPE tokenizer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers

from flows.cli import main
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.tokenizer import SharedBPETokenizer

TOL = 1e-5
SENTENCES = {
    "en": ["The cat sat on the mat.", "Paris is the capital of France!"],
    "fr": ["Le chat est assis sur le tapis.", "Paris est la capitale de la France !"],
}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def xlm_final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny XLM trained by ``ptm pretrain experiment=xlm_mlm_tiny`` (2 steps)."""
    run = tmp_path_factory.mktemp("xlm-run")
    code = main(
        [
            "pretrain",
            "experiment=xlm_mlm_tiny",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
        ]
    )
    assert code == 0
    return run / "final"


def _randomise(model: torch.nn.Module) -> None:
    # Two training steps leave LayerNorms near 1/0: shift every tensor so that a swapped
    # name cannot go unnoticed.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def test_xlm_final_exports_to_xlm_model(
    xlm_final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (xlm_final / "languages.json").is_file()
    ours = XLMEncoder.from_pretrained(xlm_final, dropout=0.0, attention_dropout=0.0)
    _randomise(ours)
    ours.save_pretrained(tmp_path / "final")
    tok = SharedBPETokenizer.from_directory(xlm_final)
    tok.save(tmp_path / "final")
    source = tmp_path / "final"

    out = tmp_path / "hf"
    capsys.readouterr()
    assert main(["export", "--format", "hf", str(source), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "family         xlm" in printed
    assert "XLMModel" in printed

    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["XLMModel"]
    assert config["lang2id"] == {lang: i for i, lang in enumerate(tok.languages)}
    hf = transformers.AutoModel.from_pretrained(out).eval()
    assert type(hf).__name__ == "XLMModel"
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    assert isinstance(hf_tok, transformers.PreTrainedTokenizerFast)
    assert len(hf_tok) == tok.vocab_size
    assert (hf_tok.bos_token, hf_tok.eos_token, hf_tok.pad_token, hf_tok.mask_token) == (
        "<s>",
        "</s>",
        "<pad>",
        "<mask>",
    )
    vocab = tok.vocab_info
    assert hf_tok.pad_token_id == vocab.pad_id == config["pad_index"]
    assert hf_tok.mask_token_id == vocab.mask_id == config["mask_index"]

    texts = [s for lang in ("en", "fr") for s in SENTENCES[lang]]
    langs_of = [lang for lang in ("en", "fr") for _ in SENTENCES[lang]]
    for text in texts:
        assert hf_tok(text)["input_ids"] == tok.encode(text), text
    ours.eval()
    enc = hf_tok(texts, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    langs = torch.tensor([[config["lang2id"][lang]] * ids.shape[1] for lang in langs_of])
    real = mask.bool()
    assert ids[real].numel() > 8 and (ids == vocab.unk_id).sum() < ids[real].numel()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, langs=langs, output_hidden_states=True)
        got = ours(ids, mask, langs=langs, output_hidden_states=True)
    err = (ref.last_hidden_state - got.last_hidden_state)[real].abs().max().item()
    assert err <= TOL, err
    assert got.hidden_states is not None
    for a, b in zip(ref.hidden_states, got.hidden_states, strict=True):
        assert (a - b)[real].abs().max().item() <= TOL
    # The language ids are carried over: other languages give other outputs on both sides.
    other = (langs + 1) % len(tok.languages)
    with torch.no_grad():
        ref_other = hf(input_ids=ids, attention_mask=mask, langs=other).last_hidden_state
        got_other = ours(ids, mask, langs=other).last_hidden_state
    assert (ref_other - ref.last_hidden_state)[real].abs().max() > 1e-2
    assert (ref_other - got_other)[real].abs().max().item() <= TOL


def test_xlm_export_without_tokenizer_names_the_folder(tmp_path: Path, xlm_final: Path) -> None:
    ours = XLMEncoder.from_pretrained(xlm_final)
    ours.save_pretrained(tmp_path / "bare")
    from flows.export import export
    from ptm_core.checkpoints import CheckpointError

    with pytest.raises(CheckpointError, match="no XLM tokenizer"):
        export(tmp_path / "bare", tmp_path / "hf")
