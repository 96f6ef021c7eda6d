"""`ptm analyze MODEL layers`: a Hugging Face folder and a ptm pre-training final/, tags from
a generated CoNLL file (not the samples), entity types from a KG, the flow, and bad input."""

from __future__ import annotations

import functools
import json
import random
from collections import Counter
from pathlib import Path

import pytest
import torch
import transformers

from flows.cli import main
from ptm_core import bert_encoder
from ptm_core.objectives import MaskedLMObjective
from ptm_core.training import TrainerConfig
from tests.core.family_runs import pretrain_text

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data_specs/text_corpus/sample/corpus.txt"
# a small grammar with its own words: DET (ADJ) NOUN VERB DET NOUN (PREP DET NOUN)
LEXICON = {
    "DET": ["the", "a", "every"],
    "ADJ": ["green", "tall", "quiet", "old"],
    "NOUN": ["heron", "barge", "lantern", "miller", "quarry", "orchard"],
    "VERB": ["paints", "carries", "watches", "mends"],
    "PREP": ["near", "under"],
}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _sentence(rng: random.Random) -> list[tuple[str, str]]:
    tags = ["DET", *(["ADJ"] if rng.random() < 0.5 else []), "NOUN", "VERB", "DET", "NOUN"]
    if rng.random() < 0.4:
        tags += ["PREP", "DET", "NOUN"]
    return [(rng.choice(LEXICON[t]), t) for t in tags]


