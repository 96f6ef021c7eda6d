"""``ptm finetune model=<ModernBERT folder>`` for every task kind ptm's encoders support
(classification, token tagging, span QA, multiple choice), from a ptm folder and from a
Hugging Face ``ModernBertForMaskedLM`` folder with its own byte-level BPE
``tokenizer.json``, whose ids ptm then uses exactly as ``AutoTokenizer`` does."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import ByteLevelBPETokenizer

from flows.cli import main
from ptm_core.encoders.modernbert import ModernBertConfig, ModernBertEncoder
from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
from ptm_core.finetune.model import load_task_model
from ptm_core.tokenization import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"
WORDS = ["Zürich", "café", "river", "garden", "stone", "naïve", "bridge", "lamp"]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def ptm_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("modernbert") / "final"
    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)
    torch.manual_seed(0)
    encoder = ModernBertEncoder(
        ModernBertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=24,
            num_heads=2,
            num_layers=3,
            intermediate_size=20,
            max_positions=256,
            local_attention=8,
        )
    )
    encoder.save_pretrained(folder, tokenizer=tokenizer)
    return folder


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("gain_sentiment", "classification"),
        ("gain_ner", "tagging"),
        ("gain_qa", "qa"),
        ("kg_swag", "multiple_choice"),
    ],
)
def test_finetune_every_task_kind(
    task: str, kind: str, ptm_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code = main(
        [
            "finetune",
            f"task={task}",
            f"model={ptm_folder}",
            "trainer.max_steps=2",
            "task.max_length=48",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0, capsys.readouterr().err
    model, record = load_task_model(run / "final")
    assert record["kind"] == kind
    assert isinstance(model.encoder, ModernBertEncoder)


def _hf_folder(root: Path) -> Path:
    folder = root / "hf"
    folder.mkdir()
    lines = [" ".join(random.Random(i).sample(WORDS, 5)) for i in range(40)]
    specials = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines, vocab_size=260, special_tokens=specials)
    bpe.save(str(root / "bpe.json"))
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(root / "bpe.json"),
        cls_token="[CLS]",
        pad_token="[PAD]",
        sep_token="[SEP]",
        unk_token="[UNK]",
        mask_token="[MASK]",
    )
    tokenizer.save_pretrained(folder)
    config = transformers.ModernBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=24,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=20,
        max_position_embeddings=128,
        local_attention=8,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
    )
    torch.manual_seed(0)
    transformers.ModernBertForMaskedLM(config).save_pretrained(folder)
    return folder


def _pair_task(root: Path) -> list[str]:
    rng = random.Random(0)
    root.mkdir(parents=True)
    for split, rows in (("train", 16), ("dev", 6)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(rows):
            a, b = rng.sample(WORDS, 3), rng.sample(WORDS, 3)
            label = "shared" if set(a) & set(b) else "apart"
            lines.append(f"{i}\t{' '.join(a)}\t{' '.join(b)}\t{label}")
        (root / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["task=kg_pair", f"task.train={root / 'train.tsv'}", f"task.dev={root / 'dev.tsv'}"]


def test_finetune_from_a_hugging_face_folder_with_its_bpe_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _hf_folder(tmp_path)
    run = tmp_path / "run"
    code = main(
        [
            "finetune",
            *_pair_task(tmp_path / "task"),
            f"model={folder}",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0, capsys.readouterr().err
    model, _ = load_task_model(run / "final")
    assert isinstance(model.encoder, ModernBertEncoder)
    ours = load_task_tokenizer(run / "final")
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    text = "Zürich café naïve river 東京 🤖"
    assert ours.tokenize_ids(text) == theirs(text, add_special_tokens=False)["input_ids"]
    capsys.readouterr()

    out = tmp_path / "export"
    assert main(["export", "--format", "hf", str(run / "final"), str(out)]) == 0
    assert "ModernBertForSequenceClassification" in capsys.readouterr().out
    back, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        out, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    exported = transformers.AutoTokenizer.from_pretrained(out)
    rows = exported(["river stone café", "Zürich garden"], padding=True, return_tensors="pt")
    batch = {"input_ids": rows["input_ids"], "attention_mask": rows["attention_mask"]}
    with torch.no_grad():
        expected = model.eval()(batch).logits
        logits = back.eval()(**batch).logits
    assert (logits - expected).abs().max().item() <= 1e-5
