"""``ptm finetune model=<RoBERTa / XLM-R folder>`` trains on a generated task with the
folder's own tokenizer, and ``ptm export --format hf`` of the result loads in
transformers' ``AutoModelForSequenceClassification`` and ``AutoTokenizer`` with the same
logits (fp32, 1e-5) and ids. ``ptm pretrain init_from=<DistilBERT folder>`` continues
with its MLM head and exports a ``DistilBertForMaskedLM``; ``init_from=<RoBERTa / XLM-R
folder>`` continues MLM on a generated corpus read with the folder's BPE/Unigram tokenizer
and exports a ``RobertaForMaskedLM``/``XLMRobertaForMaskedLM`` with the same logits, while
NSP on their one token type is refused in one line."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers
from hf_folders import WORDS, roberta_folder

from flows.cli import main
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import load_task_model
from ptm_core.objectives import MaskedLMObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.pretraining import load_heads
from ptm_core.tokenization import VocabInfo

TOL = 1e-5
ROOT = Path(__file__).resolve().parents[2]
SAMPLE_VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"
PAIRS = [("Où est Zürich?", "東京 🤖 naïve"), ("river stone", "garden café déjà vu")]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _task(root: Path) -> list[str]:
    """A GLUE-style pair-classification TSV: the label is whether both sentences share a word."""
    rng = random.Random(0)
    root.mkdir(parents=True)
    for split, rows in (("train", 24), ("dev", 8)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(rows):
            a, b = rng.sample(WORDS, 3), rng.sample(WORDS, 3)
            label = "shared" if set(a) & set(b) else "apart"
            lines.append(f"{i}\t{' '.join(a)}\t{' '.join(b)}\t{label}")
        (root / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [
        "task=kg_pair",
        f"task.train={root / 'train.tsv'}",
        f"task.dev={root / 'dev.tsv'}",
    ]


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_finetune_from_a_roberta_folder_and_export_it_back(
    model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = roberta_folder(tmp_path, model_type)
    run = tmp_path / "run"
    code = main(
        [
            "finetune",
            *_task(tmp_path / "task"),
            f"model={folder}",
            "trainer.max_steps=3",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (run / "final" / "task.json").is_file()
    capsys.readouterr()

    out = tmp_path / "hf"
    assert main(["export", "--format", "hf", str(run / "final"), str(out)]) == 0
    prefix = "Roberta" if model_type == "roberta" else "XLMRoberta"
    assert f"{prefix}ForSequenceClassification" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == model_type and config["max_position_embeddings"] == 66

    model, task = load_task_model(run / "final")
    theirs, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        out, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert theirs.config.id2label == dict(enumerate(task["label_names"]))
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    firsts, seconds = zip(*PAIRS, strict=True)
    batch = dict(hf_tokenizer(list(firsts), list(seconds), padding=True, return_tensors="pt"))
    expected = reference(list(firsts), list(seconds), padding=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], expected["input_ids"])
    with torch.no_grad():
        ours = model.eval()(batch).logits
        logits = theirs.eval()(**batch).logits
    assert (ours - logits).abs().max().item() <= TOL


def _pretrain(init_from: Path, run: Path) -> int:
    return main(
        [
            "pretrain",
            "experiment=bert_tiny",
            f"init_from={init_from}",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
            "data.batch_size=4",
            "data.max_length=32",
        ]
    )


def test_pretrain_continues_a_distilbert_folder_and_exports_distilbert_for_masked_lm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vocab = [line for line in SAMPLE_VOCAB.read_text(encoding="utf-8").splitlines() if line]
    folder = tmp_path / "distilbert"
    config = transformers.DistilBertConfig(
        vocab_size=len(vocab), dim=24, n_layers=2, n_heads=3, hidden_dim=37
    )
    torch.manual_seed(0)
    transformers.DistilBertForMaskedLM(config).save_pretrained(folder)
    shutil.copyfile(SAMPLE_VOCAB, folder / "vocab.txt")
    assert _pretrain(folder, tmp_path / "run") == 0
    capsys.readouterr()

    out = tmp_path / "hf"
    assert main(["export", "--format", "hf", str(tmp_path / "run" / "final"), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "DistilBertForMaskedLM" in printed and "nsp (no Hugging Face counterpart)" in printed
    theirs, info = transformers.AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    encoder = TransformerEncoder.from_pretrained(tmp_path / "run" / "final").eval()
    mlm = build_objective(MaskedLMObjective, encoder, VocabInfo(len(vocab), 0, 1, 2, 3, 4))
    tied = ["objectives.mlm.head.decoder.weight"]  # the token table, not in heads.safetensors
    assert load_heads(ObjectiveMix({"mlm": mlm}), tmp_path / "run" / "final") == tied
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    batch = dict(
        tokenizer(["the quick fox", "a lazy dog sleeps here"], padding=True, return_tensors="pt")
    )
    with torch.no_grad():
        ours = mlm.eval().head(encoder(**batch).last_hidden_state)
        expected = theirs.eval()(**batch).logits
    real = batch["attention_mask"].bool()
    assert (ours[real] - expected[real]).abs().max().item() <= TOL


def _corpus(root: Path) -> Path:
    """Generated documents over the folders' words (accents, CJK, emoji), not the sample."""
    rng = random.Random(1)
    root.mkdir(parents=True)
    documents = [
        "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 9))) for _ in range(4))
        for _ in range(30)
    ]
    (root / "docs.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_pretrain_continues_a_bpe_or_unigram_folder_and_exports_it_back(
    model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = roberta_folder(tmp_path, model_type)
    run = tmp_path / "run"
    overrides = [
        "pretrain",
        "experiment=roberta_tiny",
        f"init_from={folder}",
        f"data.corpus={_corpus(tmp_path / 'corpus')}",
        "trainer.max_steps=2",
        f"trainer.output_dir={run}",
        f"data.cache_dir={run / 'cache'}",
        "data.batch_size=4",
        "data.max_length=32",
    ]
    assert main(overrides) == 0
    # The corpus was read with the folder's own tokenizer: the prepared ids are its pieces.
    from ptm_core.data.prepared import PreparedCorpus

    store = PreparedCorpus.open(next((run / "cache").iterdir()))
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    first = (tmp_path / "corpus" / "docs.txt").read_text(encoding="utf-8").splitlines()[0]
    bounds = store.sentence_offsets(0)
    ids = store.tokens(int(bounds[0]), int(bounds[1])).tolist()
    assert ids == reference(first, add_special_tokens=False)["input_ids"]
    capsys.readouterr()

    out = tmp_path / "hf"
    assert main(["export", "--format", "hf", str(run / "final"), str(out)]) == 0
    theirs, info = transformers.AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert (
        type(theirs).__name__
        == f"{'XLMRoberta' if model_type != 'roberta' else 'Roberta'}ForMaskedLM"
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    encoder = TransformerEncoder.from_pretrained(run / "final").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    batch = dict(tokenizer([" ".join(WORDS[:5]), "東京 🤖"], padding=True, return_tensors="pt"))
    assert torch.equal(
        batch["input_ids"],
        reference([" ".join(WORDS[:5]), "東京 🤖"], padding=True, return_tensors="pt")["input_ids"],
    )
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, _vocab(reference))})
    load_heads(mix, run / "final")
    with torch.no_grad():
        ours = dict(mix)["mlm"].eval().head(encoder(**batch).last_hidden_state)
        expected = theirs.eval()(**batch).logits
    real = batch["attention_mask"].bool()
    assert (ours[real] - expected[real]).abs().max().item() <= TOL


def _vocab(tokenizer: transformers.PreTrainedTokenizerBase) -> VocabInfo:
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>", "<unk>", "<mask>")]
    return VocabInfo(len(tokenizer), ids[0], ids[1], ids[2], ids[3], ids[4])


def test_pretrain_refuses_nsp_on_a_folder_with_one_token_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = roberta_folder(tmp_path)
    assert _pretrain(folder, tmp_path / "run") != 0
    err = capsys.readouterr().err
    assert f"init_from={folder}: the encoder has one token type" in err
    assert "'~objective.objectives.nsp'" in err and "experiment=roberta_tiny" in err
    assert not (tmp_path / "run" / "final").exists()


def test_pretrain_from_scratch_refuses_nsp_on_a_model_with_one_token_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same one-line refusal for a model preset with one token type (no folder)."""
    run = tmp_path / "run"
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            "model.type_vocab_size=1",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
        ]
    )
    assert code != 0
    err = capsys.readouterr().err
    assert "model.type_vocab_size=1: the encoder has one token type" in err
    assert "'~objective.objectives.nsp'" in err
    assert not (run / "final").exists()
