"""Task featurizers on non-WordPiece tokenizers: byte-level BPE with RoBERTa's layout,
Unigram with T5's and XLNet's, all built here with `tokenizers` and checked against
`transformers.PreTrainedTokenizerFast` on the same tokenizer.json (single, pair,
truncation, tagging word ids, QA windows with a stride and their character offsets), plus
a fine-tuning run through the recipe with a BPE tokenizer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers.trainers import BpeTrainer, UnigramTrainer

from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.data import (
    HFTokenizer,
    QAAnswer,
    QAExample,
    QAFeaturizer,
    SentenceExample,
    SentenceFeaturizer,
    TaggedExample,
    TaggingFeaturizer,
    TaskTokenizer,
    load_task_tokenizer,
)
from ptm_core.finetune.data.qa import trim_offset
from ptm_core.finetune.recipe import finetune, load_finetuned, predict
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

transformers = pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[3]
GLUE = REPO / "data_specs/glue_classification"


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _corpus() -> list[str]:
    lines = []
    for name in ("single_train.tsv", "train.tsv"):
        for row in (GLUE / name).read_text(encoding="utf-8").splitlines()[1:]:
            lines.extend(cell for cell in row.split("\t") if len(cell) > 12)
    return lines


def _bpe_roberta() -> Tokenizer:
    """Byte-level BPE with RoBERTa's specials and post-processor (trim_offsets=True)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        _corpus(),
        BpeTrainer(
            vocab_size=400,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=True
    )
    return tok


def _unigram(layout: str) -> Tokenizer:
    """SentencePiece-style Unigram (Metaspace) with T5's or XLNet's post-processor."""
    specials = ["<pad>", "</s>", "<unk>"] + (
        ["<sep>", "<cls>", "<mask>"] if layout == "xlnet" else []
    )
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        _corpus(),
        UnigramTrainer(
            vocab_size=300, special_tokens=specials, unk_token="<unk>", show_progress=False
        ),
    )
    ids = {t: tok.token_to_id(t) for t in specials}
    if layout == "t5":
        tok.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", ids["</s>"])]
        )
    else:  # XLNet: the classification token last, its own segment 2
        tok.post_processor = processors.TemplateProcessing(
            single="$A:0 <sep>:0 <cls>:2",
            pair="$A:0 <sep>:0 $B:1 <sep>:1 <cls>:2",
            special_tokens=[("<sep>", ids["<sep>"]), ("<cls>", ids["<cls>"])],
        )
    return tok


LAYOUTS = ["roberta", "t5", "xlnet"]


def _pair(layout: str) -> tuple[HFTokenizer, object]:
    backend = _bpe_roberta() if layout == "roberta" else _unigram(layout)
    ours = HFTokenizer(Tokenizer.from_str(backend.to_str()))
    specials = {f"{role}_token": token for role, token in ours.special_tokens.items()}
    if layout == "t5":
        specials = {k: v for k, v in specials.items() if k not in ("cls_token", "mask_token")}
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(backend.to_str()), **specials
    )
    return ours, hf


SENTENCES = [
    "The guided tour of Paris was wonderful.",
    "Marie Curie was born in Warsaw and was a citizen of France.",
    "Alan Turing worked at Bletchley Park during the war, and later in Manchester.",
]
SECONDS = ["Our afternoon was dreadful.", "She lived in Paris.", "He studied at Cambridge."]


