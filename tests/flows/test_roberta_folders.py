"""``ptm finetune model=<RoBERTa / XLM-R folder>`` trains on a generated task with the
folder's own tokenizer, and ``ptm export --format hf`` of the result loads in
transformers' ``AutoModelForSequenceClassification`` and ``AutoTokenizer`` with the same
logits (fp32, 1e-5) and ids."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import ByteLevelBPETokenizer

from flows.cli import main
from ptm_core.finetune.model import load_task_model

TOL = 1e-5
WORDS = ["Zürich", "café", "東京", "naïve", "river", "🤖", "garden", "北京", "déjà", "stone"]
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


def _roberta_folder(root: Path) -> Path:
    """A RobertaForMaskedLM of odd sizes with a byte-level BPE trained on the task's words."""
    bpe = ByteLevelBPETokenizer()
    lines = [" ".join(random.Random(i).sample(WORDS, 6)) for i in range(50)]
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(lines, vocab_size=300, special_tokens=specials)
    folder = root / "roberta"
    folder.mkdir()
    bpe.save_model(str(folder))
    config = transformers.RobertaConfig(
        vocab_size=bpe.get_vocab_size(),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=37,
        max_position_embeddings=66,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
    )
    torch.manual_seed(0)
    transformers.RobertaForMaskedLM(config).save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(folder).save_pretrained(folder)
    return folder


def test_finetune_from_a_roberta_folder_and_export_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _roberta_folder(tmp_path)
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
    assert "RobertaForSequenceClassification" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "roberta" and config["max_position_embeddings"] == 66

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
