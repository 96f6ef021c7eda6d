"""Prompt tuning (Lester et al., 2021) and prefix tuning (Li & Liang, 2021) on an
encoder-decoder (BART/T5 layouts; MASS is BART's).

What is checked: the virtual tokens reach every real position of encoder and decoder and
padding stays hidden; cached generation equals uncached generation (greedy and beam, token
for token; cached step logits equal teacher-forced ones, so the prefix is there exactly once
at every step); BART's classifier still reads the decoder at the source's last end token;
the backbone stays bit-frozen through fine-tuning steps; final/ saves and reloads the
adapter; export refuses in one line. Golden tests: prompt tuning equals peft's
PROMPT_TUNING on transformers' BART and T5 (forward and after AdamW steps); prefix tuning
equals Li & Liang's construction (their ``seq2seq`` code's ``prev_key`` / ``prev_value`` /
``prev_key_padding_mask`` in all three attentions of their BART), transcribed below in
plain torch on transformers' BART weights (peft's seq2seq prefix tuning differs from the
paper: it leaves the encoder out and, in transformers 5, replaces the cross-attention
keys by the prefix, see huggingface/peft#2989).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from peft_checks import (
    assert_only_adapter_and_head_trained,
    assert_resume_is_bit_identical,
    spy_on_attach,
)
from safetensors.torch import load_file
from test_peft_seq2seq import bases, run, tiny, tokenizer  # noqa: F401 (fixture)
from test_peft_seq2seq_parity import VOCAB, eos_rows, randomise
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    T5Config,
    T5ForConditionalGeneration,
)

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import export_hf
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.recipe import load_finetuned, predict
from ptm_core.finetune.seq2seq import Seq2SeqClassifier, shift_right
from ptm_core.finetune.text_to_text import TextToTextModel
from ptm_core.peft import PeftConfig, PrefixAttention, attach_peft
from ptm_core.peft.attach import is_adapter_tensor
from ptm_core.peft.seq2seq_prompts import PrefixCrossAttention, SoftPromptSeq2Seq

P = 3
VIRTUAL = ("prompt", "prefix_key", "prefix_value")


def sharp(layout: str, method: str, seed: int = 0) -> Seq2SeqClassifier:
    """A tiny classifier with perturbed weights (so outputs depend on every tensor)."""
    classifier = Seq2SeqClassifier(tiny(layout), "classification", 3, dropout=0.0)
    randomise(classifier.model, seed)
    torch.manual_seed(seed)
    return attach_peft(classifier, PeftConfig(method=method, num_virtual_tokens=P)).eval()  # type: ignore[return-value]


def source(padding: int = 0) -> dict[str, torch.Tensor]:
    vocab = tokenizer().vocab_info
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(10, 300, (2, 7), generator=g)
    ids[:, 0] = vocab.cls_id
    ids[0, 6] = ids[1, 4] = vocab.sep_id
    ids[1, 5:] = vocab.pad_id
    ids = torch.cat([ids, torch.full((2, padding), vocab.pad_id)], dim=1)
    return {"input_ids": ids, "attention_mask": (ids != vocab.pad_id).long()}


def decoder_states(classifier: Seq2SeqClassifier, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The decoder's states ``(B, L, D)`` the classifier pools from."""
    model: Any = classifier.model
    ids, mask = batch["input_ids"], batch["attention_mask"]
    memory = model.encode(ids, mask).last_hidden_state
    decoder_ids = shift_right(ids, model.config.decoder_start_token_id, model.config.pad_token_id)
    return model.decode(decoder_ids, memory, mask)[0]


def perturb(module: torch.nn.Module, suffix: str) -> None:
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith(suffix) or (suffix == "*" and name.endswith(VIRTUAL)):
                param.add_(torch.randn(param.shape, generator=g))


