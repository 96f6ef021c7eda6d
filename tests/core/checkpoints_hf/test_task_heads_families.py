"""ELECTRA, ALBERT and XLNet task folders against transformers: same logits (1e-5) both ways.

Random-init models of odd sizes (hidden 24, 3 heads, 2 layers, vocabulary 97): a
``...For<Task>`` folder loads into ptm strictly, with its head (ELECTRA's GELU head, XLNet's
last-token summary); ptm's export loads back in transformers' ``AutoModelFor<Task>`` with no
missing or unexpected key and the same logits; a ptm ``task.json`` keeps the head's variant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.bert_tasks import (
    export_hf_task_model,
    is_hf_task_directory,
    load_hf_task_model,
)
from ptm_core.checkpoints.hf.export import export_hf
from ptm_core.finetune.model import TaskModel, load_task_model, save_task_model

TOL = 1e-5
VOCAB = 97
KINDS = ("classification", "regression", "tagging", "qa", "multiple_choice")
CLASS_NAMES = {
    "classification": "ForSequenceClassification",
    "regression": "ForSequenceClassification",
    "tagging": "ForTokenClassification",
    "qa": "ForQuestionAnswering",
    "multiple_choice": "ForMultipleChoice",
}
PREFIX = {"electra": "Electra", "albert": "Albert", "xlnet": "XLNet"}
AUTO = {
    "classification": transformers.AutoModelForSequenceClassification,
    "regression": transformers.AutoModelForSequenceClassification,
    "tagging": transformers.AutoModelForTokenClassification,
    "qa": transformers.AutoModelForQuestionAnswering,
    "multiple_choice": transformers.AutoModelForMultipleChoice,
}


def hf_config(family: str, **extra: Any) -> Any:
    if family == "xlnet":
        return transformers.XLNetConfig(
            vocab_size=VOCAB, d_model=24, n_layer=2, n_head=3, d_inner=40, **extra
        )
    common = {
        "vocab_size": VOCAB,
        "embedding_size": 16,
        "hidden_size": 24,
        "num_hidden_layers": 2,
        "num_attention_heads": 3,
        "intermediate_size": 40,
        "max_position_embeddings": 32,
        **extra,
    }
    if family == "albert":
        return transformers.AlbertConfig(**common)
    return transformers.ElectraConfig(**common)


def hf_class(family: str, kind: str) -> type[Any]:
    name = PREFIX[family] + CLASS_NAMES[kind]
    if family == "xlnet" and kind == "qa":
        name += "Simple"
    return getattr(transformers, name)


def labels_of(kind: str) -> dict[str, Any]:
    if kind == "classification":
        return {"id2label": {0: "neg", 1: "neu", 2: "pos"}}
    if kind == "regression":
        return {"num_labels": 1}
    if kind == "tagging":
        return {"id2label": {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}}
    return {}


def save_hf(family: str, kind: str, path: Path, seed: int = 0, **extra: Any) -> Any:
    torch.manual_seed(seed)
    model = hf_class(family, kind)(hf_config(family, **labels_of(kind), **extra)).eval()
    with torch.no_grad():  # off the init (zero biases), so a missed copy shows
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    model.save_pretrained(path, safe_serialization=True)
    return model


def make_batch(family: str, kind: str, seed: int = 1) -> dict[str, torch.Tensor]:
    """Padded pairs, (B, C, L) for multiple choice; XLNet pads on the left, as its
    tokenizer does (its summary reads position L - 1)."""
    gen = torch.Generator().manual_seed(seed)
    shape = (3, 4, 10) if kind == "multiple_choice" else (3, 10)
    ids = torch.randint(5, VOCAB, shape, generator=gen)
    mask = torch.ones_like(ids)
    if family == "xlnet":
        mask[..., 0, :3] = 0
    else:
        mask[..., 0, 7:] = 0
    types = torch.zeros_like(ids)
    types[..., 5:] = 1
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types}


def hf_logits(model: Any, kind: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        out = model(**batch)
    if kind != "qa":
        return out.logits
    logits = torch.stack([out.start_logits, out.end_logits], dim=-1)
    # ptm gives padding the lowest logit (see test_task_parity.hf_qa_logits).
    return logits.masked_fill(~batch["attention_mask"].bool()[..., None], torch.finfo().min)


def ptm_logits(model: TaskModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(batch).logits


def assert_close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() <= TOL


CASES = [(family, kind) for family in PREFIX for kind in KINDS]


@pytest.mark.parametrize(("family", "kind"), CASES)
def test_a_task_folder_loads_strictly_with_its_head(family: str, kind: str, tmp_path: Path) -> None:
    theirs = save_hf(family, kind, tmp_path)
    assert is_hf_task_directory(tmp_path)
    model = load_hf_task_model(tmp_path)  # strict
    assert model.kind == kind
    batch = make_batch(family, kind)
    assert_close(ptm_logits(model, batch), hf_logits(theirs, kind, batch))
    if kind == "classification":
        assert model.label_names == ["neg", "neu", "pos"]


@pytest.mark.parametrize(("family", "kind"), CASES)
def test_the_export_loads_in_transformers_with_the_same_logits(
    family: str, kind: str, tmp_path: Path
) -> None:
    save_hf(family, kind, tmp_path / "hf")
    model = load_hf_task_model(tmp_path / "hf")
    with torch.no_grad():  # another head than the folder's, so the export is what is read
        for parameter in model.head.parameters():
            parameter.add_(0.1)
    export_hf_task_model(model, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == family
    assert config["architectures"] == [hf_class(family, kind).__name__]
    theirs, info = AUTO[kind].from_pretrained(tmp_path / "out", output_loading_info=True)
    assert type(theirs) is hf_class(family, kind)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    batch = make_batch(family, kind, seed=2)
    assert_close(ptm_logits(model, batch), hf_logits(theirs.eval(), kind, batch))


def test_electra_classification_keeps_its_gelu_head_through_a_ptm_folder(
    tmp_path: Path,
) -> None:
    theirs = save_hf("electra", "classification", tmp_path / "hf")
    model = load_hf_task_model(tmp_path / "hf")
    save_task_model(model, tmp_path / "ptm", task_config={})
    record = json.loads((tmp_path / "ptm" / "task.json").read_text())
    assert record["pooler_activation"] == "gelu" and record["pooler_input_dropout"] is True
    again, _ = load_task_model(tmp_path / "ptm")
    batch = make_batch("electra", "classification")
    expected = hf_logits(theirs, "classification", batch)
    assert_close(ptm_logits(again, batch), expected)
    # BERT's tanh pooler on the same weights is another model: the check above can fail.
    again.head.pooler.activation = "tanh"
    assert (ptm_logits(again, batch) - expected).abs().max().item() > 1e-2
    # `ptm export --format hf` of the ptm folder writes ELECTRA's class again.
    result = export_hf(tmp_path / "ptm", tmp_path / "out")
    assert result.architecture == "ElectraForSequenceClassification"
    exported = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "out")
    assert_close(hf_logits(exported.eval(), "classification", batch), expected)


def test_electra_base_layout_exports_its_head_as_electra(tmp_path: Path) -> None:
    """ELECTRA-base has embedding_size == hidden_size: no projection, a BERT-shaped encoder,
    whose GELU head only ELECTRA's class holds."""
    theirs = save_hf("electra", "classification", tmp_path / "hf", embedding_size=24)
    model = load_hf_task_model(tmp_path / "hf")
    export_hf_task_model(model, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["ElectraForSequenceClassification"]
    exported = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "out")
    batch = make_batch("electra", "classification")
    assert_close(
        hf_logits(exported.eval(), "classification", batch),
        hf_logits(theirs, "classification", batch),
    )


