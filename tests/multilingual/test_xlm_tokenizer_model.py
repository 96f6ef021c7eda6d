"""Shared BPE vocabulary, language embeddings through extra_embeds, the recipe end to end."""

from __future__ import annotations

from pathlib import Path

import torch

from ptm_multilingual import (
    SPECIAL_TOKENS,
    SharedBPETokenizer,
    XLMEncoder,
    read_monolingual_corpora,
    xlm_text_encoder,
)

ROOT = Path(__file__).resolve().parents[2]


def test_shared_bpe_vocabulary(tmp_path: Path) -> None:
    texts = read_monolingual_corpora(ROOT / "data_specs" / "monolingual_corpus" / "sample")
    tok = SharedBPETokenizer.train(texts, vocab_size=300, alpha=0.5, seed=0)
    assert tok.languages == ["de", "en", "fr"]
    assert [tok.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    info = tok.vocab_info
    assert (info.cls_id, info.sep_id, info.pad_id, info.unk_id, info.mask_id) == (0, 1, 2, 3, 4)
    # One vocabulary for all three languages: no unknown pieces in any of them.
    for lang, sentences in texts.items():
        ids = tok.encode(sentences[0])
        assert ids and info.unk_id not in ids, lang
    tok.save(tmp_path / "tok")
    again = SharedBPETokenizer.from_directory(tmp_path / "tok")
    assert again.encode("Die Katze sieht den Hund.") == tok.encode("Die Katze sieht den Hund.")
    assert again.lang_id("fr") == 2


def test_training_twice_gives_the_same_ids() -> None:
    # The `tokenizers` BPE trainer numbers pieces in hash-map order (huggingface/tokenizers
    # #1794), so a seeded XLM run trained other embedding rows each time and its results
    # depended on what ran before it. Training renumbers the pieces canonically.
    texts = read_monolingual_corpora(ROOT / "data_specs" / "monolingual_corpus" / "sample")
    sentences = [s for lang in sorted(texts) for s in texts[lang]]
    runs = [SharedBPETokenizer.train(texts, vocab_size=300, alpha=0.5, seed=0) for _ in range(6)]
    first = runs[0]
    for other in runs[1:]:
        assert other.tokenizer.get_vocab() == first.tokenizer.get_vocab()
        assert [e.ids for e in other.tokenizer.encode_batch(sentences)] == [
            e.ids for e in first.tokenizer.encode_batch(sentences)
        ]
    assert [first.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]


def test_language_embeddings_enter_through_extra_embeds() -> None:
    text = xlm_text_encoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2)
    model = XLMEncoder(text, ["en", "fr"]).eval()
    ids = torch.randint(5, 50, (1, 6))
    langs = torch.tensor([[0, 0, 0, 1, 1, 1]])
    with torch.no_grad():
        ours = model(ids, langs=langs).last_hidden_state
        by_hand = text(ids, extra_embeds=model.lang_embeddings(langs)).last_hidden_state
        plain = text(ids).last_hidden_state
    assert torch.equal(ours, by_hand)
    assert not torch.allclose(ours, plain)
    # Padded rows are zeroed, as XLM does; real rows do not depend on padding.
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        padded = model(ids, mask, langs=langs).last_hidden_state
        short = model(ids[:, :4], langs=langs[:, :4]).last_hidden_state
    assert torch.equal(padded[0, 4:], torch.zeros_like(padded[0, 4:]))
    torch.testing.assert_close(padded[:, :4], short, atol=1e-6, rtol=1e-5)


def test_xlm_recipe_runs_from_the_preset(tmp_path: Path) -> None:
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        [
            "experiment=xlm_tlm_tiny",
            "trainer.max_steps=4",
            "trainer.log_every=2",
            "trainer.device=cpu",
            "trainer.progress=false",
            "data.vocab_size=200",
            "data.batch_size=4",
            "model.hidden_size=16",
            "model.intermediate_size=64",
            "objective.objectives.xlm_mlm.frequency_alpha=0.5",
            f"trainer.output_dir={tmp_path}",
        ]
    )
    result = run_composed(cfg)
    assert result.final_metrics["step"] == 4
    assert 0.0 <= result.final_metrics["retrieval/en-fr/mean"] <= 1.0
    loaded = XLMEncoder.from_pretrained(result.encoder_dir)
    assert loaded.languages == ["de", "en", "fr"]
    assert (result.encoder_dir / "tokenizer.json").exists()
