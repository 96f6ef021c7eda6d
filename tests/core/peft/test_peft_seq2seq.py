"""LoRA and IA3 on an encoder-decoder (BART/T5 layouts; MASS is BART's): what trains, what
final/ holds, loading it back (base + adapter + head), and a crash/resume that stays
bit-identical; ``ptm export --format hf`` of an adapter run, merged into the weights or as a
peft adapter folder that ``PeftModel.from_pretrained`` loads onto the exported base, gives
ptm's logits. Prompts and prefixes on an encoder-decoder:
tests/core/peft/test_peft_seq2seq_prompts.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import export_hf
from ptm_core.encoders import build_encoder_decoder
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.recipe import finetune, load_finetuned, predict
from ptm_core.finetune.seq2seq import Seq2SeqClassifier
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.finetune.text_to_text import TextToTextModel
from ptm_core.peft import PeftConfig, attach_peft, count_trainable
from ptm_core.peft.library import merge_adapters
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.metrics import MetricsLog

peft = pytest.importorskip("peft")
REPO = Path(__file__).resolve().parents[3]
VOCAB = REPO / "data_specs/text_corpus/sample-vocab.txt"
PLACES = ["cambridge", "london", "oxford", "paris", "warsaw", "france"]
T5_LAYOUT: dict[str, Any] = dict(
    position_encoding="t5_buckets", norm_type="rmsnorm", norm_position="pre",
    layer_norm_eps=1e-6, position_offset=0, bias=False, attention_scale=False,
    embedding_layer_norm=False, scale_decoder_output=True, initialization="t5",
    activation="relu", gated_feed_forward=True,
)  # fmt: skip


def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)


def tiny(layout: str) -> EncoderDecoderModel:
    vocab = tokenizer().vocab_info
    torch.manual_seed(0)
    return build_encoder_decoder(
        tokenizer().vocab_size, hidden_size=32, encoder_layers=2, decoder_layers=1,
        num_heads=2, intermediate_size=48, max_positions=64, dropout=0.0,
        pad_token_id=vocab.pad_id, bos_token_id=vocab.cls_id, eos_token_id=vocab.sep_id,
        decoder_start_token_id=vocab.cls_id, **(T5_LAYOUT if layout == "t5" else {}),
    )  # fmt: skip


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """'Pre-trained' BART- and T5-layout folders with their tokenizer."""
    folders = {}
    for layout in ("bart", "t5"):
        path = tmp_path_factory.mktemp(layout) / "final"
        tiny(layout).save_pretrained(path)
        tokenizer().save(path)
        folders[layout] = path
    return folders


def task(tmp_path: Path) -> TaskSpec:
    rows = ["sentence\tlabel"]
    for person in ("alan turing", "marie curie"):
        for i, place in enumerate(PLACES):
            rows.append(f"{person} worked at {place} .\t{'positive' if i % 2 else 'negative'}")
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return TaskSpec.from_mapping(
        {"name": "places", "kind": "classification", "format": "glue", "train": str(path),
         "dev": str(path), "text_fields": None, "label_field": "label", "max_length": 16,
         "batch_size": 4, "eval_batch_size": 5, "metric": "accuracy"}
    )  # fmt: skip


def run(base: Path, out: Path, method: str, *, text_to_text: bool = False, steps: int = 6,
        **trainer: Any):  # fmt: skip
    config = TrainerConfig(
        output_dir=str(out), max_steps=steps, progress=False, device="cpu", seed=2,
        log_every=1, learning_rate=5e-3, precision="fp32", **trainer,
    )  # fmt: skip
    return finetune(
        task(out.parent),
        encoder=EncoderDecoderModel.from_pretrained(base),
        tokenizer=WordPieceTokenizer.from_directory(base),
        trainer=config,
        seed=2,
        text_to_text=text_to_text,
        peft=PeftConfig(method=method, r=4),
        base=base,
    )


def test_lora_wraps_encoder_and_decoder_self_and_cross_attention_and_feed_forward() -> None:
    classifier = Seq2SeqClassifier(tiny("bart"), "classification", 2)
    attach_peft(classifier, PeftConfig(method="lora", r=4))
    adapted = {
        name.split(".lora_A")[0] for name, _ in classifier.named_parameters() if ".lora_A." in name
    }
    expected = set()
    for stack, count in (("encoder", 2), ("decoder", 1)):
        attention = "attention" if stack == "encoder" else "self_attention"
        for i in range(count):
            layer = f"model.{stack}.layers.{i}"
            expected |= {f"{layer}.{attention}.qkv_proj.{p}" for p in ("query", "key", "value")}
            expected |= {f"{layer}.{attention}.out_proj", f"{layer}.feed_forward.w_in"}
            expected.add(f"{layer}.feed_forward.w_out")
    cross = "model.decoder.layers.0.cross_attention"
    expected |= {f"{cross}.q_proj.query", f"{cross}.kv_proj.key", f"{cross}.kv_proj.value"}
    expected.add(f"{cross}.out_proj")
    assert adapted == expected
    trainable = {n for n, p in classifier.named_parameters() if p.requires_grad}
    assert trainable == {n for n in trainable if ".lora_" in n or n.startswith("head.")}
    assert any(n.startswith("head.") for n in trainable)
    # IA3 scales the keys and values of every attention and the feed-forward's inner units.
    t2t = TextToTextModel(tiny("t5"), tokenizer(), ["negative", "positive"])
    attach_peft(t2t, PeftConfig(method="ia3"))
    scaled = {n.split(".ia3_l")[0].split("model.", 1)[1] for n, p in t2t.named_parameters()
              if p.requires_grad}  # fmt: skip
    assert "decoder.layers.0.cross_attention.kv_proj.key" in scaled
    assert "decoder.layers.0.feed_forward.w_out" in scaled
    assert not any(n.endswith("query") for n in scaled)
    assert count_trainable(t2t).share < 0.05  # the LM head stays frozen


@pytest.mark.parametrize(
    ("layout", "method", "text_to_text"),
    [("bart", "lora", False), ("bart", "ia3", False), ("t5", "lora", True), ("t5", "ia3", False)],
)
def test_final_holds_adapter_and_loads_back(
    bases: dict[str, Path], tmp_path: Path, layout: str, method: str, text_to_text: bool
) -> None:
    base = bases[layout]
    result = run(base, tmp_path / "run", method, text_to_text=text_to_text)
    final = result.encoder_dir
    names = {p.name for p in final.iterdir()}
    assert {"adapter.safetensors", "task.json", "config.json"} <= names
    assert "model.safetensors" not in names  # the base is not copied
    assert ("task_head.safetensors" in names) != text_to_text
    record = json.loads((final / "task.json").read_text())
    assert record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(base.resolve())
    assert record["seq2seq"] == ("text_to_text" if text_to_text else "classification_head")
    assert 0 < result.final_metrics["parameters/trainable_share"] < 0.2
    adapter = load_file(str(final / "adapter.safetensors"))
    assert any("cross_attention" in k for k in adapter)
    assert all(".lora_" in k or ".ia3_" in k for k in adapter)
    metrics, _ = predict(final)
    assert metrics["accuracy"] == pytest.approx(result.final_metrics["dev/accuracy"])
    # `ptm evaluate` picks the fine-tuned evaluation for it and scores the same.
    from flows.evaluation import model_family
    from ptm_core.evaluation.kinds import score_finetuned

    assert model_family(final) == "finetuned"
    assert score_finetuned(str(final), None)["accuracy"] == pytest.approx(metrics["accuracy"])
    model, *_ = load_finetuned(final)
    assert isinstance(model, TextToTextModel if text_to_text else Seq2SeqClassifier)
    # The frozen weights are the base folder's, untouched by training.
    base_state = EncoderDecoderModel.from_pretrained(base).state_dict()
    loaded = model.model.state_dict()
    for name in ("encoder.embeddings.word.weight", "decoder.layers.0.feed_forward.w_out.weight"):
        frozen = name if name in loaded else name.replace("w_out.", "w_out.base_layer.")
        assert torch.equal(loaded[frozen], base_state[name]), name


@pytest.mark.parametrize("text_to_text", [False, True], ids=["head", "text_to_text"])
def test_crash_and_resume_is_bit_identical(
    bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text_to_text: bool
) -> None:
    base = bases["t5" if text_to_text else "bart"]
    straight = run(base, tmp_path / "straight", "lora", text_to_text=text_to_text, steps=8,
                   save_every=4)  # fmt: skip
    network = TextToTextModel if text_to_text else Seq2SeqClassifier
    forward = network.forward
    calls = {"n": 0}

    def crashing(self: Any, batch: dict[str, torch.Tensor]) -> Any:
        calls["n"] += 1
        if calls["n"] == 7:  # during step 7, after the step-4 checkpoint
            raise RuntimeError("killed")
        return forward(self, batch)

    monkeypatch.setattr(network, "forward", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run(base, tmp_path / "killed", "lora", text_to_text=text_to_text, steps=8, save_every=4)
    monkeypatch.setattr(network, "forward", forward)
    resumed = run(base, tmp_path / "killed", "lora", text_to_text=text_to_text, steps=8,
                  save_every=4)  # fmt: skip
    names = ["adapter.safetensors"] + ([] if text_to_text else ["task_head.safetensors"])
    for name in names:
        ours = load_file(str(resumed.encoder_dir / name))
        theirs = load_file(str(straight.encoder_dir / name))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    losses = [r["loss"] for r in MetricsLog(resumed.metrics_path).read()]
    assert losses == [r["loss"] for r in MetricsLog(straight.metrics_path).read()]
    assert len(losses) == 8


# --------------------------------------------------------------------------- export


def sharpen(final: Path) -> None:
    """A few steps move an adapter (and a head initialised at std 0.02) little; make them
    matter, so a wrong name or layout shows in logits of order 1."""
    g = torch.Generator().manual_seed(7)
    for name in ("adapter.safetensors", "task_head.safetensors"):
        path = final / name
        if path.exists():
            state = load_file(str(path))
            noisy = {k: v + 0.3 * torch.randn(v.shape, generator=g) for k, v in state.items()}
            save_file(noisy, str(path))


@pytest.mark.parametrize(
    ("layout", "method", "text_to_text"),
    [("bart", "lora", False), ("bart", "ia3", False), ("t5", "lora", True)],
)
def test_export_merged_and_as_peft_adapter_gives_ptm_logits(
    bases: dict[str, Path], tmp_path: Path, layout: str, method: str, text_to_text: bool
) -> None:
    import transformers

    final = run(bases[layout], tmp_path / "run", method, text_to_text=text_to_text,
                steps=3).encoder_dir  # fmt: skip
    sharpen(final)
    model, tokenizer, *_ = load_finetuned(final)
    ids = torch.tensor([tokenizer.encode("alan turing worked at paris .").input_ids])
    decoder = ids[:, :4]

    def logits(network: torch.nn.Module) -> torch.Tensor:
        with torch.no_grad():
            if text_to_text:
                return network(input_ids=ids, decoder_input_ids=decoder).logits
            return network(input_ids=ids).logits

    with torch.no_grad():
        ours = (
            model.model(ids, decoder).logits if text_to_text else model({"input_ids": ids}).logits
        )
    auto = (transformers.AutoModelForSeq2SeqLM if text_to_text
            else transformers.AutoModelForSequenceClassification)  # fmt: skip
    export_hf(final, tmp_path / "merged")
    merged = auto.from_pretrained(tmp_path / "merged").eval()
    # Merging rounds W + s B A once: compare with ptm's own merge (the sharpened T5 adapter
    # moves the unmerged logits by 1e-4 through that rounding alone).
    merge_adapters(model.model)
    with torch.no_grad():
        merged_ours = (model.model(ids, decoder).logits if text_to_text
                       else model({"input_ids": ids}).logits)  # fmt: skip
    assert (logits(merged) - merged_ours).abs().max() < 1e-5
    assert (merged_ours - ours).abs().max() < 1e-4 * max(1.0, float(ours.abs().max()))
    export_hf(final, tmp_path / "adapted", peft_adapter=True)
    base = auto.from_pretrained(tmp_path / "adapted").eval()
    plain = logits(base)
    adapted = peft.PeftModel.from_pretrained(base, str(tmp_path / "adapted" / "adapter")).eval()
    assert (logits(adapted) - ours).abs().max() < 1e-5
    assert (plain - ours).abs().max() > 1e-3  # the adapter makes the difference (100x 1e-5)
    config = json.loads((tmp_path / "adapted" / "adapter" / "adapter_config.json").read_text())
    assert any("encoder_attn" in m or "EncDecAttention" in m for m in config["target_modules"])


def test_a_t5_classification_head_has_no_export(bases: dict[str, Path], tmp_path: Path) -> None:
    final = run(bases["t5"], tmp_path / "run", "lora", steps=1).encoder_dir
    with pytest.raises(CheckpointError, match=r"no T5ForSequenceClassification.*text_to_text=true"):
        export_hf(final, tmp_path / "out")