def test_summary_settings_come_from_the_config(tmp_path: Path) -> None:
    """ELECTRA's multiple choice with a tanh last-token summary; XLNet's classifier on the
    first token: the variant follows summary_type/summary_activation both ways."""
    for family, kind, extra in (
        ("electra", "multiple_choice", {"summary_type": "last", "summary_activation": "tanh"}),
        ("xlnet", "classification", {"summary_type": "first", "summary_activation": "gelu"}),
    ):
        theirs = save_hf(family, kind, tmp_path / family, **extra)
        model = load_hf_task_model(tmp_path / family)
        # Left padding, so the last token is real for ptm's summary and transformers' alike.
        batch = make_batch("xlnet", kind)
        assert_close(ptm_logits(model, batch), hf_logits(theirs, kind, batch))
        export_hf_task_model(model, tmp_path / f"{family}-out")
        config = json.loads((tmp_path / f"{family}-out" / "config.json").read_text())
        assert {k: config[k] for k in extra} == extra


def test_a_summary_ptm_cannot_compute_is_refused(tmp_path: Path) -> None:
    save_hf("xlnet", "classification", tmp_path, summary_type="mean")
    with pytest.raises(CheckpointError, match=r"config\.json: .*summary_type 'mean'"):
        load_hf_task_model(tmp_path)


