"""XLM's MLM + TLM pre-training continued from an XLM-R folder (``init_from=<folder>``).

The folder is a random ``XLMRobertaForMaskedLM`` of odd sizes with a Unigram tokenizer,
trained on generated es/it text (not the bundled en/fr/de sample). What must hold: the
corpora are tokenised with the folder's own tokenizer; the first forward pass of the XLM
encoder and its masked-LM head equal transformers' XLM-R (the language table starts at
zero); the log names what was loaded and what is fresh; the run's ``final/`` continues
again; and folders that cannot start XLM are refused in one line.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest
import torch
import transformers

from flows.config import compose_config
from flows.runner import run_composed
from ptm_multilingual import XLMEncoder
from ptm_multilingual.init_from import XLMStart
from ptm_multilingual.objective import XLMMaskedLMObjective
from ptm_multilingual.settings import XLMData
from ptm_multilingual.tokenizer import SharedBPETokenizer
from tests.hf_folders import roberta_folder

ES = ["el", "perro", "come", "pan", "la", "casa", "es", "roja", "agua", "fría", "niño", "lee"]
IT = ["il", "cane", "mangia", "pane", "la", "casa", "è", "rossa", "acqua", "fredda", "bimbo"]


def _sentences(words: list[str], seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(3, 9))) + " ." for _ in range(n)]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("es-it")
    mono = root / "mono"
    mono.mkdir()
    es, it = _sentences(ES, 0, 120), _sentences(IT, 1, 120)
    (mono / "es.txt").write_text("\n".join(es) + "\n", encoding="utf-8")
    (mono / "it.txt").write_text("\n".join(it) + "\n", encoding="utf-8")
    parallel = root / "parallel"
    parallel.mkdir()
    pairs = [f"{a}\t{b}" for a, b in zip(_sentences(ES, 2, 60), _sentences(IT, 2, 60), strict=True)]
    (parallel / "es-it.tsv").write_text("\n".join(pairs) + "\n", encoding="utf-8")
    folder = roberta_folder(
        root / "hf", "xlm-roberta", lines=es + it, hidden_size=30, num_attention_heads=5
    )
    return {"mono": mono, "parallel": parallel, "folder": folder, "root": root}


def _data(corpora: dict[str, Path], **overrides: object) -> XLMData:
    return XLMData(corpus=str(corpora["mono"]), parallel=str(corpora["parallel"]), **overrides)


def test_first_forward_pass_is_xlm_r(corpora: dict[str, Path]) -> None:
    from ptm_core.objectives import ObjectiveMix
    from ptm_core.objectives.inputs import build_objective

    start = XLMStart.open(corpora["folder"], _data(corpora))
    assert start.tokenizer.languages == ["es", "it"]
    xlm = start.encoder(["es", "it"]).eval()
    mix = ObjectiveMix(
        {"xlm_mlm": build_objective(XLMMaskedLMObjective, xlm, start.tokenizer.vocab_info)}
    )
    start.load_heads(mix, xlm)
    reference = transformers.XLMRobertaForMaskedLM.from_pretrained(corpora["folder"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(corpora["folder"])
    batch = tokenizer(
        ["el perro come pan .", "il cane è rossa ."], return_tensors="pt", padding=True
    )
    langs = torch.tensor([[0], [1]]).expand_as(batch["input_ids"])
    with torch.no_grad():
        hidden = xlm(batch["input_ids"], batch["attention_mask"], langs=langs).last_hidden_state
        theirs = reference(**batch, output_hidden_states=True)
        ours_logits = dict(mix)["xlm_mlm"].head(hidden)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(hidden[real], theirs.hidden_states[-1][real], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours_logits[real], theirs.logits[real], atol=1e-5, rtol=0)
    # The tokenizer the corpora are prepared with is the folder's (same ids as AutoTokenizer).
    text = "la casa es roja ."
    assert start.tokenizer.encode(text) == tokenizer(text, add_special_tokens=False)["input_ids"]


def _run(corpora: dict[str, Path], out: Path, init_from: Path, steps: int = 3) -> Path:
    cfg = compose_config(
        [
            "experiment=xlm_tlm_tiny",
            f"init_from={init_from}",
            f"data.corpus={corpora['mono']}",
            f"data.parallel={corpora['parallel']}",
            "data.evaluation_parallel=null",
            "data.directions=[es-it,it-es]",
            "data.stream_length=32",
            "data.max_length=48",
            "data.batch_size=4",
            f"data.cache_dir={corpora['root'] / 'cache'}",
            f"trainer.output_dir={out}",
            f"trainer.max_steps={steps}",
            "trainer.save_every=100",
            "trainer.device=cpu",
        ]
    )
    run_composed(cfg)
    return out / "final"


def test_continued_pretraining_logs_loaded_and_fresh_and_continues_again(
    corpora: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ptm_core.checkpoints.init_report"):
        final = _run(corpora, tmp_path / "run", corpora["folder"])
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("init_from:"))
    # Everything but XLM's language table came from the folder (the MLM head included).
    assert line.endswith("1 fresh: network.lang_embeddings.* (1)"), line
    assert str(corpora["folder"]) in line
    saved = SharedBPETokenizer.from_directory(final)
    folder_vocab = json.loads((corpora["folder"] / "tokenizer.json").read_text("utf-8"))
    assert saved.vocab_size == len(transformers.AutoTokenizer.from_pretrained(corpora["folder"])), (
        "the run kept its own vocabulary instead of the folder's"
    )
    assert (
        saved.tokenizer.get_vocab()
        == transformers.PreTrainedTokenizerFast(tokenizer_object=saved.tokenizer).get_vocab()
    )
    assert folder_vocab["model"]["type"] == "Unigram"
    encoder = XLMEncoder.from_pretrained(final)
    assert encoder.languages == ["es", "it"]
    assert encoder.lang_embeddings.weight.abs().sum() > 0, "TLM never trained the language table"

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ptm_core.checkpoints.init_report"):
        _run(corpora, tmp_path / "again", final, steps=1)
    again = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("init_from:"))
    assert again.endswith(" 0 fresh"), again


def test_folders_that_cannot_start_xlm_are_refused_in_one_line(
    corpora: dict[str, Path], tmp_path: Path
) -> None:
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert"}), encoding="utf-8")
    (bert / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"config\.json: model_type 'bert'; XLM") as exc:
        XLMStart.open(bert, _data(corpora))
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match=r"drop data\.tokenizer"):
        XLMStart.open(corpora["folder"], _data(corpora, tokenizer=str(tmp_path)))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"config\.json"):
        _run(corpora, tmp_path / "refused", empty)
    assert not (tmp_path / "refused" / "final").exists()


def test_export_of_an_xlm_r_start_says_why_in_one_line(
    corpora: dict[str, Path], tmp_path: Path
) -> None:
    from ptm_core.checkpoints.io import CheckpointError
    from ptm_multilingual.hf_export import export_xlm

    final = _run(corpora, tmp_path / "run", corpora["folder"], steps=1)
    with pytest.raises(CheckpointError, match="started from an xlm-roberta folder") as exc:
        export_xlm(final, tmp_path / "hf")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "hf").exists()


def test_the_continued_model_fine_tunes_zero_shot(corpora: dict[str, Path], tmp_path: Path) -> None:
    final = _run(corpora, tmp_path / "run", corpora["folder"], steps=2)
    rng = random.Random(3)
    files = {}
    for lang, words, label_words in (("es", ES, ("perro", "casa")), ("it", IT, ("cane", "casa"))):
        rows = []
        for i in range(40):
            label = i % 2
            body = " ".join(rng.choices(words, k=5))
            rows.append(f"{'animal' if label == 0 else 'place'}\t{label_words[label]} {body} .")
        files[lang] = tmp_path / f"{lang}.tsv"
        files[lang].write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "zero-shot"
    cfg = compose_config(
        [
            "experiment=xlm_zero_shot",
            f"init_from={final}",
            f"xlm_finetune.train_file={files['es']}",
            "xlm_finetune.train_lang=es",
            "~xlm_finetune.dev",
            f"+xlm_finetune.dev={{es: {files['es']}, it: {files['it']}}}",
            f"trainer.output_dir={out}",
            "trainer.max_steps=4",
            "trainer.device=cpu",
        ]
    )
    run_composed(cfg)
    scores = json.loads((out / "eval.json").read_text("utf-8"))
    assert {"dev/es/accuracy", "dev/it/accuracy"} <= set(scores), scores
