"""finetune.peft=lora|ia3|prompt|prefix on ULMFiT's AWD-LSTM (ptm_classic.recurrent.lstm_peft)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.nn.utils import parametrize

from flows.cli import main
from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMLanguageModel
from ptm_classic.recurrent.lstm_peft import attach_lstm_peft
from ptm_classic.recurrent.ulmfit import ULMFiTClassifier, finetune_ulmfit, load_ulmfit_classifier
from ptm_core.checkpoints import CheckpointError
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.metrics import MetricsLog

METHODS = ("lora", "ia3", "prompt", "prefix")


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _classifier(seed: int = 0, wdrop: float = 0.5) -> ULMFiTClassifier:
    torch.manual_seed(seed)
    config = AWDLSTMConfig(
        vocab_size=53, embedding_size=10, hidden_size=14, num_layers=3, wdrop=wdrop
    )
    return ULMFiTClassifier(AWDLSTMEncoder(config), 3)


def _batch(seed: int = 1) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 53, (5, 9), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[3, 4:] = 0
    return {
        "input_ids": ids * mask,
        "attention_mask": mask,
        "labels": torch.tensor([0, 1, 2, 1, 0]),
    }


@pytest.mark.parametrize("method", ["lora", "ia3", "prefix"])
def test_a_fresh_adapter_is_the_base_model(method: str) -> None:
    model = _classifier().eval()
    batch = _batch()
    base = model(batch).logits
    attach_lstm_peft(model, PeftConfig(method=method))
    assert torch.equal(model(batch).logits, base)  # B = 0, scales 1, zero initial state
    model.train()  # the same dropout draws give the same training forward too
    torch.manual_seed(5)
    adapted = model(batch).logits
    plain = _classifier().train()
    torch.manual_seed(5)
    assert torch.allclose(adapted, plain(batch).logits, atol=1e-6)


def test_lora_on_w_hh_is_inside_the_dropconnect_mask() -> None:
    model = _classifier(wdrop=0.5)
    attach_lstm_peft(model, PeftConfig(method="lora", r=2, alpha=6.0))
    lstm = model.encoder.layers[1].lstm
    lora = lstm.parametrizations.weight_hh_l0[0]
    with torch.no_grad():
        lora.lora_B.normal_()
    raw = lstm.parametrizations.weight_hh_l0.original
    merged = raw + 3.0 * lora.lora_B @ lora.lora_A
    assert torch.allclose(lstm.weight_hh_l0, merged)
    layer = model.encoder.layers[1].train()
    torch.manual_seed(7)
    layer(torch.randn(2, 4, 14))
    torch.manual_seed(7)
    torch.randn(2, 4, 14)
    expected = F.dropout(merged, 0.5, training=True)
    assert torch.allclose(layer.last_weight_hh, expected)
    kept = layer.last_weight_hh != 0
    assert 0.35 < kept.float().mean() < 0.65  # the mask zeroes W + delta, not W alone


@pytest.mark.parametrize("method", METHODS)
def test_only_the_adapter_and_the_head_train(method: str) -> None:
    model = _classifier()
    base = {k: v.clone() for k, v in model.encoder.state_dict().items()}
    attach_lstm_peft(model, PeftConfig(method=method, num_virtual_tokens=3))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(
        n.startswith("head.")
        or any(key in n for key in ("lora_", "ia3_", "prompt", "prefix_state_"))
        for n in trainable
    )
    adapter = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    for step in range(3):
        optimizer.zero_grad()
        model(_batch(step)).loss.backward()  # type: ignore[union-attr]
        optimizer.step()
    inner = getattr(model.encoder, "encoder", model.encoder)
    for name, tensor in inner.state_dict().items():
        original = name.replace("parametrizations.", "").replace(".original", "")
        if original in base:
            assert torch.equal(tensor, base[original]), name
    moved = [n for n, p in model.named_parameters() if n in adapter and not n.startswith("head.")]
    assert moved and all(
        not torch.equal(dict(model.named_parameters())[n], adapter[n]) for n in moved
    )


def test_prompt_steps_are_cut_before_pooling_and_padding_changes_nothing() -> None:
    model = _classifier()
    attach_lstm_peft(model, PeftConfig(method="prompt", num_virtual_tokens=4))
    model.eval()
    batch = _batch()
    encoded = model.encoder(batch["input_ids"])
    assert encoded.raw_outputs[-1].shape[1] == 9  # the real steps only
    logits = model(batch).logits
    for row in (1, 3):
        length = int(batch["attention_mask"][row].sum())
        alone = {
            "input_ids": batch["input_ids"][row : row + 1, :length],
            "attention_mask": batch["attention_mask"][row : row + 1, :length],
        }
        assert torch.allclose(model(alone).logits, logits[row : row + 1], atol=1e-6)
    # the prompt matters: another prompt, another answer
    with torch.no_grad():
        model.encoder.prompt.add_(1.0)
    assert not torch.allclose(model(batch).logits, logits)


def test_adapter_depths_follow_ulmfit_layer_groups() -> None:
    for method, name, depth in (
        ("lora", "encoder.layers.2.lstm.parametrizations.weight_hh_l0.0.lora_B", 3),
        ("ia3", "encoder.layers.1.lstm.parametrizations.weight_ih_l0.0.ia3_input", 2),
        ("prompt", "encoder.prompt", 0),
        ("prefix", "encoder.prefix_state_c.1", 2),
    ):
        model = attach_lstm_peft(_classifier(), PeftConfig(method=method))
        names = dict(model.named_parameters())
        assert name in names
        assert model.parameter_depth(name) == depth
        for every in names:  # every parameter has a group (discriminative rates work)
            model.parameter_depth(every)


def test_unknown_lora_target_is_refused_with_the_valid_names() -> None:
    with pytest.raises(ValueError, match="weight_ih, weight_hh, embeddings"):
        attach_lstm_peft(_classifier(), PeftConfig(method="lora", target_modules=("query",)))


def _lm_folder(tmp_path: Path) -> Path:
    """A random-init AWD-LSTM final/ with its own vocabulary (not the bundled samples)."""
    random.seed(3)
    syllables = ["ka", "lo", "mi", "ren", "tu", "sho", "vel", "dra", "qui", "zor"]
    words = sorted({"".join(random.sample(syllables, 2)) for _ in range(60)})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt", lowercase=True)
    config = AWDLSTMConfig(
        vocab_size=tokenizer.vocab_size, embedding_size=12, hidden_size=18, num_layers=2
    )
    torch.manual_seed(0)
    lm_dir = AWDLSTMLanguageModel(config).save_pretrained(
        tmp_path / "lm", extra_writers=[tokenizer.save]
    )
    positive, negative = words[: len(words) // 2], words[len(words) // 2 :]
    for split, count in (("train", 64), ("dev", 24)):
        rows = ["sentence\tlabel"]
        for i in range(count):
            label = i % 2
            pool = positive if label else negative
            rows.append(" ".join(random.choices(pool, k=random.randint(3, 9))) + f"\t{label}")
        (tmp_path / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return lm_dir


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_cli_finetune_peft_saves_the_adapter_and_reloads_equal(tmp_path: Path, method: str) -> None:
    lm_dir = _lm_folder(tmp_path)
    out = tmp_path / "clf"
    code = main(
        [
            "finetune",
            "task=gain_sentiment",
            f"task.train={tmp_path / 'train.tsv'}",
            f"task.dev={tmp_path / 'dev.tsv'}",
            f"model={lm_dir}",
            f"finetune.peft={method}",
            "finetune.peft_virtual_tokens=3",
            "finetune.peft_r=2",
            "trainer.max_steps=10",
            "trainer.learning_rate=1e-2",
            "trainer.schedule=slanted_triangular",
            "trainer.layer_lr_decay=0.3846",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
            "trainer.device=cpu",
        ]
    )
    assert code == 0
    final = out / "final"
    assert not (final / "model.safetensors").exists()  # no base weights in the adapter run
    record = json.loads((final / "task.json").read_text())
    assert record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(lm_dir.resolve())
    adapter = load_file(str(final / "adapter.safetensors"))
    assert adapter and all("embeddings.weight" not in k for k in adapter)
    eval_record = json.loads((out / "eval.json").read_text())
    assert 0 < eval_record["parameters/trainable_share"] < 0.5
    model = load_ulmfit_classifier(final)
    from ptm_core.finetune.recipe import predict

    metrics, _ = predict(final)
    assert metrics["accuracy"] == pytest.approx(eval_record["dev/accuracy"], abs=1e-6)
    for name, tensor in adapter.items():
        assert torch.equal(model.encoder.state_dict()[name], tensor)
    # a changed base is refused in one line naming task.json
    lm = AWDLSTMLanguageModel.from_pretrained(lm_dir)
    with torch.no_grad():
        lm.encoder.embeddings.weight.add_(1.0)
    lm.save_pretrained(lm_dir)
    with pytest.raises(CheckpointError, match="has changed since this adapter was trained"):
        load_ulmfit_classifier(final)


def test_gradual_unfreezing_and_random_init_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lm_dir = _lm_folder(tmp_path)
    for override, message in (
        ("trainer.unfreeze_every=2", "gradual unfreezing"),
        ("finetune.random_init=true", "finetune.random_init=false"),
    ):
        code = main(
            [
                "finetune",
                "task=gain_sentiment",
                f"task.train={tmp_path / 'train.tsv'}",
                f"task.dev={tmp_path / 'dev.tsv'}",
                f"model={lm_dir}",
                "finetune.peft=lora",
                override,
                f"trainer.output_dir={tmp_path / 'run'}",
                "trainer.device=cpu",
            ]
        )
        assert code != 0
        assert message in capsys.readouterr().err


def test_parametrized_weights_are_computed_once_per_call() -> None:
    model = attach_lstm_peft(_classifier(), PeftConfig(method="lora", dropout=0.3))
    model.train()
    calls = []
    lora = model.encoder.layers[0].lstm.parametrizations.weight_ih_l0[0]
    lora.register_forward_hook(lambda *args: calls.append(1))
    model(_batch())
    assert len(calls) == 1  # one LoRA-dropout mask for the whole sequence
    assert not parametrize.is_parametrized(model.encoder.embeddings)


def _finetune(tmp_path: Path, lm_dir: Path, out: Path, method: str) -> Any:
    task = TaskSpec.from_mapping(
        {
            "name": "made_up",
            "kind": "classification",
            "format": "glue",
            "train": str(tmp_path / "train.tsv"),
            "dev": str(tmp_path / "dev.tsv"),
            "label_field": "label",
            "max_length": 16,
            "batch_size": 8,
            "metric": "accuracy",
        }
    )
    trainer = TrainerConfig(
        output_dir=str(out), max_steps=8, save_every=4, log_every=1, learning_rate=1e-2,
        layer_lr_decay=1 / 2.6, progress=False, device="cpu", precision="fp32", seed=2,
    )  # fmt: skip
    peft = PeftConfig(method=method, r=2, dropout=0.2, num_virtual_tokens=3)
    return finetune_ulmfit(task, model_dir=lm_dir, trainer=trainer, seed=2, peft=peft)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["lora", "prompt"])
def test_crash_and_resume_is_bit_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    lm_dir = _lm_folder(tmp_path)
    straight = _finetune(tmp_path, lm_dir, tmp_path / "straight", method)
    forward = ULMFiTClassifier.forward
    calls = {"n": 0}

    def crashing(self: ULMFiTClassifier, batch: dict[str, torch.Tensor]) -> Any:
        calls["n"] += 1
        if calls["n"] == 7:  # during step 7, after the step-4 checkpoint
            raise RuntimeError("killed")
        return forward(self, batch)

    monkeypatch.setattr(ULMFiTClassifier, "forward", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        _finetune(tmp_path, lm_dir, tmp_path / "killed", method)
    monkeypatch.setattr(ULMFiTClassifier, "forward", forward)
    resumed = _finetune(tmp_path, lm_dir, tmp_path / "killed", method)
    for name in ("adapter.safetensors", "task_head.safetensors"):
        ours = load_file(str(resumed.encoder_dir / name))
        theirs = load_file(str(straight.encoder_dir / name))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    losses = [r["loss"] for r in MetricsLog(resumed.metrics_path).read()]
    assert losses == [r["loss"] for r in MetricsLog(straight.metrics_path).read()]
    assert len(losses) == 8
