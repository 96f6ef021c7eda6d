"""VL-BERT's text-only rows: built as jackroos/VL-BERT's GeneralCorpus builds them,
appended after the image-text rows, masked like them, their MLM loss a group of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from ptm_core.encoders import EncoderOutput
from ptm_core.objectives import IGNORE_INDEX, MaskedLMObjective
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal.data import ImageTextBatches, read_image_text_pairs
from ptm_multimodal.imagebert import imagebert
from ptm_multimodal.pretraining import text_only_rows
from ptm_multimodal.settings import ImageTextData, TextOnlyData
from ptm_multimodal.synthetic import write_synthetic_dataset, write_text_corpus
from ptm_multimodal.text_rows import TEXT_ONLY_GROUP, TextOnlyRows
from ptm_multimodal.vlbert import vlbert


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_dataset(tmp_path_factory.mktemp("pairs") / "train", 16, seed=8)


@pytest.fixture(scope="module")
def tokenizer(pairs: Path) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(pairs / "vocab.txt")


def test_a_row_is_a_line_and_the_next_ones_cut_to_max_length(
    tmp_path: Path, tokenizer: WordPieceTokenizer
) -> None:
    corpus = tmp_path / "text.txt"
    corpus.write_text("a red circle\n\nblue square above a green triangle\nof\n", encoding="utf-8")
    rows = TextOnlyRows.from_file(corpus, tokenizer, rows_per_batch=4, max_length=8)
    assert rows.num_lines == 3  # the blank line is skipped
    ids, special = rows.row(2)  # "of", then wraps to the first line
    words = tokenizer.decode(ids)
    assert words == "of a red circle blue square"
    assert len(ids) == 8 and special == [1, 0, 0, 0, 0, 0, 0, 1]
    vocab = tokenizer.vocab_info
    assert ids[0] == vocab.cls_id and ids[-1] == vocab.sep_id
    with pytest.raises(FileNotFoundError, match=r"text_only\.corpus"):
        TextOnlyRows.from_file(tmp_path / "none.txt", tokenizer, rows_per_batch=1, max_length=8)
    (tmp_path / "blank.txt").write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no non-empty line"):
        TextOnlyRows.from_file(tmp_path / "blank.txt", tokenizer, rows_per_batch=1, max_length=8)


def test_text_rows_follow_the_image_text_rows_without_regions(
    tmp_path: Path, pairs: Path, tokenizer: WordPieceTokenizer
) -> None:
    corpus = write_text_corpus(tmp_path / "text.txt", 50, seed=4)
    rows = TextOnlyRows.from_file(corpus, tokenizer, rows_per_batch=6, max_length=20)
    data = read_image_text_pairs(pairs)
    plain = ImageTextBatches(data, tokenizer, 4, negative_prob=0.0, seed=3)
    mixed = ImageTextBatches(data, tokenizer, 4, negative_prob=0.0, seed=3, extra_rows=rows)
    before, after = plain.batch(0, 1), mixed.batch(0, 1)
    assert after["input_ids"].shape == (10, 20)
    width = before["input_ids"].shape[1]
    for key in ("input_ids", "attention_mask", "special_tokens_mask"):
        assert torch.equal(after[key][:4, :width], before[key]), key
    assert (after["input_ids"][:4, width:] == tokenizer.vocab_info.pad_id).all()
    for key in ("visual_features", "visual_boxes", "visual_mask", "visual_classes"):
        assert torch.equal(after[key][:4], before[key]) and not after[key][4:].any(), key
    assert after["match_label"].tolist() == [1] * 10
    assert after["mlm_row_groups"].tolist() == [0] * 4 + [TEXT_ONLY_GROUP] * 6
    assert (after["attention_mask"][4:].sum(1) == 20).all()
    assert torch.equal(mixed.batch(0, 1)["input_ids"], after["input_ids"])  # deterministic


def test_text_rows_are_masked_at_15_percent_and_their_loss_is_a_group_of_its_own(
    tmp_path: Path, pairs: Path, tokenizer: WordPieceTokenizer
) -> None:
    vocab = tokenizer.vocab_info
    corpus = write_text_corpus(tmp_path / "text.txt", 200, seed=5)
    rows = TextOnlyRows.from_file(corpus, tokenizer, rows_per_batch=64, max_length=24)
    mlm = MaskedLMObjective(vocab, hidden_size=8, vocab_size=vocab.vocab_size)
    data = read_image_text_pairs(pairs)
    batches = ImageTextBatches(
        data, tokenizer, 8, negative_prob=0.0, seed=1, extra_rows=rows, transform=mlm.collate
    )
    chosen = real = 0
    for index in range(2):
        batch = batches.batch(index, 0)
        text = batch["mlm_row_groups"] == TEXT_ONLY_GROUP
        labels = batch["mlm_labels"][text]
        assert (labels[:, 0] == IGNORE_INDEX).all() and (labels[:, -1] == IGNORE_INDEX).all()
        chosen += int((labels != IGNORE_INDEX).sum())
        real += int((batch["special_tokens_mask"][text] == 0).sum())
    assert stats.binomtest(chosen, real, 0.15).pvalue > 1e-3, chosen / real
    # loss = mean over the image-text rows' masked tokens + mean over the text rows'
    torch.manual_seed(0)
    hidden = torch.randn(*batch["input_ids"].shape, 8)
    out = mlm(EncoderOutput(last_hidden_state=hidden), batch)
    logits = mlm.head(hidden)
    parts = []
    for group in (0, 1):
        rows_of = batch["mlm_row_groups"] == group
        parts.append(
            F.cross_entropy(logits[rows_of].flatten(0, 1), batch["mlm_labels"][rows_of].flatten())
        )
    torch.testing.assert_close(out.loss, parts[0] + parts[1])
    torch.testing.assert_close(out.metrics["group1_loss"], parts[1].detach())
    plain = {k: v for k, v in batch.items() if k != "mlm_row_groups"}
    torch.testing.assert_close(
        mlm(EncoderOutput(last_hidden_state=hidden), plain).loss,
        F.cross_entropy(logits.flatten(0, 1), batch["mlm_labels"].flatten()),
    )


def test_only_vlbert_takes_text_only_rows(tmp_path: Path, tokenizer: WordPieceTokenizer) -> None:
    data = ImageTextData(text_only=TextOnlyData(synthetic_lines=30, max_length=16))
    numbers = {"vocab_size": tokenizer.vocab_size, "visual_embedding_dim": 32, "hidden_size": 16}
    small = {**numbers, "num_heads": 2, "num_layers": 1, "max_positions": 16}
    rows = text_only_rows(tmp_path, data, vlbert(**small), tokenizer)
    assert rows is not None and (tmp_path / "data" / "text_corpus.txt").is_file()
    assert text_only_rows(tmp_path, ImageTextData(), imagebert(**small), tokenizer) is None
    with pytest.raises(ValueError, match="text-only rows are VL-BERT's"):
        text_only_rows(tmp_path, data, imagebert(**small), tokenizer)
    with pytest.raises(ValueError, match="text-only rows are VL-BERT's"):
        text_only_rows(tmp_path, data, vlbert(**small, text_only_rows=False), tokenizer)
    with pytest.raises(ValueError, match="max_positions=8"):
        text_only_rows(tmp_path, data, vlbert(**{**small, "max_positions": 8}), tokenizer)
