"""``ptm analyze MODEL representations|attention|heads`` on a ptm pre-training final/, a
fine-tuned task final/ and a Hugging Face folder; ``ptm compress --importance``; the
``analyze`` flow's artifact."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
import transformers
from flow_settings import FAST
from hf_folders import sample_wordpiece, saved

from flows.cli import main
from flows.finetune import run_one
from flows.pretrain import pretrain

TINY_FT = ["trainer.max_steps=6", "trainer.log_every=2", "trainer.progress=false"]
# Not the sample corpus: other words (most split into pieces), other lengths.
WORDS = [
    "river",
    "stone",
    "garden",
    "city",
    "music",
    "paper",
    "water",
    "light",
    "north",
    "small",
    "old",
    "new",
    "a",
    "and",
]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pre")
    overrides = [*FAST, "model.num_layers=2", "trainer.max_steps=6", f"trainer.output_dir={out}"]
    return Path(pretrain(overrides)["encoder_dir"])


@pytest.fixture(scope="module")
def finetuned(pretrained: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ft")
    run = run_one(
        ["task=sentiment", f"init_from={pretrained}", f"trainer.output_dir={out}", *TINY_FT]
    )
    return Path(run["final_dir"])


@pytest.fixture(scope="module")
def hf_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("hf") / "bert"
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=1200,
        hidden_size=24,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    model = transformers.BertModel(config, add_pooling_layer=False)
    with torch.no_grad():  # sharper attention than the init's near-uniform one
        for p in model.parameters():
            p.mul_(6.0)
    saved(model, directory, sample_wordpiece(1200))
    return directory


@pytest.fixture(scope="module")
def sentences(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(3)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(2, 30))) + " ." for _ in range(40)]
    path = tmp_path_factory.mktemp("text") / "mine.txt"
    path.write_text("\n\n".join(lines) + "\n")  # blank lines are skipped
    return path


def test_representations_compare_pretrained_and_finetuned(
    pretrained: Path, finetuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repr"
    argv = [str(pretrained), "representations", "--output", str(out), "--max-sentences", "60"]
    assert main(["analyze", *argv, "--compare", str(finetuned), "--max-tokens", "300"]) == 0
    printed = capsys.readouterr().out
    assert "| layer | anisotropy" in printed and "report:" in printed
    record = json.loads((out / "representations.json").read_text())
    assert record["sentences"] == 60 and record["cka"]["tokens"] == 300
    assert [len(m["anisotropy"]) for m in record["models"]] == [3, 3]
    matrix = record["cka"]["matrix"]
    assert len(matrix) == 3 and all(
        len(row) == 3 and all(0 <= v <= 1 for v in row) for row in matrix
    )
    # a few fine-tuning steps leave the embeddings almost as they were
    assert matrix[0][0] > 0.9
    assert {p.name for p in out.iterdir()} >= {"representations.md", "anisotropy.png", "cka.png"}
    assert main(["analyze", *argv]) == 1  # an earlier analysis is kept without --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert main(["analyze", *argv, "--overwrite"]) == 0
    record = json.loads((out / "representations.json").read_text())
    assert record["cka"]["first"] == record["cka"]["second"]
    assert all(record["cka"]["matrix"][i][i] == pytest.approx(1.0) for i in range(3))


def test_representations_refuse_models_with_other_tokens(
    pretrained: Path, hf_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["analyze", str(hf_bert), "representations", "--output", str(tmp_path / "x")]
    assert main([*argv, "--compare", str(pretrained), "--max-sentences", "20"]) == 1
    assert "its tokenizer splits the sentences into other tokens" in capsys.readouterr().err
    assert main([*argv, "--sentences", str(tmp_path / "none.txt")]) == 1
    assert "none.txt: no such file" in capsys.readouterr().err


def test_attention_of_an_hf_folder_matches_transformers(
    hf_bert: Path, sentences: Path, tmp_path: Path
) -> None:
    out = tmp_path / "attn"
    argv = ["analyze", str(hf_bert), "attention", "--sentences", str(sentences)]
    assert (
        main([*argv, "--output", str(out), "--mark-tokens", "city,and", "--batch-size", "7"]) == 0
    )
    record = json.loads((out / "attention.json").read_text())
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_bert)
    reference = transformers.BertModel.from_pretrained(hf_bert, attn_implementation="eager").eval()
    lines = [line for line in sentences.read_text().splitlines() if line]
    sums = {name: torch.zeros(3, 3, dtype=torch.float64) for name in ("entropy", "cls", "marked")}
    queries = 0
    marked_ids = tokenizer.convert_tokens_to_ids(["city", "and"])
    for line in lines:  # one sentence at a time: no padding on the reference side
        ids = torch.tensor([tokenizer(line)["input_ids"]])
        with torch.no_grad():
            attentions = reference(input_ids=ids, output_attentions=True).attentions
        marked = torch.isin(ids[0], torch.tensor(marked_ids)).double()
        for layer, probs in enumerate(attentions):
            p = probs[0].double()  # (h, L, L)
            sums["entropy"][layer] += (-(p * p.clamp(min=1e-30).log()).sum(-1)).sum(-1)
            sums["cls"][layer] += p[:, :, 0].sum(-1)
            sums["marked"][layer] += (p * marked).sum(-1).sum(-1)
        queries += ids.shape[1]
    assert record["queries"] == queries
    for name, total in sums.items():
        expected = (total / queries).tolist()
        assert record["tables"][name] == [pytest.approx(row, abs=1e-5) for row in expected]
    # sharp enough that the check compares something other than uniform attention
    assert min(min(row) for row in record["tables"]["entropy"]) < record["uniform_entropy"] - 0.3
    assert (out / "attention.png").stat().st_size > 0
    assert main([*argv, "--output", str(tmp_path / "b"), "--mark-tokens", "Zzyzx"]) == 1


def test_heads_feed_compress_and_refuse_a_pretrained_model(
    pretrained: Path, finetuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "heads"
    assert main(["analyze", str(finetuned), "heads", "--output", str(out)]) == 0
    record = json.loads((out / "heads.json").read_text())
    layers = len(record["importance"])
    assert layers == 2 and len(record["loss_increase"]) == layers
    assert all(
        math.isclose(sum(v * v for v in row), 1.0, rel_tol=1e-4) for row in record["importance"]
    )
    assert -1.0 <= record["spearman_abs"] <= 1.0 and (out / "heads.png").is_file()
    pruned = tmp_path / "pruned"
    argv = ["compress", str(finetuned), "--method", "prune-heads", "--fraction", "0.5"]
    assert main([*argv, "--importance", str(out / "heads.json"), "--output", str(pruned)]) == 0
    compression = json.loads((pruned / "compression.json").read_text())
    assert compression["importance_file"] == str(out / "heads.json")
    saved_scores = [v for row in compression["importance"] for v in row]
    assert saved_scores == pytest.approx([v for row in record["importance"] for v in row], abs=1e-5)
    both = [*argv, "--importance", str(out / "heads.json"), "--data", "x.tsv"]
    assert main([*both, "--output", str(tmp_path / "p2")]) == 1
    assert "give one" in capsys.readouterr().err
    assert main(["analyze", str(pretrained), "heads", "--output", str(tmp_path / "h2")]) == 1
    assert "pre-trained encoder (no task.json)" in capsys.readouterr().err


def test_analyze_flow_publishes_the_attention_report(
    hf_bert: Path, sentences: Path, tmp_path: Path, prefect_harness: None
) -> None:
    import asyncio

    from prefect.client.orchestration import get_client

    from flows.analyze_flow import analyze

    result = analyze(
        str(hf_bert), probe="attention", output=str(tmp_path / "a"), sentences=str(sentences)
    )
    assert result["queries"] > 0

    async def latest() -> dict[str, str]:
        async with get_client() as client:
            return {str(a.key): str(a.data) for a in await client.read_latest_artifacts()}

    report = asyncio.run(latest())["attention-report"]
    assert "| layer | entropy" in report and "](data:image/png;base64," in report