def _rewrite_config(path: Path, **changes: Any) -> None:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def test_mismatched_folders_are_refused_naming_the_file_and_tensor(tmp_path: Path) -> None:
    # Another vocabulary: the config says 97, the weights hold 101 rows.
    save_hf("electra", "classification", tmp_path / "vocab")
    _rewrite_config(tmp_path / "vocab", vocab_size=101)
    with pytest.raises(CheckpointError) as info:
        load_hf_task_model(tmp_path / "vocab")
    message = str(info.value)
    assert "\n" not in message
    assert "model.safetensors: tensor 'electra.embeddings.word_embeddings.weight'" in message
    assert "(97, 16)" in message and "(101, 16)" in message

    # A missing encoder tensor.
    save_hf("albert", "tagging", tmp_path / "missing")
    weights = load_file(str(tmp_path / "missing" / "model.safetensors"))
    name = "albert.encoder.embedding_hidden_mapping_in.weight"
    del weights[name]
    save_file(weights, str(tmp_path / "missing" / "model.safetensors"))
    with pytest.raises(
        CheckpointError, match=r"model\.safetensors: tensor 'albert\.encoder\.embedding_hidden"
    ):
        load_hf_task_model(tmp_path / "missing")

    # A wrong model_type: ELECTRA weights under an ALBERT config.
    save_hf("electra", "tagging", tmp_path / "type")
    _rewrite_config(
        tmp_path / "type", model_type="albert", architectures=["AlbertForTokenClassification"]
    )
    with pytest.raises(CheckpointError) as info:
        load_hf_task_model(tmp_path / "type")
    assert "model.safetensors: tensor" in str(info.value) and "model_type" in str(info.value)
    assert "\n" not in str(info.value)
    # ... or an architecture of another family.
    save_hf("xlnet", "qa", tmp_path / "arch")
    _rewrite_config(tmp_path / "arch", architectures=["ElectraForQuestionAnswering"])
    with pytest.raises(CheckpointError, match=r"config\.json: .*model_type 'xlnet'.*XLNetFor"):
        load_hf_task_model(tmp_path / "arch")


def test_an_unknown_tensor_is_refused_unless_loading_what_fits(tmp_path: Path) -> None:
    save_hf("xlnet", "tagging", tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights["extra.weight"] = torch.zeros(2)
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"unknown tensor\(s\) extra\.weight"):
        load_hf_task_model(tmp_path)
    assert load_hf_task_model(tmp_path, strict=False).kind == "tagging"


