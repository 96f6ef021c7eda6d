"""LXMERT fine-tuning (VQA and image-text classification), full and with
multimodal_finetune.peft: the answer head equals transformers' LxmertForQuestionAnswering,
it starts from the pre-trained QA head, the loss falls, an adapter leaves the backbone
bit-frozen and its final/ reloads to the same model, and the CLI preset runs end to end."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from peft_checks import (
    assert_adapter_folder,
    assert_only_adapter_and_head_trained,
    assert_same_state,
    spy_on_attach,
)
from test_finetune import SAMPLE, _task, _trainer

import ptm_multimodal.finetune as mm_finetune
from ptm_core.peft import PeftConfig
from ptm_core.peft.prompts import PrefixAttention, SoftPromptEncoder
from ptm_multimodal.finetune import finetune_image_text, predict_image_text
from ptm_multimodal.lxmert import lxmert
from ptm_multimodal.lxmert_heads import LxmertAnswerHead
from ptm_multimodal.lxmert_pretraining import (
    LxmertImageQAObjective,
    LxmertMaskedLMObjective,
    LxmertMatchingObjective,
)
from ptm_multimodal.task_io import load_image_text_task_model
from ptm_multimodal.task_model import (
    ImageTextTaskModel,
    build_task_head,
    init_head_from_pretraining,
    load_backbone,
    single_piece_ids,
)

# The QA pre-training answers: red, green, blue, circle, square of the sample vocabulary
# (the task also asks for yellow, purple, orange and triangle, which the QA head lacks).
QA_ANSWERS = [11, 12, 13, 17, 18]
ODD = dict(hidden_size=24, num_heads=3, intermediate_size=40, l_layers=2, r_layers=1, x_layers=2)


@pytest.fixture(scope="module")
def lxmert_final(tmp_path_factory: pytest.TempPathFactory, pretrain: Callable[..., Any]) -> Path:
    """A tiny LXMERT final/ with masked LM, matching and QA heads (a few pre-training steps)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("lxmert")
    result = pretrain(
        "lxmert",
        partial(lxmert, max_positions=32, **ODD),
        {
            "lm": LxmertMaskedLMObjective,
            "itm": LxmertMatchingObjective,
            "qa": partial(LxmertImageQAObjective, answer_token_ids=QA_ANSWERS),
        },
        _trainer(root / "run", 3),
        train_dir=str(SAMPLE),
        eval_dir=str(SAMPLE),
        batch_size=8,
        prepare=False,
    )
    return Path(result.encoder_dir)


@torch.no_grad()
def test_vqa_head_matches_transformers_question_answering(tmp_path: Path) -> None:
    """LXMERT's task model equals LxmertForQuestionAnswering on the same weights: the
    answer head ``logit_fc`` = Linear(D, 2D), GeLU, LayerNorm(2D), Linear(2D, K) reads
    the pooled cross-modality [CLS] (transformers' LxmertVisualAnswerHead)."""
    transformers = pytest.importorskip("transformers")
    from ptm_multimodal.lxmert_hf import load_hf_lxmert

    torch.manual_seed(0)
    config = transformers.LxmertConfig(
        vocab_size=37, hidden_size=30, num_attention_heads=5, intermediate_size=44,
        l_layers=2, r_layers=1, x_layers=3, visual_feat_dim=11, visual_pos_dim=4,
        max_position_embeddings=20, num_qa_labels=7,
    )  # fmt: skip
    hf = transformers.LxmertForQuestionAnswering(config).eval()
    for name, param in hf.named_parameters():  # nothing may hide at 0 or 1
        if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
            param.add_(torch.randn_like(param) * 0.1)
    hf.save_pretrained(tmp_path / "hf")
    backbone = load_hf_lxmert(tmp_path / "hf").encoder
    head = build_task_head(backbone, 7, dropout=0.0)
    assert isinstance(head, LxmertAnswerHead)
    # Transcribed by position from transformers' LxmertVisualAnswerHead.logit_fc.
    fc = hf.answer_head.logit_fc
    head.dense.load_state_dict(fc[0].state_dict())
    head.norm.load_state_dict(fc[2].state_dict())
    head.out.load_state_dict(fc[3].state_dict())
    assert head.norm.eps == fc[2].eps
    model = ImageTextTaskModel(backbone, head, "vqa", [str(k) for k in range(7)]).eval()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 37, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    feats, boxes = torch.randn(3, 5, 11, generator=g), torch.rand(3, 5, 4, generator=g)
    visual_mask = torch.ones(3, 5, dtype=torch.long)
    visual_mask[2, 3:] = 0
    ours = model(
        {
            "input_ids": ids,
            "attention_mask": mask,
            "visual_features": feats,
            "visual_boxes": boxes,
            "visual_mask": visual_mask,
        }
    ).logits
    theirs = hf(
        input_ids=ids, attention_mask=mask, visual_feats=feats, visual_pos=boxes,
        visual_attention_mask=visual_mask,
    ).question_answering_score  # fmt: skip
    assert ours.shape == theirs.shape == (3, 7)
    assert (ours - theirs).abs().max().item() <= 1e-5