def test_special_tokens_come_from_the_files_post_processor() -> None:
    roberta, _ = _pair("roberta")
    t5, _ = _pair("t5")
    xlnet, _ = _pair("xlnet")
    ids = lambda tok, t: tok.backend.token_to_id(t)  # noqa: E731
    s, e = ids(roberta, "<s>"), ids(roberta, "</s>")
    assert roberta.build_inputs([7, 8], [9]) == (
        [s, 7, 8, e, e, 9, e],
        [0] * 7,
        [1, 0, 0, 1, 1, 0, 1],
    )
    eos = ids(t5, "</s>")
    assert t5.build_inputs([7], [8, 9]) == ([7, eos, 8, 9, eos], [0] * 5, [0, 1, 0, 0, 1])
    assert t5.vocab_info.sep_id == eos and t5.vocab_info.pad_id == ids(t5, "<pad>")
    sep, cls = ids(xlnet, "<sep>"), ids(xlnet, "<cls>")
    assert xlnet.build_inputs([7], [8]) == ([7, sep, 8, sep, cls], [0, 0, 1, 1, 2], [0, 1, 0, 1, 1])
    assert xlnet.vocab_info.cls_id == cls
    assert isinstance(roberta, TaskTokenizer)
    assert isinstance(
        WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt"),
        TaskTokenizer,
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("max_length", [None, 12])
@pytest.mark.parametrize("pairs", [False, True])
def test_sentence_batches_equal_transformers(
    layout: str, max_length: int | None, pairs: bool
) -> None:
    ours, hf = _pair(layout)
    rows = [
        SentenceExample(text, SECONDS[i] if pairs else None, i % 2, str(i), i + 1)
        for i, text in enumerate(SENTENCES)
    ]
    featurizer = SentenceFeaturizer(ours, max_length or 512)
    batch = featurizer.featurize(rows)
    expected = hf(
        SENTENCES,
        SECONDS if pairs else None,
        truncation=max_length is not None,
        max_length=max_length,
        padding=True,
        return_token_type_ids=True,
        return_tensors="pt",
    )
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        assert torch.equal(batch[key], expected[key]), key
    if max_length is not None:
        assert batch["input_ids"].shape[1] == max_length  # the long rows were cut
    # The encodings themselves (not only the padded batch): same ids and offsets.
    mine = ours.encode_batch(SENTENCES, SECONDS if pairs else None, max_length=max_length)
    theirs = hf(
        SENTENCES,
        SECONDS if pairs else None,
        truncation=max_length is not None,
        max_length=max_length,
        return_offsets_mapping=True,
    )
    for row, (encoding, ids, offsets) in enumerate(
        zip(mine, theirs["input_ids"], theirs["offset_mapping"], strict=True)
    ):
        assert encoding.input_ids == ids, row
        assert encoding.offsets == [tuple(o) for o in offsets], row


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tags_go_on_each_words_first_piece_as_transformers_word_ids(layout: str) -> None:
    ours, hf = _pair(layout)
    words = [s.rstrip(".").split() for s in SENTENCES]
    rows = [TaggedExample(w, [i % 3 for i in range(len(w))], n + 1) for n, w in enumerate(words)]
    featurizer = TaggingFeaturizer(ours, max_length=14)
    batch = featurizer.featurize(rows)
    expected = hf(
        words,
        is_split_into_words=True,
        truncation=True,
        max_length=14,
        padding=True,
        return_tensors="pt",
    )
    assert torch.equal(batch["input_ids"], expected["input_ids"])
    assert torch.equal(batch["attention_mask"], expected["attention_mask"])
    for row, example in enumerate(rows):
        word_ids = expected.word_ids(row)
        labels = batch["labels"][row].tolist()
        previous = None
        for position, word in enumerate(word_ids):
            first_piece = word is not None and word != previous
            assert labels[position] == (example.tags[word] if first_piece else -100), (
                row,
                position,
            )
            previous = word
    # The long sentences lost words to max_length=14, and they are counted.
    kept = [{w for w in expected.word_ids(r) if w is not None} for r in range(len(rows))]
    assert featurizer.truncated_words(rows) == sum(
        len(w) - len(k) for w, k in zip(words, kept, strict=True)
    )
    assert featurizer.truncated_words(rows) > 0


CONTEXT = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris, where she studied physics "
    "and mathematics at the university. In 1903 she shared the Nobel Prize in Physics, and "
    "in 1911 she received the Nobel Prize in Chemistry for the discovery of radium."
)
QUESTIONS = [
    ("Where did Curie study?", "Paris"),
    ("What did she discover?", "radium"),
    ("Where was she born?", "Warsaw"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_qa_windows_with_a_stride_equal_transformers_and_offsets_find_the_answer(
    layout: str,
) -> None:
    ours, hf = _pair(layout)
    examples = []
    for n, (question, answer) in enumerate(QUESTIONS):
        start = CONTEXT.index(answer)
        examples.append(
            QAExample(str(n), question, CONTEXT, [QAAnswer(answer, start)], False, f"qas[{n}]")
        )
    max_length, stride = 40, 8
    featurizer = QAFeaturizer(ours, max_length, stride, max_query_length=20)
    windows = featurizer.windows(examples)
    found = 0
    for n, example in enumerate(examples):
        expected = hf(
            example.question,
            CONTEXT,
            truncation="only_second",
            max_length=max_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            return_token_type_ids=True,
        )
        positions = list(windows.windows_of(n))
        assert len(positions) == len(expected["input_ids"]) > 2  # the context really is split
        for k, position in enumerate(positions):
            window = windows[position]
            assert window.input_ids == expected["input_ids"][k], (n, k)
            if k == 0 or layout != "t5":
                assert window.token_type_ids == expected["token_type_ids"][k], (n, k)
            else:
                # `tokenizers` quirk: a template with default type ids ("$B", T5's) gives the
                # overflowing windows type 1 on B, the first window 0; ptm keeps the
                # template's 0 in every window (T5 has no segment table either way).
                assert window.token_type_ids == [0] * len(window.input_ids)
                assert set(expected["token_type_ids"][k]) == {0, 1}
            sequence = expected.sequence_ids(k)
            for i, offset in enumerate(expected["offset_mapping"][k]):
                got = window.offsets[i]
                if sequence[i] != 1:
                    assert got is None, (n, k, i)
                    continue
                want = trim_offset(CONTEXT, *offset)
                assert got is not None, (n, k, i)
                if want[0] == want[1]:  # a lone space piece: empty either way
                    assert got[0] == got[1] and abs(got[0] - want[0]) <= 1, (n, k, i)
                else:
                    assert got == want, (n, k, i)
            # "No answer" points at the classification token: <s> first, XLNet's <cls> last.
            null = len(window.input_ids) - 1 if layout == "xlnet" else 0
            assert window.null_index == null
            if window.start_position != null:
                found += 1
                s, e = window.offsets[window.start_position], window.offsets[window.end_position]
                assert s is not None and e is not None
                assert CONTEXT[s[0] : e[1]] == example.answers[0].text, (n, k)
            else:  # the answer is not wholly inside this window
                assert window.end_position == null
                lo = min(o[0] for o in window.offsets if o is not None)
                hi = max(o[1] for o in window.offsets if o is not None)
                start = example.answers[0].start
                assert not (lo <= start and start + len(example.answers[0].text) <= hi)
    assert found >= len(QUESTIONS)
    # A batch of windows pads with the tokenizer's pad id.
    batch = featurizer.featurize([windows[i] for i in range(len(windows))])
    assert (batch["input_ids"][batch["attention_mask"] == 0] == ours.vocab_info.pad_id).all()


def test_a_folder_round_trips_and_loads_in_transformers(tmp_path: Path) -> None:
    ours, _ = _pair("roberta")
    ours.save(tmp_path / "tok")
    again = load_task_tokenizer(tmp_path / "tok")
    assert isinstance(again, HFTokenizer) and again.vocab_info == ours.vocab_info
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert (
        auto(SENTENCES[0], SECONDS[0])["input_ids"]
        == ours.encode_batch([SENTENCES[0]], [SECONDS[0]])[0].input_ids
    )
    assert auto.pad_token_id == ours.vocab_info.pad_id
    # BERT folders still load as WordPiece.
    WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt").save(
        tmp_path / "bert"
    )
    assert isinstance(load_task_tokenizer(tmp_path / "bert"), WordPieceTokenizer)
    with pytest.raises(FileNotFoundError, match=r"vocab\.txt"):
        load_task_tokenizer(tmp_path / "empty")


def test_a_special_token_missing_from_the_vocabulary_is_named() -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        _corpus()[:4],
        BpeTrainer(vocab_size=280, special_tokens=["</s>", "<unk>"], show_progress=False),
    )
    with pytest.raises(ValueError, match=r"no pad token .*field 'pad_token'"):
        HFTokenizer(tok)