def test_another_head_of_the_family_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A discriminator head saved beside a token classifier (as older transformers kept
    unused heads): transformers ignores it, ptm too, and says so."""
    theirs = save_hf("electra", "tagging", tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights["discriminator_predictions.dense.weight"] = torch.zeros(24, 24)
    save_file(weights, str(tmp_path / "model.safetensors"))
    with caplog.at_level("WARNING"):
        model = load_hf_task_model(tmp_path)
    assert "left out discriminator_predictions.dense.weight" in caplog.text
    batch = make_batch("electra", "tagging")
    assert_close(ptm_logits(model, batch), hf_logits(theirs, "tagging", batch))


@pytest.mark.parametrize("family", list(PREFIX))
def test_the_encoder_of_a_task_folder_loads_strictly_without_its_head(
    family: str, tmp_path: Path
) -> None:
    """``init_from=<task folder>`` for pre-training: the encoder, the head left out."""
    from ptm_core.encoders.transformer import TransformerEncoder

    theirs = save_hf(family, "classification", tmp_path)
    encoder = TransformerEncoder.from_pretrained(tmp_path).eval()  # strict
    batch = make_batch(family, "classification")
    base = getattr(theirs, theirs.base_model_prefix)
    with torch.no_grad():
        expected = base(**batch).last_hidden_state
        ours = encoder(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    assert (ours - expected)[real].abs().max().item() <= TOL


@pytest.mark.parametrize("family", list(PREFIX))
@pytest.mark.parametrize("kind", ["classification", "regression", "tagging", "multiple_choice"])
def test_losses_match(family: str, kind: str, tmp_path: Path) -> None:
    theirs = save_hf(family, kind, tmp_path)
    model = load_hf_task_model(tmp_path).eval()
    batch = make_batch(family, kind)
    gen = torch.Generator().manual_seed(4)
    if kind == "tagging":
        labels = torch.randint(0, 4, (3, 10), generator=gen)
        labels[batch["attention_mask"] == 0] = -100
    elif kind == "regression":
        labels = torch.randn(3, generator=gen)
    else:
        labels = torch.randint(0, 3 if kind == "classification" else 4, (3,), generator=gen)
    with torch.no_grad():
        ours = model({**batch, "labels": labels}).loss
        expected = theirs(**batch, labels=labels).loss
    assert ours is not None and abs(ours.item() - expected.item()) <= TOL


@pytest.mark.parametrize(
    ("family", "kind", "pool"),
    [
        ("albert", "tagging", "first"),
        ("albert", "multiple_choice", "first"),
        ("xlnet", "classification", "first"),
        ("xlnet", "qa", "first"),
        ("electra", "qa", "first"),
    ],
)
def test_a_ptm_built_task_model_exports_to_its_family(
    family: str, kind: str, pool: str, tmp_path: Path
) -> None:
    """ptm's own presets (not an imported folder): ALBERT's gelu_new, XLNet with ptm's
    first-token pool (written as summary_type 'first')."""
    from ptm_core.encoders import presets
    from ptm_core.finetune.model import build_task_model

    torch.manual_seed(0)
    sizes = {"vocab_size": VOCAB, "hidden_size": 24, "num_layers": 2, "num_heads": 3}
    if family == "xlnet":
        encoder = presets.xlnet_encoder(**sizes, intermediate_size=40)
    else:
        builder = presets.albert_encoder if family == "albert" else presets.electra_encoder
        encoder = builder(**sizes, embedding_size=16, intermediate_size=40, max_positions=32)
    num_labels = {"classification": 3, "tagging": 4}.get(kind, 2)
    model = build_task_model(encoder, kind, num_labels, pool=pool)  # type: ignore[arg-type]
    with torch.no_grad():
        for parameter in model.head.parameters():
            parameter.normal_(std=0.1)
    export_hf_task_model(model, tmp_path)
    theirs, info = AUTO[kind].from_pretrained(tmp_path, output_loading_info=True)
    assert type(theirs) is hf_class(family, kind)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    batch = make_batch(family, kind, seed=3)
    assert_close(ptm_logits(model, batch), hf_logits(theirs.eval(), kind, batch))


def test_a_head_no_class_holds_is_refused_with_the_reason() -> None:
    from ptm_core.encoders import presets
    from ptm_core.finetune.model import build_task_model

    encoder = presets.electra_encoder(
        vocab_size=VOCAB, embedding_size=16, hidden_size=24, num_layers=1, num_heads=3
    )
    model = build_task_model(encoder, "classification", 2)  # BERT's tanh head
    with pytest.raises(CheckpointError, match=r"ElectraForSequenceClassification has dropout"):
        export_hf_task_model(model, "unused")
