"""VisualBERT/ViLBERT with multimodal_finetune.peft: only the adapter and the head train,
final/ holds just those beside a pointer to the pre-trained folder and reloads to the same
model, a killed run resumes bit for bit, and a soft prompt goes before the text stream only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from peft_checks import (
    assert_adapter_folder,
    assert_only_adapter_and_head_trained,
    assert_prompt_seen_and_padding_hidden,
    assert_resume_is_bit_identical,
    assert_same_state,
    spy_on_attach,
)
from test_finetune import SMALL, VILBERT_SMALL, _task, _trainer, pretrained  # noqa: F401

import ptm_multimodal.finetune as mm_finetune
from ptm_core.peft import PeftConfig, SoftPromptEncoder, attach_peft
from ptm_multimodal import vilbert, visualbert
from ptm_multimodal.finetune import finetune_image_text, predict_image_text
from ptm_multimodal.task_io import load_image_text_task_model
from ptm_multimodal.task_model import ImageTextTaskModel, build_task_head


@pytest.mark.parametrize(
    ("family", "method"),
    [
        ("visualbert", "lora"),
        ("visualbert", "ia3"),
        ("visualbert", "prefix"),
        ("visualbert", "prompt"),
        ("vilbert", "lora"),
        ("vilbert", "prompt"),
    ],
)
def test_only_the_adapter_and_head_train_and_final_reloads(
    family: str,
    method: str,
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    seen = spy_on_attach(monkeypatch, mm_finetune, "attach_peft")
    trainer = _trainer(tmp_path / "run", steps=4)
    trainer.learning_rate = 1e-2
    result = finetune_image_text(
        _task("classification"),
        init_from=pretrained[family],
        trainer=trainer,
        peft=PeftConfig(method=method, r=4, num_virtual_tokens=3),
    )
    after = seen["model"].state_dict()
    assert_only_adapter_and_head_trained(seen["before"], after)
    final = result.encoder_dir
    record = assert_adapter_folder(final, pretrained[family], method, smaller=2)
    assert record["family"] == "multimodal"
    loaded, *_ = load_image_text_task_model(final)
    assert_same_state(loaded, after)
    metrics, _ = predict_image_text(final)
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert metrics["accuracy"] == eval_json["dev/accuracy"]


@pytest.mark.parametrize(("family", "method"), [("visualbert", "lora"), ("vilbert", "prompt")])
def test_crash_and_resume_is_bit_identical(
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
    family: str,
    method: str,
) -> None:
    def run(name: str) -> Any:
        trainer = _trainer(tmp_path / name, steps=8)
        trainer.save_every, trainer.log_every = 4, 1
        return finetune_image_text(
            _task("classification"),
            init_from=pretrained[family],
            trainer=trainer,
            peft=PeftConfig(method=method, r=4, num_virtual_tokens=3),
        )

    assert_resume_is_bit_identical(monkeypatch, ImageTextTaskModel, run)


def test_a_frozen_backbone_is_refused_in_one_line(
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    task, trainer = _task("classification"), _trainer(tmp_path / "run", steps=1)
    with pytest.raises(ValueError, match=r"set freeze_backbone=false$"):
        finetune_image_text(
            task,
            init_from=pretrained["visualbert"],
            trainer=trainer,
            peft=PeftConfig("lora"),
            freeze_backbone=True,
        )


def _regions(batch: int, count: int, width: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(batch, count, dtype=torch.long)
    mask[1, -2:] = 0
    return {
        "visual_features": torch.randn(batch, count, width, generator=generator),
        "visual_boxes": torch.rand(batch, count, 5, generator=generator),
        "visual_mask": mask,
    }


@pytest.mark.parametrize("family", ["visualbert", "vilbert"])
def test_a_prompt_goes_before_the_text_stream_only(family: str) -> None:
    """A prompt equal to the embeddings of ``P`` tokens gives the states of the model run on
    those tokens prepended to the caption (text positions ``0..P-1``, segment 0, visible
    to all); the regions keep their own positions, segments and (ViLBERT) stream, the
    heads read the real ``[CLS]`` (VisualBERT's output: ``L`` text then ``R`` region
    slots); padding stays hidden and every real token reads the prompt."""
    torch.manual_seed(0)
    if family == "visualbert":
        backbone = visualbert(vocab_size=60, visual_embedding_dim=12, max_positions=24, **SMALL)
    else:
        backbone = vilbert(
            vocab_size=60, visual_embedding_dim=12, max_positions=24, **VILBERT_SMALL
        )
    model = ImageTextTaskModel(backbone, build_task_head(backbone, 3), "classification", "abc")
    attach_peft(model, PeftConfig("prompt", num_virtual_tokens=3)).eval()
    wrapped = model.encoder
    assert isinstance(wrapped, SoftPromptEncoder) and model.architecture == family
    ids = torch.randint(5, 60, (2, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, 4:] = 0
    types = torch.zeros(2, 7, dtype=torch.long)
    types[:, 3:] = 1
    regions = _regions(2, 5, 12, seed=3)
    virtual = torch.tensor([21, 22, 23])
    with torch.no_grad():
        wrapped.prompt.copy_(backbone.word_embeddings.weight[virtual])
        ours = wrapped(ids, mask, token_type_ids=types, **regions)
        theirs = backbone(
            torch.cat([virtual.expand(2, -1), ids], 1),
            attention_mask=torch.cat([torch.ones(2, 3, dtype=torch.long), mask], 1),
            token_type_ids=torch.cat([torch.zeros(2, 3, dtype=torch.long), types], 1),
            **regions,
        )
        logits = model({"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
                        **regions}).logits  # fmt: skip
    text = theirs.last_hidden_state[:, 3:]  # VisualBERT: text then regions
    assert ours.last_hidden_state.shape == text.shape
    real = (torch.cat([mask, regions["visual_mask"]], 1) if family == "visualbert" else mask).bool()
    torch.testing.assert_close(ours.last_hidden_state[real], text[real], atol=1e-5, rtol=0)
    if family == "vilbert":  # the image stream reads the prompt through co-attention only
        image = theirs.image_hidden_state
        torch.testing.assert_close(ours.image_hidden_state, image, atol=1e-5, rtol=0)
        head_input: tuple[torch.Tensor, ...] = (text, theirs.image_hidden_state)
    else:
        head_input = (text,)
    torch.testing.assert_close(logits, model.head(*head_input), atol=1e-5, rtol=0)

    def encode(pad: int) -> torch.Tensor:
        padding = torch.zeros(2, pad, dtype=torch.long)
        with torch.no_grad():
            states = wrapped(torch.cat([ids, padding], 1), torch.cat([mask, padding], 1),
                             token_type_ids=torch.cat([types, padding], 1), **regions)  # fmt: skip
        return states.last_hidden_state[:, : 7 + pad]

    assert_prompt_seen_and_padding_hidden(encode, wrapped.prompt, mask)


def test_the_guides_vilbert_prompt_command_runs_and_predicts(
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    one_thread: None,
) -> None:
    """``ptm pretrain experiment=vilbert_vqa_tiny init_from=... multimodal_finetune.peft=prompt``
    (the guide's command): an adapter-only final/ that predicts as the run scored."""
    from flows import runner
    from flows.config import compose_config

    cfg = compose_config(
        [
            "experiment=vilbert_vqa_tiny",
            f"init_from={pretrained['vilbert']}",
            "multimodal_finetune.peft=prompt",
            "multimodal_finetune.peft_virtual_tokens=4",
            "trainer.max_steps=2",
            "trainer.progress=false",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
    )
    result = runner.run(cfg)
    final = result.encoder_dir
    assert json.loads((final / "task.json").read_text())["peft"]["method"] == "prompt"
    assert not (final / "model.safetensors").exists()
    metrics, _ = predict_image_text(final)
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert metrics["vqa_accuracy"] == pytest.approx(eval_json["dev/vqa_accuracy"])


def test_a_prompt_on_vlbert_is_one_line() -> None:
    """VL-BERT takes no text vectors (its caption sits among special and region slots)."""
    from ptm_multimodal import vlbert

    backbone = vlbert(vocab_size=60, visual_embedding_dim=12, max_positions=24, **SMALL)
    with pytest.raises(ValueError, match=r"^VlbertModel takes no inputs_embeds.*lora"):
        SoftPromptEncoder(backbone, 3)
