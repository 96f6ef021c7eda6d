"""VisualBERT/ViLBERT fine-tuning: both families, save/load, VQA scoring, task data, errors."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.objectives import MaskedLMObjective
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_multimodal import (
    AlignmentObjective,
    ImageTextMatchObjective,
    MaskedRegionObjective,
    vilbert,
    visualbert,
)
from ptm_multimodal.feature_spec import FeatureMismatchError, FeatureSpec
from ptm_multimodal.finetune import (
    evaluate_finetuned_image_text,
    finetune_image_text,
    predict_image_text,
)
from ptm_multimodal.region_features import RegionFeatureSet, write_region_features
from ptm_multimodal.synthetic import (
    HELD_OUT_COMBOS,
    _task_scenes,
    detect,
    make_scene,
    write_synthetic_tasks,
)
from ptm_multimodal.task_data import (
    ImageTextFeaturizer,
    ImageTextTaskError,
    answer_scores,
    read_image_text_task,
    vqa_accuracy,
)
from ptm_multimodal.task_io import load_image_text_task_model
from ptm_multimodal.task_model import ImageTextTaskModel, load_backbone, vqa_loss
from ptm_multimodal.task_spec import ImageTextTask

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "data_specs" / "image_text" / "tasks"
SAMPLE = ROOT / "data_specs" / "image_text" / "sample"
SMALL = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32}
VILBERT_SMALL = {
    **SMALL,
    "image_hidden_size": 16,
    "image_num_layers": 1,
    "image_num_heads": 2,
    "co_hidden_size": 16,
    "co_num_heads": 2,
    "co_attention_after": [[1, 1]],
}


def _trainer(out: Path, steps: int = 3) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(out), max_steps=steps, learning_rate=1e-3, progress=False, save_every=100
    )


@pytest.fixture(scope="module")
def pretrained(
    tmp_path_factory: pytest.TempPathFactory, pretrain: Callable[..., Any]
) -> dict[str, Path]:
    """Tiny VisualBERT and ViLBERT final/ directories (two pre-training steps each)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("pretrained")
    builds = {
        "visualbert": (
            partial(visualbert, max_positions=32, **SMALL),
            {"mlm": MaskedLMObjective, "itm": ImageTextMatchObjective},
        ),
        "vilbert": (
            partial(vilbert, max_positions=32, **VILBERT_SMALL),
            {"mlm": MaskedLMObjective, "mrm": MaskedRegionObjective, "align": AlignmentObjective},
        ),
    }
    finals = {}
    for name, (model, objectives) in builds.items():
        result = pretrain(
            name,
            model,
            objectives,
            _trainer(root / name, 2),
            train_dir=str(SAMPLE),
            eval_dir=str(SAMPLE),
            batch_size=8,
            prepare=False,
        )
        finals[name] = result.encoder_dir
    return finals


def _task(kind: str, tasks: Path = TASKS) -> ImageTextTask:
    prefix = "vqa" if kind == "vqa" else "match"
    return ImageTextTask(
        name=f"test-{kind}",
        kind=kind,
        train=str(tasks / f"{prefix}_train.jsonl"),
        dev=str(tasks / f"{prefix}_dev.jsonl"),
        max_length=16,
        batch_size=8,
    )


@pytest.mark.parametrize("family", ["visualbert", "vilbert"])
@pytest.mark.parametrize("kind", ["vqa", "classification"])
def test_finetune_saves_a_final_that_reloads_to_identical_logits(
    family: str, kind: str, pretrained: dict[str, Path], tmp_path: Path, one_thread: None
) -> None:
    task = _task(kind)
    result = finetune_image_text(
        task, init_from=pretrained[family], trainer=_trainer(tmp_path / "run")
    )
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["family"] == "multimodal" and record["architecture"] == family
    # the pre-trained poolers seed the head (ViLBERT: both streams' poolers)
    expected = ["pooler"] if family == "visualbert" else ["text_pooler", "image_pooler"]
    assert [c.split(".")[1] for c in record["head_from_pretraining"]] == expected
    metric = "vqa_accuracy" if kind == "vqa" else "accuracy"
    assert 0.0 <= result.final_metrics[f"dev/{metric}"] <= 1.0
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    # the fine-tuning report's confusion matrix (classification; VQA has answer lists)
    labels_file = result.output_dir / "dev_labels.json"
    assert labels_file.is_file() == (kind == "classification")
    if kind == "classification":
        confusion = json.loads(labels_file.read_text())["confusion"]
        right = sum(confusion[i][i] for i in range(len(confusion)))
        assert right / sum(map(sum, confusion)) == pytest.approx(eval_json["dev/accuracy"])
    # the final/ reloads and predicts the dev scores eval.json holds
    metrics, predictions = predict_image_text(result.encoder_dir)
    assert metrics[metric] == pytest.approx(eval_json[f"dev/{metric}"], abs=1e-6)
    model, tokenizer, loaded_task, _ = load_image_text_task_model(result.encoder_dir)
    assert loaded_task == task and set(predictions) <= set(model.label_names)
    # identical logits: the reloaded model vs the weights saved
    from ptm_multimodal.region_features import read_region_features

    features = read_region_features(TASKS)
    rows, names = read_image_text_task(task.dev, kind, features, label_names=model.label_names)
    batch = ImageTextFeaturizer(tokenizer, features, kind, names, 16).featurize(rows[:6])
    again, *_ = load_image_text_task_model(result.encoder_dir)
    torch.testing.assert_close(model(batch).logits, again(batch).logits, rtol=0, atol=0)
    assert model(batch).logits.shape == (6, len(names))


