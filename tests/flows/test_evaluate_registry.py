"""The evaluation registry: every model kind has an evaluation, ``ptm evaluate`` dispatches on
``"ptm_model"``, old directories fall back to the marker files, and BART/T5/MASS score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.evaluation import load_evaluations, model_family
from ptm_classic import kinds as classic_kinds
from ptm_core import model_kinds
from ptm_core.evaluation.registry import Evaluation, register_evaluation, registered_kinds
from ptm_knowledge import kinds as knowledge_kinds
from ptm_knowledge.family_cogqa import COGQA
from ptm_multilingual.kinds import XLM as XLM_KIND
from ptm_multilingual.kinds import XNLG as XNLG_KIND
from ptm_multimodal import kinds as multimodal_kinds

ROOT = Path(__file__).resolve().parents[2]
ENCODER: dict[str, object] = {"vocab_size": 50, "hidden_size": 16, "num_layers": 1}
ENCODER |= {"num_heads": 2, "intermediate_size": 32}
SEQ2SEQ: dict[str, object] = {"vocab_size": 50, "hidden_size": 16, "num_heads": 2}
SEQ2SEQ |= {"encoder_layers": 1, "decoder_layers": 1}


def _write(directory: Path, files: dict[str, object]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = directory / name
        if content is None:  # a directory
            path.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(json.dumps(content), encoding="utf-8")
    return directory


def test_every_model_kind_has_a_registered_evaluation() -> None:
    load_evaluations()
    missing = sorted(model_kinds.KINDS - set(registered_kinds()))
    assert not missing, f"model kinds without a registered evaluation: {', '.join(missing)}"


def test_a_kind_cannot_be_registered_twice() -> None:
    evaluations = load_evaluations()
    masked_lm = evaluations["masked_lm"]
    other = Evaluation("other_lm", "accuracy", True, "?", masked_lm.score, kinds=("encoder",))
    with pytest.raises(ValueError, match="'encoder' is already scored by evaluation 'masked_lm'"):
        register_evaluation(other)
    assert "other_lm" not in load_evaluations()
    assert register_evaluation(masked_lm) is masked_lm  # the same entry again: a no-op


# A directory holding "ptm_model" and the files that evaluation checks -> its family.
KIND_LAYOUTS: dict[str, tuple[dict[str, object], dict[str, object], str]] = {
    model_kinds.ENCODER: ({"heads.safetensors": b""}, ENCODER, "masked_lm"),
    model_kinds.XLNET: ({"heads.safetensors": b""}, ENCODER, "permutation_lm"),
    "modernbert": ({"heads.safetensors": b""}, ENCODER, "modernbert_masked_lm"),
    model_kinds.ENCODER_DECODER: (
        {"model.safetensors": b"", "tokenizer": None},
        SEQ2SEQ,
        "seq2seq",
    ),
    classic_kinds.AWD_LSTM: ({"model.safetensors": b"", "vocab.txt": b""}, {}, "awd_lstm"),
    classic_kinds.ELMO: ({"model.safetensors": b"", "vocab.txt": b""}, {}, "elmo"),
    classic_kinds.COVE: (
        {"model.safetensors": b"", "target_vocab.txt": b"", "glove": None},
        {},
        "cove",
    ),
    knowledge_kinds.ERNIE_THU: ({}, ENCODER, "ernie_thu"),
    knowledge_kinds.KNOWBERT: ({}, ENCODER, "knowbert"),
    COGQA: ({}, {}, "cogqa"),
    knowledge_kinds.KG_EMBEDDINGS: ({"metrics.json": {"test": {"mrr": 0.5}}}, {}, "kg_embeddings"),
    XLM_KIND: ({}, {}, "xlm"),
    XNLG_KIND: ({}, {}, "xnlg"),
    multimodal_kinds.VISUALBERT: ({}, {}, "multimodal"),
    multimodal_kinds.VILBERT: ({}, {}, "multimodal"),
    multimodal_kinds.LXMERT: ({}, {}, "multimodal"),
    multimodal_kinds.VLBERT: ({}, {}, "vlbert"),
    multimodal_kinds.IMAGEBERT: ({}, {}, "imagebert"),
    "sentilr": ({}, {}, "sentilr"),
}


def test_kind_layouts_cover_every_kind() -> None:
    assert set(KIND_LAYOUTS) == model_kinds.KINDS


@pytest.mark.parametrize("kind", sorted(KIND_LAYOUTS))
def test_dispatch_follows_ptm_model(kind: str, tmp_path: Path) -> None:
    files, config, family = KIND_LAYOUTS[kind]
    directory = _write(tmp_path / "final", {**files, "config.json": {"ptm_model": kind, **config}})
    assert model_family(directory) == family


def test_ptm_model_wins_over_the_markers(tmp_path: Path) -> None:
    # heads.safetensors would make the legacy rules say masked_lm.
    directory = _write(
        tmp_path / "final",
        {
            "config.json": {"ptm_model": "encoder_decoder", **SEQ2SEQ},
            "heads.safetensors": b"",
            "model.safetensors": b"",
            "tokenizer": None,
        },
    )
    assert model_family(directory) == "seq2seq"


def test_dispatch_checks_the_files_of_the_kind(tmp_path: Path) -> None:
    directory = _write(tmp_path / "final", {"config.json": {"ptm_model": "encoder", **ENCODER}})
    with pytest.raises(FileNotFoundError, match=r"heads\.safetensors: missing"):
        model_family(directory)
    (directory / "config.json").write_text(json.dumps({"ptm_model": "encoder_decoder"}))
    with pytest.raises(ValueError, match=r"config\.json: missing keys 'vocab_size'"):
        model_family(directory)
    (directory / "config.json").write_text(json.dumps({"ptm_model": "gpt9"}))
    with pytest.raises(ValueError, match="unknown 'ptm_model' 'gpt9'"):
        model_family(directory)


TASK = {"kind": "classification", "task": {"name": "t", "metric": "accuracy"}}
# Directories written before "ptm_model": the family the markers gave before the registry
# (and AWD-LSTM / ELMo, which had none). Seq2seq final/ folders always carried
# "ptm_model": "encoder_decoder" (their loader requires it), so they need no marker.
LEGACY_LAYOUTS: dict[str, tuple[dict[str, object], str]] = {
    "masked_lm": ({"config.json": ENCODER, "heads.safetensors": b""}, "masked_lm"),
    "hf_masked_lm": (
        {"config.json": {"model_type": "bert"}, "heads.safetensors": b""},
        "masked_lm",
    ),
    "permutation_lm": (
        {"config.json": {**ENCODER, "position_encoding": "relative"}, "heads.safetensors": b""},
        "permutation_lm",
    ),
    "ernie_thu": ({"config.json": ENCODER, "knowledge_config.json": {}}, "ernie_thu"),
    "xlm": (
        {
            "config.json": {"encoder": ENCODER, "languages": ["en", "fr"]},
            "languages.json": ["en", "fr"],
        },
        "xlm",
    ),
    "hf_xlm": ({"config.json": {"model_type": "xlm"}, "languages.json": ["en"]}, "xlm"),
    "cogqa": ({"cogqa.json": {}}, "cogqa"),
    "multimodal": ({"config.json": {"feature_spec": {}, "architecture": "vilbert"}}, "multimodal"),
    "kg_embeddings": (
        {"entity_embeddings.safetensors": b"", "metrics.json": {"test": {}}},
        "kg_embeddings",
    ),
    "finetuned": ({"config.json": ENCODER, "task.json": TASK}, "finetuned"),
    "ulmfit": (
        {"config.json": {"model_type": "ulmfit_classifier"}, "task.json": {**TASK, "ulmfit": 1}},
        "finetuned",
    ),
    "kbert": ({"config.json": ENCODER, "task.json": {**TASK, "recipe": "kbert"}}, "kbert"),
    "ernie_finetuned": (
        {"config.json": ENCODER, "task.json": {**TASK, "recipe": "ernie_thu_finetune"}},
        "ernie_finetuned",
    ),
    "multimodal_task": (
        {"config.json": {}, "task.json": {**TASK, "family": "multimodal"}},
        "multimodal_task",
    ),
    "awd_lstm": ({"config.json": {"model_type": "awd_lstm"}}, "awd_lstm"),
    "elmo": ({"config.json": {"ptm_format": "ptm-bilm/1"}}, "elmo"),
}


@pytest.mark.parametrize("layout", sorted(LEGACY_LAYOUTS))
def test_directories_without_ptm_model_fall_back_to_the_markers(
    layout: str, tmp_path: Path
) -> None:
    files, family = LEGACY_LAYOUTS[layout]
    assert model_family(_write(tmp_path / "final", files)) == family


def test_a_task_json_wins_over_ptm_model(tmp_path: Path) -> None:
    config = {"ptm_model": "encoder", **ENCODER}
    directory = _write(tmp_path / "final", {"config.json": config, "task.json": TASK})
    assert model_family(directory) == "finetuned"


def _pretrain(experiment: str, out: Path) -> Path:
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        [
            f"experiment={experiment}",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
            "trainer.max_steps=30",
            "trainer.save_every=1000",
        ]
    )
    return Path(run_composed(cfg).encoder_dir)


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("experiment", ["bart_tiny", "t5_tiny", "mass_tiny"])
def test_a_seq2seq_final_scores_against_random_init(experiment: str, tmp_path: Path) -> None:
    from flows.evaluate import evaluate

    final = _pretrain(experiment, tmp_path / "run")
    assert json.loads((final / "config.json").read_text())["ptm_model"] == "encoder_decoder"
    result = evaluate(str(final), report_path=str(tmp_path / "report.md"))
    assert result["family"] == "seq2seq" and result["metric"] == "accuracy"
    model, base = result["model"], result["baseline"]
    assert model["predictions"] == base["predictions"] > 0  # the same seeded noise
    assert model["loss"] < base["loss"]
    assert model["accuracy"] > base["accuracy"]
    report = Path(result["report"]).read_text()
    assert "for random init" in report and "better" in report


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_kg_embeddings_report_their_recorded_scores(tmp_path: Path) -> None:
    from flows.evaluate import evaluate

    metrics = {"test": {"mrr": 0.4, "hits@10": 0.7}, "random_baseline": {"mrr": 0.01}}
    directory = _write(
        tmp_path / "kg",
        {
            "config.json": {"ptm_model": "kg_embeddings"},
            "entity_embeddings.safetensors": b"",
            "metrics.json": metrics,
        },
    )
    result = evaluate(str(directory), corpus="ignored.txt", report_path=str(tmp_path / "r.md"))
    assert result["family"] == "kg_embeddings" and result["metric"] == "mrr"
    assert result["model"] == metrics["test"] and result["baseline"] == {"mrr": 0.01}
    report = Path(result["report"]).read_text()
    assert "data: `PyKEEN test split`" in report
    assert "**mrr: 0.4000 vs 0.0100 for random embeddings (+0.3900, better).**" in report


@pytest.mark.integration
@pytest.mark.parametrize(
    ("experiment", "metric"), [("awd_lstm_tiny", "loss"), ("elmo_tiny", "forward_nll")]
)
def test_a_recurrent_lm_final_scores_below_random_init(
    experiment: str, metric: str, tmp_path: Path
) -> None:
    from flows.config import compose_config
    from flows.evaluation import evaluation_of
    from flows.runner import run_composed

    cfg = compose_config(
        [
            f"experiment={experiment}",
            f"trainer.output_dir={tmp_path / 'run'}",
            "trainer.progress=false",
            "trainer.max_steps=10",
            "trainer.save_every=1000",
        ]
    )
    final = str(run_composed(cfg).encoder_dir)
    evaluation = evaluation_of(model_family(final))
    assert evaluation.name == experiment.removesuffix("_tiny")
    assert evaluation.metric == "perplexity" and not evaluation.higher_is_better
    corpus = str(ROOT / "data_specs/text_corpus/sample/corpus.jsonl")
    model = evaluation.score(final, corpus, 0, False)
    base = evaluation.score(final, corpus, 0, True)
    assert model["tokens"] == base["tokens"] > 0
    assert model[metric] < base[metric] and model["perplexity"] < base["perplexity"]
