"""ERNIE-THU with finetune.peft: only the adapter and the head train, final/ holds just
those beside a pointer to the base folder, it reloads to the same model, and a killed run
resumes bit for bit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from knowledge_sample_paths import KG_DIR, VOCAB
from peft_checks import (
    assert_adapter_folder,
    assert_only_adapter_and_head_trained,
    assert_prompt_seen_and_padding_hidden,
    assert_resume_is_bit_identical,
    assert_same_state,
    spy_on_attach,
)
from test_ernie_finetune import DEV, TRAIN, tiny_encoder

import ptm_knowledge.ernie.finetune as ernie_finetune
from ptm_core.checkpoints import CheckpointError
from ptm_core.families.runner import FinetuneRun
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig, SoftPromptEncoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie.family_hooks import finetune as finetune_hook
from ptm_knowledge.ernie.finetune import finetune_ernie_thu, predict_ernie
from ptm_knowledge.ernie.peft_io import attach_ernie_peft
from ptm_knowledge.ernie.task_io import load_ernie_task_model
from ptm_knowledge.ernie.task_model import ErnieTaskModel, build_ernie_task_model
from ptm_knowledge.family_ernie import ErnieThuSettings, FinetuneOptions


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, sample_kg: Any) -> Path:
    """An ERNIE-THU final/ as pre-training writes it (built directly, no training)."""
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    final = tmp_path_factory.mktemp("ernie") / "final"
    encoder = tiny_encoder(tokenizer, len(sample_kg.entity_ids))
    encoder.save_pretrained(final, entity_ids=list(sample_kg.entity_ids), kg=KG_DIR)
    tokenizer.save(final)
    return final


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> TaskSpec:
    folder = tmp_path_factory.mktemp("task")
    (folder / "train.tsv").write_text(TRAIN, encoding="utf-8")
    (folder / "dev.tsv").write_text(DEV, encoding="utf-8")
    return TaskSpec(
        name="typing",
        kind="classification",
        train=str(folder / "train.tsv"),
        dev=str(folder / "dev.tsv"),
        max_length=32,
        batch_size=2,
    )


def run(base: Path, task: TaskSpec, out: Path, method: str, *, steps: int = 6, **trainer: Any):
    config = TrainerConfig(
        output_dir=str(out), max_steps=steps, progress=False, device="cpu", seed=3,
        log_every=1, learning_rate=1e-2, **trainer,
    )  # fmt: skip
    return finetune_ernie_thu(
        task,
        model_dir=base,
        trainer=config,
        seed=3,
        cache_dir=out.parent / "links",
        peft=PeftConfig(method=method, r=4, num_virtual_tokens=3),
    )


def weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


@pytest.mark.parametrize("method", ["lora", "ia3", "prefix", "prompt"])
def test_only_the_adapter_and_head_train_and_final_reloads(
    base: Path, task: TaskSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    seen = spy_on_attach(monkeypatch, ernie_finetune, "attach_ernie_peft")
    result = run(base, task, tmp_path / "run", method)
    model, after = seen["model"], seen["model"].state_dict()
    adapter = assert_only_adapter_and_head_trained(seen["before"], after)
    # LoRA/IA3 reach the knowledge layers' fusion; prefixes sit in the T-Encoder only.
    assert any(".token_out." in k for k in adapter) == (method in ("lora", "ia3"))
    assert (adapter == ["encoder.prompt"]) == (method == "prompt")
    assert not model.encoder.entity_table.requires_grad
    assert 0 < result.final_metrics["parameters/trainable_share"] < 0.3

    final = result.encoder_dir
    record = assert_adapter_folder(final, base, method)
    assert (final / "knowledge_config.json").is_file()
    assert not (final / "knowledge_layers.safetensors").exists()
    assert record["recipe"] == "ernie_thu_finetune"
    assert json.loads((final / "config.json").read_text())["ptm_model"] == "ernie_thu"

    loaded, loaded_record = load_ernie_task_model(final)
    kg_ids = json.loads((base / "knowledge_config.json").read_text())["entity_ids"]
    assert loaded_record["entity_ids"] == kg_ids
    assert_same_state(loaded, after)
    metrics, _ = predict_ernie(final, cache_dir=tmp_path / "links")
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert metrics["accuracy"] == eval_json["dev/accuracy"]
    assert metrics["loss"] == pytest.approx(eval_json["dev/loss"], abs=1e-6)


def test_a_moved_base_is_one_clear_line(base: Path, task: TaskSpec, tmp_path: Path) -> None:
    final = run(base, task, tmp_path / "run", "lora", steps=1).encoder_dir
    record = json.loads((final / "task.json").read_text())
    record["peft"]["base"]["path"] = str(tmp_path / "gone")
    (final / "task.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match=r"base model folder .*gone of this adapter"):
        load_ernie_task_model(final)


def test_a_prompt_is_tokens_aligned_to_no_entity(sample_kg: Any) -> None:
    """A prompt equal to the embeddings of ``P`` tokens gives the states of ERNIE-THU run on
    those tokens prepended to the text, with no entity aligned to them and every text
    token's entity ``P`` positions further on; padding stays hidden and every real token
    (and its entity stream) reads the prompt."""
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    encoder = tiny_encoder(tokenizer, len(sample_kg.entity_ids)).eval()
    model = build_ernie_task_model(encoder, "classification", 3)
    attach_ernie_peft(model, PeftConfig(method="prompt", num_virtual_tokens=3))
    wrapped = model.encoder
    assert isinstance(wrapped, SoftPromptEncoder)
    assert wrapped.options == encoder.options  # task models read the base through it
    generator = torch.Generator().manual_seed(5)
    ids = torch.randint(5, tokenizer.vocab_size, (2, 9), generator=generator)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    entities = torch.full((2, 9), -1)
    entities[0, 2:4], entities[0, 7], entities[1, 1] = 4, 9, 7
    virtual = torch.tensor([11, 12, 13])
    with torch.no_grad():
        wrapped.prompt.copy_(encoder.word_embeddings.weight[virtual])
        ours = wrapped(ids, mask, entity_ids=entities)
        theirs = encoder(
            torch.cat([virtual.expand(2, -1), ids], 1),
            torch.cat([torch.ones(2, 3, dtype=torch.long), mask], 1),
            entity_ids=torch.cat([torch.full((2, 3), -1), entities], 1),
        )
        unaligned = encoder(  # the entities left where the text was: a different model
            torch.cat([virtual.expand(2, -1), ids], 1),
            torch.cat([torch.ones(2, 3, dtype=torch.long), mask], 1),
            entity_ids=torch.cat([entities, torch.full((2, 3), -1)], 1),
        )
    real = mask.bool()
    for name in ("last_hidden_state", "entity_hidden_state"):
        torch.testing.assert_close(
            getattr(ours, name)[real], getattr(theirs, name)[:, 3:][real], atol=1e-5, rtol=0
        )
    assert (ours.entity_hidden_state[entities < 0] == 0).all()
    assert not torch.allclose(ours.last_hidden_state, unaligned.last_hidden_state[:, 3:])

    def encode(pad: int) -> torch.Tensor:
        padding = torch.zeros(2, pad, dtype=torch.long)
        with torch.no_grad():
            out = wrapped(
                torch.cat([ids, padding], 1),
                torch.cat([mask, padding], 1),
                entity_ids=torch.cat([entities, padding - 1], 1),
            )
        return torch.cat([out.last_hidden_state, out.entity_hidden_state], -1)

    assert_prompt_seen_and_padding_hidden(encode, wrapped.prompt, mask)


def test_the_finetune_hook_reads_finetune_peft(base: Path, task: TaskSpec, tmp_path: Path) -> None:
    """``ptm finetune model=<ERNIE-THU final/> finetune.peft=ia3`` trains an IA3 adapter."""
    settings = ErnieThuSettings(finetune=FinetuneOptions(peft="ia3"), task=task.to_dict())
    trainer = TrainerConfig(output_dir=str(tmp_path / "run"), max_steps=1, progress=False)
    result = finetune_hook(
        FinetuneRun(settings=settings, trainer=trainer, seed=0, init_from=str(base))
    )
    assert json.loads((result.encoder_dir / "task.json").read_text())["peft"]["method"] == "ia3"


@pytest.mark.parametrize("method", ["lora", "prompt"])
def test_crash_and_resume_is_bit_identical(
    base: Path, task: TaskSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    assert_resume_is_bit_identical(
        monkeypatch,
        ErnieTaskModel,
        lambda name: run(base, task, tmp_path / name, method, steps=8, save_every=4),
    )