@pytest.mark.parametrize("layout", ["bart", "t5"])
@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_padding_stays_hidden(layout: str, method: str) -> None:
    classifier = sharp(layout, method)
    with torch.no_grad():
        short = classifier(source(0)).logits
        padded = classifier(source(5)).logits
        states = decoder_states(classifier, source(0))
        padded_states = decoder_states(classifier, source(5))
    torch.testing.assert_close(padded, short, atol=1e-5, rtol=1e-5)
    # Row 1 ends at 5: its real decoder positions read neither the source nor the prompt's padding.
    torch.testing.assert_close(padded_states[:, :5], states[:, :5], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["bart", "t5"])
@pytest.mark.parametrize(
    ("method", "part"),
    [
        ("prompt", "prompt"),
        ("prefix", "encoder"),  # encoder self-attention's prefix alone
        ("prefix", "self_attention"),  # decoder self-attention's
        ("prefix", "cross_attention"),  # decoder cross-attention's
    ],
)
def test_every_real_position_reads_the_virtual_tokens(layout: str, method: str, part: str) -> None:
    classifier = sharp(layout, method)
    batch = source(2)
    model: Any = classifier.model
    with torch.no_grad():
        memory = model.encode(batch["input_ids"], batch["attention_mask"]).last_hidden_state
        states = decoder_states(classifier, batch)
        if part == "encoder":
            perturb(model.encoder, "*")
        elif part == "prompt":
            perturb(model, "prompt")
        else:
            for layer in model.decoder.layers:
                perturb(getattr(layer, part), "*")
        memory_after = model.encode(batch["input_ids"], batch["attention_mask"]).last_hidden_state
        states_after = decoder_states(classifier, batch)
    real = batch["attention_mask"].bool()  # (B, S)
    shift = P if method == "prompt" else 0  # the prompt's states lead the memory
    moved = (memory_after - memory).abs().amax(-1)[:, shift:]  # (B, S)
    if part in ("prompt", "encoder"):
        assert bool((moved[real] > 0).all())  # every real source position reads them
    else:
        assert bool((moved == 0).all())  # a decoder prefix leaves the encoder alone
    # Every decoder position (the first included: it sees only the start token) reads them.
    assert bool(((states_after - states).abs().amax(-1) > 0).all())


def test_the_wrappers_sit_in_all_three_attentions_and_in_place_of_the_model() -> None:
    prefixed = sharp("bart", "prefix")
    assert all(isinstance(layer.attention.attention, torch.nn.Module) and
               isinstance(layer.attention, PrefixAttention)
               for layer in prefixed.model.encoder.layers)  # fmt: skip
    for layer in prefixed.model.decoder.layers:
        assert isinstance(layer.self_attention, PrefixAttention)
        assert isinstance(layer.cross_attention, PrefixCrossAttention)
    prompted = sharp("t5", "prompt")
    assert isinstance(prompted.model, SoftPromptSeq2Seq)
    memory = prompted.model.encode(**source()).last_hidden_state
    assert memory.shape[1] == P + source()["input_ids"].shape[1]  # the prompt's states stay


@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_the_classifier_reads_the_last_end_token_of_the_source(method: str) -> None:
    classifier = sharp("bart", method)
    batch = source(3)
    seen: dict[str, torch.Tensor] = {}
    classifier.head.register_forward_hook(lambda m, args, out: seen.update(pooled=args[0]))
    with torch.no_grad():
        classifier(batch)
        states = decoder_states(classifier, batch)
    ends = [6, 4]  # each row's last end token: positions of the source, not moved by P
    torch.testing.assert_close(seen["pooled"], states[torch.arange(2), ends])