def test_random_init_reinitialises_every_backbone_weight(pretrained: dict[str, Path]) -> None:
    for family, final in pretrained.items():
        trained, _, objectives = load_backbone(final)
        fresh, _, none = load_backbone(final, random_init=True, seed=0)
        assert objectives and not none
        same = [
            name
            for (name, a), (_, b) in zip(
                trained.state_dict().items(), fresh.state_dict().items(), strict=True
            )
            if a.dtype.is_floating_point and a.std() > 0 and torch.equal(a, b)
        ]
        assert same == [], (family, same)


def test_in_memory_backbone_and_evaluate_hook(tmp_path: Path, one_thread: None) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(TASKS / "vocab.txt")
    backbone = visualbert(vocab_size=tokenizer.vocab_size, visual_embedding_dim=32, **SMALL)
    result = finetune_image_text(
        _task("vqa"), backbone=backbone, tokenizer=tokenizer, trainer=_trainer(tmp_path)
    )
    scores = evaluate_finetuned_image_text(str(result.encoder_dir))
    assert scores["_metric"] == "vqa_accuracy"
    assert scores["vqa_accuracy"] == pytest.approx(result.final_metrics["dev/vqa_accuracy"])
    baseline = evaluate_finetuned_image_text(str(result.encoder_dir), random_init=True)
    assert set(baseline) == set(scores)


def test_vqa_soft_scores_accuracy_and_loss_by_hand() -> None:
    answers = ["red"] * 3 + ["orange"] * 6 + ["blue"]
    names = ["blue", "green", "orange", "red"]
    assert answer_scores(answers, names) == pytest.approx([1 / 3, 0.0, 1.0, 1.0])
    assert answer_scores(["red"], names) == [0.0, 0.0, 0.0, 1.0]
    # official: mean over the 10 leave-one-out subsets of min(matches among 9 / 3, 1)
    assert vqa_accuracy("orange", answers) == pytest.approx(1.0)
    assert vqa_accuracy("red", answers) == pytest.approx((3 * 2 / 3 + 7 * 1) / 10)  # 0.9
    assert vqa_accuracy("blue", answers) == pytest.approx((1 * 0 + 9 * (1 / 3)) / 10)  # 0.3
    assert vqa_accuracy("green", answers) == 0.0
    assert vqa_accuracy("red", ["red"]) == 1.0 and vqa_accuracy("blue", ["red"]) == 0.0
    # BCE(0, 1) + BCE(ln 3, 0) = ln 2 + ln 4, summed over answers, mean over questions
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(3.0)]])
    scores = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert float(vqa_loss(logits, scores)) == pytest.approx(math.log(8.0), rel=1e-6)


def test_vqa_model_reports_the_soft_score_of_its_top_answer() -> None:
    class Fixed(torch.nn.Module):
        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            return torch.tensor([[0.0, 5.0], [5.0, 0.0]])

    class Backbone(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, visual_features: torch.Tensor, **_: object):
            from ptm_core.encoders import EncoderOutput

            return EncoderOutput(last_hidden_state=torch.zeros(2, 3, 4))

    model = ImageTextTaskModel(Backbone(), Fixed(), "vqa", ["a", "b"])
    scores = torch.tensor([[0.0, 1 / 3], [1.0, 0.0]])
    batch = {"input_ids": torch.zeros(2, 3), "visual_features": torch.zeros(2, 1, 4)}
    output = model({**batch, "answer_scores": scores})
    assert float(output.metrics["vqa_score"]) == pytest.approx((1 / 3 + 1.0) / 2)
    assert model(batch).loss is None


