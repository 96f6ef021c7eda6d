"""``ptm export --format hf`` on extension families: an XLM ``final/`` (written by
``ptm pretrain experiment=xlm_mlm_tiny``) loads in transformers' ``AutoModel`` (an
``XLMModel``) with the same hidden states (fp32, 1e-5, language ids given), in
``AutoModelForMaskedLM`` (``XLMWithLMHeadModel``, with its saved MLM bias) with the same
logits, and
``AutoTokenizer`` gives the ids of ptm's shared BPE tokenizer; a VisualBERT ``final/``
(``experiment=visualbert_tiny model.box_position=false``) loads in
``AutoModelForPreTraining`` with the same hidden states (``visual_embeds`` given), MLM and
sentence-image logits, and the same WordPiece ids."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import safetensors.torch
import torch
import transformers

from flows.cli import main
from flows.export import export
from ptm_core.checkpoints import CheckpointError
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.tokenizer import SharedBPETokenizer
from ptm_multimodal.loading import load_multimodal
from ptm_multimodal.visualbert import visualbert
from ptm_multimodal.visualbert_hf_export import visualbert_config_to_hf

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


def test_xlm_final_with_its_mlm_head_exports_to_xlm_with_lm_head(
    xlm_final: Path, tmp_path: Path
) -> None:
    heads = safetensors.torch.load_file(str(xlm_final / "heads.safetensors"))
    (bias_name,) = [k for k in heads if k.endswith("head.proj.bias")]
    ours = XLMEncoder.from_pretrained(xlm_final, dropout=0.0, attention_dropout=0.0)
    _randomise(ours)
    source = tmp_path / "final"
    ours.save_pretrained(source)
    SharedBPETokenizer.from_directory(xlm_final).save(source)
    bias = heads[bias_name] + torch.randn(heads[bias_name].shape) * 0.5
    safetensors.torch.save_file({**heads, bias_name: bias}, str(source / "heads.safetensors"))

    result = export(source, tmp_path / "hf")
    assert (result.architecture, result.auto_class) == (
        "XLMWithLMHeadModel",
        "AutoModelForMaskedLM",
    )
    assert result.heads == [bias_name.split(".")[1]]
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == "XLMWithLMHeadModel"
    tok = SharedBPETokenizer.from_directory(source)
    rows = [tok.encode(s) for s in SENTENCES["en"] + SENTENCES["fr"]]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tok.vocab_info.pad_id] * (width - len(r)) for r in rows])
    mask = (ids != tok.vocab_info.pad_id).long()
    langs = torch.tensor([[0] * width] * 2 + [[1] * width] * 2)
    ours.eval()
    with torch.no_grad():
        hidden = ours(ids, mask, langs=langs).last_hidden_state
        # ptm's XLM output layer: the tied token table and the saved bias, no transform.
        expected = hidden @ ours.word_embeddings.weight.T + bias
        got = hf(input_ids=ids, attention_mask=mask, langs=langs).logits
    real = mask.bool()
    assert (got - expected)[real].abs().max().item() <= TOL


def test_xlm_export_refuses_a_head_of_another_vocabulary(xlm_final: Path, tmp_path: Path) -> None:
    source = tmp_path / "final"
    XLMEncoder.from_pretrained(xlm_final).save_pretrained(source)
    SharedBPETokenizer.from_directory(xlm_final).save(source)
    heads = safetensors.torch.load_file(str(xlm_final / "heads.safetensors"))
    heads = {k: torch.cat([v, v]) if k.endswith("proj.bias") else v for k, v in heads.items()}
    safetensors.torch.save_file(heads, str(source / "heads.safetensors"))
    with pytest.raises(CheckpointError, match=r"heads\.safetensors: .*another checkpoint"):
        export(source, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_xlm_export_without_tokenizer_names_the_folder(tmp_path: Path, xlm_final: Path) -> None:
    ours = XLMEncoder.from_pretrained(xlm_final)
    ours.save_pretrained(tmp_path / "bare")
    with pytest.raises(CheckpointError, match="no XLM tokenizer"):
        export(tmp_path / "bare", tmp_path / "hf")


VISUALBERT_FAST = [
    "trainer.max_steps=2",
    "trainer.save_every=2",
    "trainer.log_every=2",
    "trainer.progress=false",
    "trainer.device=cpu",
    "data.batch_size=8",
    "data.synthetic.num_images=24",
    "data.synthetic.eval_images=8",
]
CAPTIONS = ["a red circle above a blue square", "two green triangles", "a small dog"]


@pytest.fixture(scope="module")
def visualbert_final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny VisualBERT (MLM + ITM, no box term) by ``ptm pretrain experiment=visualbert_tiny``."""
    run = tmp_path_factory.mktemp("visualbert-run")
    code = main(
        [
            "pretrain",
            "experiment=visualbert_tiny",
            "model.box_position=false",
            *VISUALBERT_FAST,
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0
    return run / "final"


def test_visualbert_final_exports_to_visualbert_for_pretraining(
    visualbert_final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrapped, tokenizer = load_multimodal(visualbert_final)
    _randomise(wrapped)
    # save in the final/ layout (model.safetensors + config.json + tokenizer)
    source = tmp_path / "final"
    source.mkdir()
    safetensors.torch.save_model(wrapped, str(source / "model.safetensors"))
    (source / "config.json").write_text(json.dumps(wrapped.checkpoint_config()))
    tokenizer.save(source)

    out = tmp_path / "hf"
    capsys.readouterr()
    assert main(["export", "--format", "hf", str(source), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "family         visualbert" in printed
    assert "VisualBertForPreTraining" in printed

    hf = transformers.AutoModelForPreTraining.from_pretrained(out).eval()
    assert type(hf).__name__ == "VisualBertForPreTraining"
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    for text in CAPTIONS:
        assert hf_tok(text)["input_ids"] == tokenizer.encode(text).input_ids, text

    wrapped.eval()
    model = wrapped.encoder
    enc = hf_tok(CAPTIONS, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    g = torch.Generator().manual_seed(3)
    regions = 5
    visual = torch.randn(len(CAPTIONS), regions, model.visual_embedding_dim, generator=g)
    visual_mask = torch.ones(len(CAPTIONS), regions, dtype=torch.long)
    visual_mask[2, 3:] = 0
    real = torch.cat([mask, visual_mask], dim=1).bool()
    with torch.no_grad():
        theirs = hf(
            input_ids=ids,
            attention_mask=mask,
            visual_embeds=visual,
            visual_attention_mask=visual_mask,
            output_hidden_states=True,
        )
        base = hf.visual_bert(
            input_ids=ids,
            attention_mask=mask,
            visual_embeds=visual,
            visual_attention_mask=visual_mask,
        ).last_hidden_state
        ours = model(
            ids,
            visual,
            attention_mask=mask,
            visual_mask=visual_mask,
            output_hidden_states=True,
        )
        mlm = wrapped.objectives.objectives["mlm"].head(ours.last_hidden_state)
        itm = wrapped.objectives.objectives["itm"].head(ours.last_hidden_state)
    assert (base - ours.last_hidden_state)[real].abs().max().item() <= TOL
    assert ours.hidden_states is not None
    for a, b in zip(theirs.hidden_states, ours.hidden_states, strict=True):
        assert (a - b)[real].abs().max().item() <= TOL
    assert (theirs.prediction_logits - mlm)[real].abs().max().item() <= TOL
    # ptm: 1 = match; Hugging Face: 0 = match
    assert (theirs.seq_relationship_logits - itm.flip(-1)).abs().max().item() <= TOL
    # the regions matter (so the visual tables are really carried over)
    with torch.no_grad():
        other = hf.visual_bert(
            input_ids=ids,
            attention_mask=mask,
            visual_embeds=visual + 1.0,
            visual_attention_mask=visual_mask,
        ).last_hidden_state
    assert (other - base)[real].abs().max() > 1e-2


def test_visualbert_with_box_term_is_refused_with_the_field_and_fix() -> None:

    model = visualbert(
        vocab_size=50,
        visual_embedding_dim=8,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        max_positions=8,
        box_position=True,
    )
    with pytest.raises(CheckpointError, match=r"box_position.*model\.box_position=false"):
        visualbert_config_to_hf(model)