@pytest.fixture(scope="module")
def conll(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(7)
    lines = ["-DOCSTART- -X- O", ""]
    for _ in range(90):
        lines += [f"{word} {tag} O" for word, tag in _sentence(rng)] + [""]
    path = tmp_path_factory.mktemp("grammar") / "pos.conll"
    path.write_text("\n".join(lines))
    return path


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Hugging Face BertModel (no MLM head: probes do not need one)."""
    folder = tmp_path_factory.mktemp("hf") / "bert"
    words = sorted({w for ws in LEXICON.values() for w in ws})
    tokenizer = transformers.BertTokenizer(
        vocab={t: i for i, t in enumerate(SPECIALS + words)}, do_lower_case=True
    )
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(SPECIALS) + len(words),
        hidden_size=24,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=40,
    )
    transformers.BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def ptm_final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ptm pre-training run's final/ (a few MLM steps on the sample corpus)."""
    out = tmp_path_factory.mktemp("pretrain")
    trainer = TrainerConfig(
        output_dir=str(out), max_steps=4, learning_rate=1e-3, log_every=2, progress=False
    )
    result = pretrain_text(
        CORPUS,
        encoder=functools.partial(
            bert_encoder, hidden_size=32, num_layers=2, num_heads=2, max_positions=64
        ),
        objectives={"mlm": functools.partial(MaskedLMObjective, mode="dynamic")},
        trainer=trainer,
        tokenizer=REPO / "data_specs/text_corpus/sample-vocab.txt",
        max_length=64,
        batch_size=8,
    )
    return Path(result.output_dir) / "final"


def test_hf_folder_against_random_init_writes_the_report(
    hf_folder: Path, conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "pos"
    argv = [
        "analyze", str(hf_folder), "layers", "--conll", str(conll), "--column", "1",
        "--output", str(out), "--compare", "random-init", "--seeds", "0,1", "--steps", "40",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| embeddings |" in printed and "| layer 3 |" in printed and "scalar mix" in printed
    record = json.loads((out / "layers.json").read_text())
    assert [m["random_init"] for m in record["models"]] == [False, True]
    first = record["models"][0]
    assert len(first["runs"]) == 2 and len(first["runs"][0]["layers"]) == 4
    tags = [line.split()[1] for line in conll.read_text().splitlines()[2:] if line]
    assert first["runs"][0]["labels"] == dict(sorted(Counter(tags).items()))
    for run in first["runs"]:
        assert sum(run["mix"]["weights"]) == pytest.approx(1.0, abs=1e-5)
        for layer in run["layers"]:
            assert layer["selectivity"] == pytest.approx(
                layer["accuracy"] - layer["control_accuracy"]
            )
    # the grammar's tags are a function of the word here: every probe beats the majority
    assert min(layer["accuracy"]["mean"] for layer in first["summary"]["layers"]) > 0.6
    assert (out / "layers.png").read_bytes()[:4] == b"\x89PNG"
    assert "| representation | accuracy | control accuracy |" in (out / "layers.md").read_text()
    # an analysis folder is replaced only when asked
    assert main(argv) == 1
    assert "--overwrite" in capsys.readouterr().err


def test_ptm_final_with_mean_pooling_and_kg_types(
    ptm_final: Path, conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "mean"
    argv = ["analyze", str(ptm_final), "layers", "--conll", str(conll), "--column", "1"]
    extra = ["--pooling", "mean", "--steps", "30", "--max-texts", "40", "--output", str(out)]
    assert main([*argv, *extra]) == 0
    record = json.loads((out / "layers.json").read_text())
    assert record["pooling"] == "mean" and len(record["models"][0]["summary"]["layers"]) == 3
    assert record["labels"]["max_texts"] == 40 and record["labels"]["texts_total"] == 90
    assert sum(record["models"][0]["runs"][0]["split"].values()) < 40 * 11
    kg = REPO / "data_specs/knowledge_graph/sample"
    types = tmp_path / "types"
    argv = ["analyze", str(ptm_final), "layers", "--kg", str(kg), "--text", str(CORPUS)]
    assert main([*argv, "--steps", "30", "--output", str(types)]) == 0
    labels = json.loads((types / "layers.json").read_text())["labels"]
    assert labels["kind"] == "kg" and labels["mentions"] > 50
    assert {"person", "city", "country"} <= set(labels["types"])
    capsys.readouterr()
    untyped = tmp_path / "untyped"
    untyped.mkdir()
    rows = (kg / "entities.tsv").read_text().splitlines()
    header = next(i for i, row in enumerate(rows) if row.startswith("id\t"))
    blank = [row.split("\t") for row in rows[header + 1 :]]
    (untyped / "entities.tsv").write_text(
        "\n".join(rows[: header + 1] + ["\t".join([r[0], r[1], "", *r[3:]]) for r in blank]) + "\n"
    )
    (untyped / "triples.tsv").write_text((kg / "triples.tsv").read_text())
    argv = ["analyze", str(ptm_final), "layers", "--kg", str(untyped), "--text", str(CORPUS)]
    assert main([*argv, "--output", str(tmp_path / "none")]) == 1
    assert "no entity has a type" in capsys.readouterr().err


def test_bad_input_is_one_line(
    hf_folder: Path, conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    base = ["analyze", str(hf_folder), "layers", "--output", str(tmp_path / "x")]
    assert main([*base, "--conll", str(conll), "--kg", str(tmp_path)]) == 1
    assert "--conll FILE (word tags) or --kg DIR --text FILE" in capsys.readouterr().err
    assert main([*base, "--conll", str(conll), "--column", "5"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ptm: {conll}:3: ") and "--column" in err and "\n" not in err
    assert main([*base, "--conll", str(tmp_path / "missing.conll")]) == 1
    assert "missing.conll" in capsys.readouterr().err
    assert main([*base, "--conll", str(conll), "--device", "cuda:7"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ptm: --device 'cuda:7': ") and err.count("\n") == 1
    text = ["--text", str(CORPUS), "--test-conll", str(conll)]
    assert main([*base, "--kg", str(REPO / "data_specs/knowledge_graph/sample"), *text]) == 1
    assert "--test-conll goes with --conll" in capsys.readouterr().err


@pytest.mark.usefixtures("prefect_harness")
def test_the_flow_publishes_the_report(hf_folder: Path, conll: Path, tmp_path: Path) -> None:
    import asyncio

    from prefect.client.orchestration import get_client

    from flows.analyze_flow import analyze

    out = tmp_path / "flow"
    result = analyze(str(hf_folder), probe="layers", conll=str(conll), column=1, output=str(out))
    assert Path(result["output"], "layers.png").is_file()

    async def latest() -> dict[str, str]:
        async with get_client() as client:
            return {str(a.key): str(a.data) for a in await client.read_latest_artifacts()}

    markdown = asyncio.run(latest())["layer-probes-report"]
    assert "data:image/png;base64," in markdown and str(out / "layers.png") in markdown


def test_an_ernie_thu_folder_is_probed_through_its_knowledge_layers(
    conll: Path, tmp_path: Path
) -> None:
    from flows.analyze_layers import layers, load_layer_encoder
    from ptm_core.analysis.layer_probes import ProbeSettings
    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    text = bert_encoder(vocab_size=tokenizer.vocab_size, hidden_size=24, num_layers=3, num_heads=2)
    thu = KnowledgeableEncoder.from_text_encoder(text, torch.randn(6, 8), 1, entity_heads=2)
    folder = thu.save_pretrained(
        tmp_path / "thu", entity_ids=[f"e{i}" for i in range(6)], extra_writers=[tokenizer.save]
    )
    encoder, _, _ = load_layer_encoder(folder)
    assert isinstance(encoder, KnowledgeableEncoder)
    result = layers(
        folder, tmp_path / "out", conll=conll, column=1, settings=ProbeSettings(steps=20)
    )
    # embeddings + 2 T-Encoder layers + 1 knowledgeable (aggregator) layer
    assert len(result["models"][0]["summary"]["layers"]) == 4
    with pytest.raises(ValueError, match="ERNIE-THU folder has no random-init baseline"):
        load_layer_encoder(folder, random_init_seed=0)