def test_generator_is_deterministic_and_dev_pairs_are_unseen(tmp_path: Path) -> None:
    first = write_synthetic_tasks(tmp_path / "a", train_images=24, dev_images=16)
    second = write_synthetic_tasks(tmp_path / "b", train_images=24, dev_images=16)
    for path in sorted(first.iterdir()):
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name
    train = _task_scenes(11, 24, "train", 64)
    dev = _task_scenes(12, 16, "dev", 64)
    assert all((s.color, s.shape) not in HELD_OUT_COMBOS for sc in train for s in sc.shapes)
    for split, scenes in (("train", train), ("dev", dev)):
        by_id = {sc.image_id: sc for sc in scenes}
        questions = [
            json.loads(x) for x in (first / f"vqa_{split}.jsonl").read_text().split("\n") if x
        ]
        assert questions and {q["image_id"] for q in questions} <= set(by_id)
        for q in questions:  # the asked-about object: its pair is held out exactly in dev
            words = q["question"].split()
            scene = by_id[q["image_id"]]
            key = words[-1] if words[1] == "color" else words[-2]
            target = [s for s in scene.shapes if key in (s.shape, s.color)]
            assert len(target) == 1, q  # the question is unambiguous
            held = (target[0].color, target[0].shape) in HELD_OUT_COMBOS
            assert held == (split == "dev"), q
        statements = [
            json.loads(x) for x in (first / f"match_{split}.jsonl").read_text().split("\n") if x
        ]
        for s in statements:
            words = s["text"].split()
            named = {(words[1], words[2]), (words[-2], words[-1])}
            assert bool(named & set(HELD_OUT_COMBOS)) == (split == "dev"), s
    # pre-training captions (seed 1, the presets' 400 images) name every held-out pair
    captions = " ".join(make_scene(i, 1).caption for i in range(400))
    assert all(f"{c} {s}" in captions for c, s in HELD_OUT_COMBOS)


def _copy_tasks(tmp_path: Path) -> Path:
    out = tmp_path / "tasks"
    shutil.copytree(TASKS, out)
    return out


def test_errors_name_file_line_and_field(tmp_path: Path, one_thread: None) -> None:
    tasks = _copy_tasks(tmp_path)
    from ptm_multimodal.region_features import read_region_features

    features = read_region_features(tasks)
    bad = tasks / "bad.jsonl"
    good = (tasks / "vqa_train.jsonl").read_text().splitlines()[0]
    cases = {
        "image_id": '{"image_id": "nope", "question": "what color is the circle", "answers": ["red"]}',
        "answers": '{"image_id": "scene11-00000", "question": "q", "answers": [1, 2]}',
        "question": '{"image_id": "scene11-00000", "answers": ["red"]}',
        "json": "{not json",
    }
    for field, line in cases.items():
        bad.write_text(good + "\n" + line + "\n")
        with pytest.raises(ImageTextTaskError, match=rf"{bad}:2: .*field '{field}'"):
            read_image_text_task(bad, "vqa", features)
    bad.write_text('{"image_id": "scene11-00000", "text": "a red circle", "label": "maybe"}\n')
    with pytest.raises(ImageTextTaskError, match=rf"{bad}:1: unknown label 'maybe'.*'label'"):
        read_image_text_task(bad, "classification", features, label_names=["false", "true"])
    with pytest.raises(
        ImageTextTaskError, match=r"vqa_train\.jsonl:1: .*features\.json.*field 'image_id'"
    ):
        read_image_text_task(
            tasks / "vqa_train.jsonl",
            "vqa",
            RegionFeatureSet(features.spec, {}),
            features_path=tasks / "features.json",
        )