def test_answer_head_starts_from_the_pretrained_qa_head(lxmert_final: Path) -> None:
    backbone, tokenizer, objectives = load_backbone(lxmert_final)
    names = ["triangle", "red", "square", "orange", "blue"]
    torch.manual_seed(0)
    head = build_task_head(backbone, len(names))
    fresh = head.out.weight.detach().clone()
    copied = init_head_from_pretraining(head, objectives, single_piece_ids(tokenizer, names))
    assert copied == ["LxmertImageQAObjective.transform", "LxmertImageQAObjective.answers[3/5]"]
    qa: Any = objectives["qa"].head
    assert torch.equal(head.dense.weight, qa.dense.weight)
    assert torch.equal(head.norm.bias, qa.norm.bias)
    for k, name in enumerate(names):
        token = tokenizer.encode_batch([name])[0].input_ids[1]
        if token in QA_ANSWERS:  # the pre-trained answer's row and bias
            j = QA_ANSWERS.index(token)
            assert torch.equal(head.out.weight[k], qa.out.weight[j])
            assert torch.equal(head.out.bias[k], qa.out.bias[j])
        else:  # not a pre-training answer: its fresh row
            assert torch.equal(head.out.weight[k], fresh[k])


def _losses(output_dir: Path) -> list[float]:
    rows = [json.loads(x) for x in (output_dir / "metrics.jsonl").read_text().splitlines()]
    return [float(r["loss"]) for r in rows if "loss" in r and "step" in r]


@pytest.mark.parametrize("kind", ["vqa", "classification"])
def test_full_finetune_loss_falls_and_final_reloads(
    kind: str, lxmert_final: Path, tmp_path: Path, one_thread: None
) -> None:
    trainer = _trainer(tmp_path / "run", steps=30)
    trainer.log_every, trainer.learning_rate = 1, 2e-3
    result = finetune_image_text(_task(kind), init_from=lxmert_final, trainer=trainer)
    losses = _losses(result.output_dir)
    assert len(losses) == 30 and all(math.isfinite(x) for x in losses)
    if kind == "vqa":  # the soft-score BCE over 9 answers (the matching task learns slower)
        assert statistics.fmean(losses[-5:]) < 0.8 * statistics.fmean(losses[:5]), losses
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["architecture"] == "lxmert" and record["head"] == "cls"
    assert record["head_from_pretraining"][0] == "LxmertImageQAObjective.transform"
    metrics, _ = predict_image_text(result.encoder_dir)
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    metric = "vqa_accuracy" if kind == "vqa" else "accuracy"
    assert metrics[metric] == eval_json[f"dev/{metric}"]
    loaded, *_ = load_image_text_task_model(result.encoder_dir)
    assert isinstance(loaded.head, LxmertAnswerHead)


