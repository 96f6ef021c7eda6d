"""A parameter-efficient fine-tune end to end: what final/ holds, loading it back (base +
adapter), the base pointer's checks, and a crash/resume that stays bit-identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.presets import bert_encoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import TaskModel
from ptm_core.finetune.recipe import finetune, load_finetuned, predict
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.metrics import MetricsLog

REPO = Path(__file__).resolve().parents[3]
TASK = TaskSpec(
    name="sentiment",
    kind="classification",
    train=str(REPO / "data_specs/glue_classification/single_train.tsv"),
    dev=str(REPO / "data_specs/glue_classification/single_dev.tsv"),
    max_length=32,
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small 'pre-trained' encoder folder with its tokenizer."""
    path = tmp_path_factory.mktemp("base") / "final"
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
        intermediate_size=48,
    )  # fmt: skip
    encoder.save_pretrained(path, tokenizer=tokenizer)
    return path


def run(base: Path, out: Path, method: str, *, steps: int = 6, **trainer: object):
    tokenizer = WordPieceTokenizer.from_directory(base)
    config = TrainerConfig(
        output_dir=str(out), max_steps=steps, progress=False, device="cpu", seed=2,
        log_every=1, learning_rate=5e-3, **trainer,  # type: ignore[arg-type]
    )  # fmt: skip
    return finetune(
        TASK,
        encoder=TransformerEncoder.from_pretrained(base),
        tokenizer=tokenizer,
        trainer=config,
        seed=2,
        peft=PeftConfig(method=method, r=4, num_virtual_tokens=5),
        base=base,
    )


@pytest.mark.parametrize("method", ["lora", "ia3", "prompt", "prefix"])
def test_final_holds_adapter_and_head_and_loads_back(
    base: Path, tmp_path: Path, method: str
) -> None:
    result = run(base, tmp_path / "run", method)
    final = result.encoder_dir
    names = {p.name for p in final.iterdir()}
    assert {"adapter.safetensors", "task_head.safetensors", "task.json", "config.json"} <= names
    assert "model.safetensors" not in names  # the base is not copied
    record = json.loads((final / "task.json").read_text())
    assert record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(base.resolve())
    share = result.final_metrics["parameters/trainable_share"]
    assert 0 < share < 0.5
    # Loading = base + adapter + head: predictions score as the run's own dev scoring did.
    metrics, _ = predict(final)
    assert metrics["accuracy"] == pytest.approx(result.final_metrics["dev/accuracy"])
    model, *_ = load_finetuned(final)
    assert isinstance(model, TaskModel)
    # The frozen base weights are the base folder's, untouched by training.
    base_state = load_file(str(base / "model.safetensors"))
    inner = getattr(model.encoder, "encoder", model.encoder)
    loaded = {k: v for k, v in inner.state_dict().items() if "." in k}
    assert torch.equal(loaded["embeddings.word.weight"], base_state["embeddings.word.weight"])


def test_missing_or_changed_base_is_one_clear_line(base: Path, tmp_path: Path) -> None:
    final = run(base, tmp_path / "run", "lora", steps=2).encoder_dir
    record = json.loads((final / "task.json").read_text())
    record["peft"]["base"]["path"] = str(tmp_path / "gone")
    (final / "task.json").write_text(json.dumps(record))
    with pytest.raises(
        CheckpointError, match=r"base model folder .*gone of this adapter is missing"
    ):
        load_finetuned(final)
    changed = tmp_path / "changed"
    changed.mkdir()
    for item in base.iterdir():
        (changed / item.name).write_bytes(item.read_bytes())
    (changed / "config.json").write_text((base / "config.json").read_text() + " ")
    record["peft"]["base"]["path"] = str(changed)
    (final / "task.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match=r"has changed since this adapter was trained"):
        load_finetuned(final)


def test_a_run_without_a_base_folder_is_refused(tmp_path: Path) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=1, num_heads=2
    )
    trainer = TrainerConfig(output_dir=str(tmp_path), max_steps=1, progress=False, device="cpu")
    with pytest.raises(ValueError, match=r"finetune.peft=lora .*init_from="):
        finetune(
            TASK, encoder=encoder, tokenizer=tokenizer, trainer=trainer, peft=PeftConfig("lora")
        )


@pytest.mark.parametrize("method", ["lora", "prefix"])
def test_crash_and_resume_is_bit_identical(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    straight = run(base, tmp_path / "straight", method, steps=8, save_every=4)
    forward = TaskModel.forward
    calls = {"n": 0}

    def crashing(self: TaskModel, batch: dict[str, torch.Tensor]):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 7:  # during step 7, after the step-4 checkpoint
            raise RuntimeError("killed")
        return forward(self, batch)

    monkeypatch.setattr(TaskModel, "forward", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run(base, tmp_path / "killed", method, steps=8, save_every=4)
    monkeypatch.setattr(TaskModel, "forward", forward)
    resumed = run(base, tmp_path / "killed", method, steps=8, save_every=4)
    for name in ("adapter.safetensors", "task_head.safetensors"):
        ours = load_file(str(resumed.encoder_dir / name))
        theirs = load_file(str(straight.encoder_dir / name))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    losses = [r["loss"] for r in MetricsLog(resumed.metrics_path).read()]
    assert losses == [r["loss"] for r in MetricsLog(straight.metrics_path).read()]
    assert len(losses) == 8