def test_features_of_another_size_are_refused(tmp_path: Path) -> None:
    tasks = _copy_tasks(tmp_path)
    # the same images, 8-d features: the model was built for 32-d ones
    scene = make_scene(0, 11)
    regions = detect(scene, torch.Generator().manual_seed(0))
    regions.features = regions.features[:, :8]
    spec = FeatureSpec("synthetic-detector-v1", 8, "other", 18)
    ids = [json.loads(x)["image_id"] for x in (tasks / "vqa_train.jsonl").read_text().splitlines()]
    write_region_features(tasks, RegionFeatureSet(spec, dict.fromkeys(ids, regions)))
    tokenizer = WordPieceTokenizer.from_vocab(TASKS / "vocab.txt")
    backbone = visualbert(vocab_size=tokenizer.vocab_size, visual_embedding_dim=32, **SMALL)
    with pytest.raises(
        FeatureMismatchError,
        match=r"feature_size 8 in \S+/features\.json: field 'spec' but the model expects 32",
    ):
        finetune_image_text(
            _task("vqa", tasks), backbone=backbone, tokenizer=tokenizer, trainer=_trainer(tmp_path)
        )


def test_recipe_runs_and_checks_init_from(pretrained: dict[str, Path], tmp_path: Path) -> None:
    from flows import runner
    from flows.config import compose_config

    base = ["experiment=visualbert_vqa_tiny", f"trainer.output_dir={tmp_path / 'run'}"]
    with pytest.raises(FileNotFoundError, match="init_from=None: experiment=visualbert_vqa_tiny"):
        runner.run(compose_config(base))
    wrong = compose_config([*base, f"init_from={pretrained['vilbert']}"])
    with pytest.raises(ValueError, match=r"is a 'vilbert' model.*architecture=visualbert"):
        runner.run(wrong)
    cfg = compose_config(
        [
            *base,
            f"init_from={pretrained['visualbert']}",
            "trainer.max_steps=2",
            "trainer.progress=false",
        ]
    )
    result = runner.run(cfg)
    assert "dev/vqa_accuracy" in json.loads((result.output_dir / "eval.json").read_text())
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["provenance"]["experiment"] == "visualbert_vqa_tiny"


@pytest.mark.parametrize("family", ["visualbert", "vilbert"])
def test_freeze_backbone_trains_the_head_only(
    family: str, pretrained: dict[str, Path], tmp_path: Path
) -> None:
    from flows import runner
    from flows.config import compose_config

    cfg = compose_config(
        [
            f"experiment={family}_vqa_tiny",
            f"init_from={pretrained[family]}",
            f"trainer.output_dir={tmp_path / 'run'}",
            "trainer.max_steps=3",
            "trainer.progress=false",
            "multimodal_finetune.freeze_backbone=true",
        ]
    )
    result = runner.run(cfg)
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["freeze_backbone"] is True
    assert record["provenance"]["freeze_backbone"] is True
    tuned, *_ = load_image_text_task_model(result.encoder_dir)
    start, _, _ = load_backbone(pretrained[family])
    # Every backbone tensor is the pre-trained one, bit for bit ...
    for (name, a), (_, b) in zip(
        start.state_dict().items(), tuned.encoder.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    # ... while the head got gradients (grad_norm covers the trainable parameters).
    metrics = [json.loads(line) for line in (result.output_dir / "metrics.jsonl").open()]
    norms = [m["grad_norm"] for m in metrics if "grad_norm" in m]
    assert norms and all(math.isfinite(n) and n > 0 for n in norms)
    unfrozen = compose_config(
        [
            f"experiment={family}_vqa_tiny",
            f"init_from={pretrained[family]}",
            f"trainer.output_dir={tmp_path / 'run2'}",
            "trainer.max_steps=3",
            "trainer.progress=false",
        ]
    )
    moved, *_ = load_image_text_task_model(runner.run(unfrozen).encoder_dir)
    assert any(  # the same run without the switch does change the backbone
        not torch.equal(a, b)
        for a, b in zip(
            start.state_dict().values(), moved.encoder.state_dict().values(), strict=True
        )
    )


@pytest.mark.parametrize("kind", ["classification", "vqa"])
def test_ptm_predict_scores_rows_with_their_regions(
    kind: str, pretrained: dict[str, Path], tmp_path: Path, one_thread: None
) -> None:
    from ptm_core.finetune.predict_output import predict_file

    task = _task(kind)
    final = finetune_image_text(
        task, init_from=pretrained["visualbert"], trainer=_trainer(tmp_path / "run")
    ).encoder_dir
    stats = predict_file(final, task.dev, tmp_path / "out.jsonl", batch_size=3)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    _, expected = predict_image_text(final)
    assert stats.examples == len(records) == len(expected)
    assert [r["prediction"] for r in records] == expected
    assert all("image_id" in r and r["score"] == max(r["scores"].values()) for r in records)