@pytest.mark.parametrize("layout", ["bart", "t5"])
@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_cached_generation_equals_uncached(layout: str, method: str) -> None:
    model: Any = sharp(layout, method, seed=3).model
    batch = source(2)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    # Cached steps give the teacher-forced logits: the prefix is in front exactly once.
    target = torch.randint(10, 300, (2, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        memory = model.encode(ids, mask).last_hidden_state
        _, full = model.decode(target, memory, mask)
        cache = model.init_decoder_cache(memory, mask)
        steps = []
        for t in range(target.shape[1]):
            logits, cache = model.decode_step(target[:, t : t + 1], cache)
            steps.append(logits)
    assert cache.layers[0].self_key.shape[2] == target.shape[1]  # the cache holds no prefix
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    for beams in (1, 3):
        cached = model.generate(ids, mask, max_length=8, num_beams=beams, use_cache=True)
        plain = model.generate(ids, mask, max_length=8, num_beams=beams, use_cache=False)
        assert cached == plain


# --------------------------------------------------------------------------- fine-tuning


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "method", "text_to_text"),
    [("bart", "prompt", False), ("bart", "prefix", False), ("t5", "prompt", True),
     ("t5", "prefix", True)],
)  # fmt: skip
def test_fine_tune_keeps_the_backbone_frozen_saves_and_reloads(
    bases: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    method: str,
    text_to_text: bool,
) -> None:
    import ptm_core.finetune.seq2seq_recipe as recipe

    seen = spy_on_attach(monkeypatch, recipe, "attach_peft")
    base = bases[layout]
    result = run(base, tmp_path / "run", method, text_to_text=text_to_text)
    after = {k: v.detach() for k, v in seen["model"].state_dict().items()}
    if text_to_text:  # no head: the LM head stays frozen with the rest
        adapter = [k for k in after if is_adapter_tensor(k)]
        assert all(torch.equal(after[k], seen["before"][k]) for k in after if k not in adapter)
        assert any(not torch.equal(after[k], seen["before"][k]) for k in adapter)
    else:
        adapter = assert_only_adapter_and_head_trained(seen["before"], after)
    assert {k.rsplit(".", 1)[-1] for k in adapter} == (
        {"prompt"} if method == "prompt" else {"prefix_key", "prefix_value"}
    )
    final = result.encoder_dir
    names = {p.name for p in final.iterdir()}
    assert "model.safetensors" not in names and "adapter.safetensors" in names
    stored = load_file(str(final / "adapter.safetensors"))
    if method == "prefix":  # 2 encoder layers, 1 decoder layer with self and cross
        layers = {k.rsplit(".", 1)[0] for k in stored}
        assert layers == {"encoder.layers.0.attention", "encoder.layers.1.attention",
                          "decoder.layers.0.self_attention", "decoder.layers.0.cross_attention"}  # fmt: skip
    else:
        assert set(stored) == {"prompt"} and stored["prompt"].shape == (20, 32)
    record = json.loads((final / "task.json").read_text())
    assert record["peft"] == {**record["peft"], "method": method, "num_virtual_tokens": 20}
    model, *_ = load_finetuned(final)
    assert isinstance(model, TextToTextModel if text_to_text else Seq2SeqClassifier)
    reloaded = model.state_dict()
    assert reloaded.keys() == after.keys()
    assert all(torch.equal(reloaded[k], after[k]) for k in after)
    metrics, _ = predict(final)
    assert metrics["accuracy"] == pytest.approx(result.final_metrics["dev/accuracy"])
    from ptm_core.evaluation.kinds import score_finetuned

    assert score_finetuned(str(final), None)["accuracy"] == pytest.approx(metrics["accuracy"])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_crash_and_resume_is_bit_identical(
    bases: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    assert_resume_is_bit_identical(
        monkeypatch,
        Seq2SeqClassifier,
        lambda name: run(bases["bart"], tmp_path / name, method, steps=8, save_every=4),
    )


@pytest.mark.slow
@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_export_is_refused_in_one_line(
    bases: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    method: str,
) -> None:
    final = run(bases["bart"], tmp_path / "run", method, steps=1).encoder_dir
    with pytest.raises(CheckpointError, match=rf"finetune.peft={method} model has no Hugging Face"):
        export_hf(final, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_prompt_refuses_sources_longer_than_the_positions_left() -> None:
    classifier = sharp("bart", "prompt")  # max_positions 64, P = 3
    ids = torch.full((1, 62), 20)
    with pytest.raises(ValueError, match=r"lower task\.max_length to 61"):
        classifier.model.encode(ids)


# --------------------------------------------------------------------------- golden tests

BART = dict(
    vocab_size=VOCAB, d_model=36, encoder_layers=2, decoder_layers=3,
    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=53,
    decoder_ffn_dim=53, max_position_embeddings=40, dropout=0.0, attention_dropout=0.0,
    activation_dropout=0.0, scale_embedding=True,
)  # fmt: skip


def t5_config() -> T5Config:
    return T5Config(
        vocab_size=VOCAB, d_model=36, d_kv=9, num_heads=4, d_ff=53, num_layers=2,
        num_decoder_layers=3, dropout_rate=0.0, feed_forward_proj="gated-gelu",
        relative_attention_num_buckets=8, relative_attention_max_distance=20,
        decoder_start_token_id=0, tie_word_embeddings=False,
    )  # fmt: skip


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_prompt_tuning_matches_peft_prompt_tuning(tmp_path: Path, family: str) -> None:
    """peft's PROMPT_TUNING with one transformer submodule is Lester et al.'s: the prompt
    before the encoder's input vectors only (peft's default for seq2seq also prompts the
    decoder)."""
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    hf = (
        BartForConditionalGeneration(BartConfig(**BART))  # type: ignore[arg-type]
        if family == "bart"
        else T5ForConditionalGeneration(t5_config())
    ).eval()
    randomise(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = SoftPromptSeq2Seq(EncoderDecoderModel.from_pretrained(tmp_path / "hf").eval(), P)
    ours.requires_grad_(False)
    ours.prompt.requires_grad_(True)
    theirs = peft.get_peft_model(
        hf,
        peft.PromptTuningConfig(
            task_type="SEQ_2_SEQ_LM", num_virtual_tokens=P, num_transformer_submodules=1
        ),
    ).eval()
    table = theirs.prompt_encoder["default"].embedding.weight
    with torch.no_grad():
        table.normal_(0.0, 1.0)
        ours.prompt.copy_(table)
    eos, pad = (hf.config.eos_token_id, hf.config.pad_token_id)
    decoder = torch.randint(3, VOCAB, (3, 5), generator=torch.Generator().manual_seed(3))

    def both(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        mine = ours(batch["input_ids"], decoder, attention_mask=batch["attention_mask"]).logits
        other = theirs(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder,
        ).logits  # fmt: skip
        return mine, other

    data = eos_rows(0, eos, pad)
    with torch.no_grad():
        mine, other = both(data)
        plain = hf(input_ids=data["input_ids"], attention_mask=data["attention_mask"],
                   decoder_input_ids=decoder).logits  # fmt: skip
    scale = max(1.0, float(other.abs().max()))  # T5's unscaled logits: relative float32 bound
    assert (other - plain).abs().max() > 1e-2  # the prompt reaches transformers' model
    assert (mine - other).abs().max() < 1e-6 * scale + 1e-6
    optimizers = [torch.optim.AdamW([p], lr=1e-2) for p in (ours.prompt, table)]
    for step in range(4):
        batch = eos_rows(100 + step, eos, pad)
        mine, other = both(batch)
        target = torch.randint(3, VOCAB, (3, 5), generator=torch.Generator().manual_seed(step))
        losses = [F.cross_entropy(x.flatten(0, 1), target.flatten()) for x in (mine, other)]
        for optimizer, loss in zip(optimizers, losses, strict=True):
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        mine, other = both(data)
    assert (mine - other).abs().max() < 1e-5 * scale
    assert not torch.equal(ours.prompt, table.new_zeros(table.shape))


def li_liang_attention(
    x: torch.Tensor,
    keys_from: torch.Tensor,
    weights: dict[str, torch.Tensor],
    prefix: tuple[torch.Tensor, torch.Tensor],
    padding: torch.Tensor | None,
    causal: bool,
    heads: int,
) -> torch.Tensor:
    """``Attention.forward`` of Li & Liang's BART (PrefixTuning, transformers/src/
    transformers/modeling_bart.py) with a ``layer_state`` prefix: ``q = q_proj(x) * d^-0.5``;
    ``k = cat([prev_key, k_proj(keys_from)])`` (likewise ``v``); key padding
    ``cat([prev_key_padding_mask = zeros(P), padding])``; the decoder's causal mask widened
    by ``P`` zero columns in front (``torch.cat([temp_mask, causal_mask], dim=1)``)."""
    batch, length, width = x.shape
    size = width // heads

    def split(t: torch.Tensor) -> torch.Tensor:  # (B, L, D) -> (B, h, L, d)
        return t.view(batch, -1, heads, size).transpose(1, 2)

    def linear(name: str, t: torch.Tensor) -> torch.Tensor:
        return F.linear(t, weights[f"{name}.weight"], weights[f"{name}.bias"])

    q = split(linear("q_proj", x) * size**-0.5)
    k = torch.cat([prefix[0], split(linear("k_proj", keys_from))], dim=2)
    v = torch.cat([prefix[1], split(linear("v_proj", keys_from))], dim=2)
    count = prefix[0].shape[2]
    scores = q @ k.transpose(-1, -2)  # (B, h, L, P + S)
    if causal:
        mask = torch.triu(torch.full((length, length), float("-inf")), 1)
        scores = scores + torch.cat([torch.zeros(length, count), mask], dim=1)
    if padding is not None:
        hidden = torch.cat([torch.zeros(batch, count, dtype=torch.bool), ~padding.bool()], 1)
        scores = scores.masked_fill(hidden[:, None, None, :], float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, width)
    return linear("out_proj", out)


def li_liang_bart(
    hf: dict[str, torch.Tensor],
    ids: torch.Tensor,
    mask: torch.Tensor,
    decoder_ids: torch.Tensor,
    prefixes: dict[str, list[tuple[torch.Tensor, torch.Tensor]]],
    config: dict[str, Any],
) -> torch.Tensor:
    """BART (post-LN, learned positions from row 2, GELU) with the reference code's three
    prefixes (``encoder``, ``self``, ``encoder_decoder``), on transformers' tensor names."""
    heads, width = config["encoder_attention_heads"], config["d_model"]

    def norm(name: str, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (width,), hf[f"{name}.weight"], hf[f"{name}.bias"])

    def ffn(name: str, x: torch.Tensor) -> torch.Tensor:
        inner = F.gelu(F.linear(x, hf[f"{name}.fc1.weight"], hf[f"{name}.fc1.bias"]))
        return F.linear(inner, hf[f"{name}.fc2.weight"], hf[f"{name}.fc2.bias"])

    def part(prefix: str) -> dict[str, torch.Tensor]:
        return {k[len(prefix) + 1 :]: v for k, v in hf.items() if k.startswith(prefix + ".")}

    def embed(side: str, tokens: torch.Tensor) -> torch.Tensor:
        positions = hf[f"model.{side}.embed_positions.weight"][2 : 2 + tokens.shape[1]]
        x = hf["model.shared.weight"][tokens] * width**0.5 + positions
        return norm(f"model.{side}.layernorm_embedding", x)

    x = embed("encoder", ids)
    for i in range(config["encoder_layers"]):
        name = f"model.encoder.layers.{i}"
        attended = li_liang_attention(x, x, part(f"{name}.self_attn"), prefixes["encoder"][i],
                                      mask, False, heads)  # fmt: skip
        x = norm(f"{name}.self_attn_layer_norm", x + attended)
        x = norm(f"{name}.final_layer_norm", x + ffn(name, x))
    memory = x
    y = embed("decoder", decoder_ids)
    for i in range(config["decoder_layers"]):
        name = f"model.decoder.layers.{i}"
        attended = li_liang_attention(y, y, part(f"{name}.self_attn"), prefixes["self"][i],
                                      None, True, heads)  # fmt: skip
        y = norm(f"{name}.self_attn_layer_norm", y + attended)
        crossed = li_liang_attention(y, memory, part(f"{name}.encoder_attn"),
                                     prefixes["encoder_decoder"][i], mask, False, heads)  # fmt: skip
        y = norm(f"{name}.encoder_attn_layer_norm", y + crossed)
        y = norm(f"{name}.final_layer_norm", y + ffn(name, y))
    return F.linear(y, hf["model.shared.weight"]) + hf["final_logits_bias"]


def test_prefix_tuning_matches_li_and_liang_on_bart(tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf = BartForConditionalGeneration(BartConfig(**BART)).eval()  # type: ignore[arg-type]
    randomise(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = EncoderDecoderModel.from_pretrained(tmp_path / "hf").eval()
    classifier = Seq2SeqClassifier(ours, "classification", 2)
    attach_peft(classifier, PeftConfig(method="prefix", num_virtual_tokens=P))
    heads, size = (
        BART["encoder_attention_heads"],
        BART["d_model"] // BART["encoder_attention_heads"],
    )
    g = torch.Generator().manual_seed(9)
    prefixes: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    places = {
        "encoder": [layer.attention for layer in ours.encoder.layers],
        "self": [layer.self_attention for layer in ours.decoder.layers],
        "encoder_decoder": [layer.cross_attention for layer in ours.decoder.layers],
    }
    for key, modules in places.items():
        prefixes[key] = []
        for module in modules:
            pair = []
            for name in ("prefix_key", "prefix_value"):
                value = torch.randn(P, heads * size, generator=g)
                with torch.no_grad():
                    getattr(module, name).copy_(value)
                # The reference's layout: (B, h, P, d) from (B, P, layers * 2, h, d).
                pair.append(value.view(P, heads, size).transpose(0, 1).expand(3, -1, -1, -1))
            prefixes[key].append((pair[0], pair[1]))
    data = eos_rows(0, hf.config.eos_token_id, hf.config.pad_token_id)
    decoder = torch.randint(3, VOCAB, (3, 6), generator=torch.Generator().manual_seed(3))
    state = {k: v.detach() for k, v in hf.state_dict().items()}
    with torch.no_grad():
        expected = li_liang_bart(state, data["input_ids"], data["attention_mask"], decoder,
                                 prefixes, BART)  # fmt: skip
        got = ours(data["input_ids"], decoder, attention_mask=data["attention_mask"]).logits
        plain = hf(input_ids=data["input_ids"], attention_mask=data["attention_mask"],
                   decoder_input_ids=decoder).logits  # fmt: skip
        # Without prefixes the reference is transformers' BART (the transcription is right).
        empty = [(torch.zeros(3, heads, 0, size),) * 2] * 3
        bare = li_liang_bart(state, data["input_ids"], data["attention_mask"], decoder,
                             dict.fromkeys(places, empty), BART)  # fmt: skip
    assert (bare - plain).abs().max() < 1e-5
    assert (expected - plain).abs().max() > 1e-2  # the prefixes matter
    assert (got - expected).abs().max() < 1e-5


@pytest.mark.parametrize("method", ["prompt", "prefix"])
def test_layer_wise_rates_place_the_virtual_tokens(method: str) -> None:
    """trainer.layer_lr_decay: a prompt is input (the embeddings' depth, lowest rate); a
    prefix takes its layer's depth."""
    from ptm_core.training import TrainerConfig
    from ptm_core.training.optim import build_optimizer

    classifier = sharp("bart", method)  # 2 encoder layers, 1 decoder layer: top depth 4
    config = TrainerConfig(output_dir="unused", learning_rate=1.0, device="cpu",
                           layer_lr_decay=0.5)  # fmt: skip
    optimizer = build_optimizer(classifier, config)
    rate = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    named = dict(classifier.named_parameters())
    if method == "prompt":
        assert rate[id(named["model.prompt"])] == pytest.approx(0.5**4)
    else:
        assert rate[id(named["model.encoder.layers.0.attention.prefix_key"])] == pytest.approx(
            0.5**3
        )
        cross = named["model.decoder.layers.0.cross_attention.prefix_value"]
        assert rate[id(cross)] == pytest.approx(0.5)
    assert rate[id(named["head.dense.weight"])] == 1.0