@pytest.mark.parametrize("method", ["lora", "ia3", "prefix", "prompt"])
def test_peft_trains_only_the_adapter_and_head_and_final_reloads(
    method: str,
    lxmert_final: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    seen = spy_on_attach(monkeypatch, mm_finetune, "attach_peft")
    trainer = _trainer(tmp_path / "run", steps=20)
    trainer.log_every, trainer.learning_rate = 1, 1e-2
    result = finetune_image_text(
        _task("vqa"),
        init_from=lxmert_final,
        trainer=trainer,
        peft=PeftConfig(method=method, r=4, num_virtual_tokens=3),
    )
    model: Any = seen["model"]
    after = model.state_dict()
    adapter = assert_only_adapter_and_head_trained(seen["before"], after)
    # The backbone is the pre-trained one, bit for bit (peft keeps it as base_layer).
    base = load_backbone(lxmert_final)[0].state_dict()
    for name, tensor in after.items():
        plain = name.removeprefix("encoder.").replace(".base_layer", "")
        plain = plain.replace(".attention.attention.", ".attention.")  # prefix wrappers
        plain = plain.replace("language_encoder.encoder.", "language_encoder.")  # prompt
        if name.startswith("encoder.") and name not in adapter and plain in base:
            assert torch.equal(tensor, base[plain]), name
    encoder = model.encoder
    if method in ("lora", "ia3"):  # all three encoders, cross-attention included
        for stream in ("language_encoder.", "object_layers.", "cross_layers."):
            assert any(k.startswith(f"encoder.{stream}") for k in adapter), stream
        for projection in ("kv_proj.key", "kv_proj.value"):
            assert any(f".cross_attention.{projection}." in k for k in adapter), projection
        if method == "lora":
            assert any(".cross_attention.q_proj.query.lora_A" in k for k in adapter)
    elif method == "prefix":  # the language layers' self-attention
        assert all(isinstance(x.attention, PrefixAttention) for x in encoder.text_stack.layers)
    else:  # a soft prompt before the language stream's tokens
        assert isinstance(encoder.language_encoder, SoftPromptEncoder)
    losses = _losses(result.output_dir)
    assert statistics.fmean(losses[-5:]) < statistics.fmean(losses[:5]), losses
    final = result.encoder_dir
    record = assert_adapter_folder(final, lxmert_final, method, smaller=2)
    assert record["architecture"] == "lxmert"
    loaded, *_ = load_image_text_task_model(final)
    assert_same_state(loaded, after)
    metrics, _ = predict_image_text(final)
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert metrics["vqa_accuracy"] == eval_json["dev/vqa_accuracy"]


@pytest.mark.integration
def test_lxmert_vqa_tiny_from_the_command_line(
    lxmert_final: Path, tmp_path: Path, one_thread: None
) -> None:
    """`ptm pretrain experiment=lxmert_vqa_tiny init_from=...`, with a LoRA adapter, then
    `ptm evaluate` and `ptm predict` on its final/."""
    from flows.cli import main
    from ptm_multimodal.synthetic import write_synthetic_tasks

    tasks = write_synthetic_tasks(tmp_path / "tasks", train_images=8, dev_images=6, seed=21)
    tuned = tmp_path / "vqa"
    argv = [
        "pretrain",
        "experiment=lxmert_vqa_tiny",
        f"init_from={lxmert_final}",
        f"multimodal_finetune.task.train={tasks / 'vqa_train.jsonl'}",
        f"multimodal_finetune.task.dev={tasks / 'vqa_dev.jsonl'}",
        "multimodal_finetune.task.batch_size=8",
        "multimodal_finetune.peft=lora",
        "trainer.max_steps=4",
        "trainer.save_every=4",
        "trainer.progress=false",
        "trainer.device=cpu",
        f"trainer.output_dir={tuned}",
    ]
    assert main(argv) == 0
    scores = json.loads((tuned / "eval.json").read_text())
    record = json.loads((tuned / "final" / "task.json").read_text())
    assert record["architecture"] == "lxmert" and record["peft"]["method"] == "lora"
    report = tmp_path / "report.md"
    assert main(["evaluate", str(tuned / "final"), "--report", str(report)]) == 0
    assert "vqa_accuracy" in report.read_text()
    assert 0.0 <= scores["dev/vqa_accuracy"] <= 1.0
    out = tmp_path / "predictions.jsonl"
    dev = str(tasks / "vqa_dev.jsonl")
    assert main(["predict", str(tuned / "final"), dev, "--output", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    _, expected = predict_image_text(tuned / "final", tasks / "vqa_dev.jsonl")
    assert [r["prediction"] for r in rows] == expected