def test_finetune_with_a_bpe_tokenizer_runs_saves_and_predicts(tmp_path: Path) -> None:
    tokenizer, _ = _pair("roberta")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        pad_token_id=tokenizer.vocab_info.pad_id,
    )
    task = TaskSpec(
        name="sentiment",
        kind="classification",
        train=str(GLUE / "single_train.tsv"),
        dev=str(GLUE / "single_dev.tsv"),
        max_length=32,
        batch_size=8,
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=6,
        learning_rate=1e-3,
        progress=False,
        device="cpu",
        log_every=1,
        save_every=1000,
    )
    result = finetune(task, encoder=encoder, tokenizer=tokenizer, trainer=trainer)
    assert "dev/accuracy" in json.loads((result.output_dir / "eval.json").read_text())
    _, loaded, _, _ = load_finetuned(result.encoder_dir)
    assert isinstance(loaded, HFTokenizer)
    assert (
        loaded.encode_batch(SENTENCES)[0].input_ids
        == tokenizer.encode_batch(SENTENCES)[0].input_ids
    )
    metrics, predictions = predict(result.encoder_dir)
    assert metrics["accuracy"] == result.final_metrics["dev/accuracy"]
    assert len(predictions) == len((GLUE / "single_dev.tsv").read_text().splitlines()) - 1


def test_bart_with_its_bpe_tokenizer_fine_tunes_from_a_hf_folder(tmp_path: Path) -> None:
    from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
    from ptm_core.finetune.recipe import finetune_seq2seq
    from ptm_core.finetune.seq2seq import load_seq2seq_tokenizer

    tokenizer, _ = _pair("roberta")  # <s>=0 <pad>=1 </s>=2: BART's ids
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
    )
    folder = tmp_path / "bart"
    transformers.BartForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save(folder)
    loaded = load_seq2seq_tokenizer(folder)  # refused before: "BPE is not supported"
    assert isinstance(loaded, HFTokenizer)
    task = TaskSpec(
        name="pairs",
        kind="classification",
        train=str(GLUE / "train.tsv"),
        dev=str(GLUE / "dev.tsv"),
        max_length=48,
        batch_size=4,
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=3,
        progress=False,
        device="cpu",
        log_every=1,
        save_every=1000,
    )
    result = finetune_seq2seq(
        task, model=EncoderDecoderModel.from_pretrained(folder), tokenizer=loaded, trainer=trainer
    )
    _, again, _, record = load_finetuned(result.encoder_dir)
    assert isinstance(again, HFTokenizer) and record["seq2seq"] == "classification_head"
    metrics, predictions = predict(result.encoder_dir)
    assert metrics["accuracy"] == result.final_metrics["dev/accuracy"]
    assert set(predictions) <= {"entailment", "not_entailment"}
