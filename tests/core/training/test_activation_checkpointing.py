"""Activation checkpointing: same gradients (dropout on), fewer saved activations."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch
from torch import nn

from ptm_core import bert_encoder
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_core.training import Trainer
from ptm_core.training.memory import enable_activation_checkpointing

VOCAB = VocabInfo(vocab_size=300, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _model(**encoder_kwargs) -> PretrainingModel:
    torch.manual_seed(0)
    settings = dict(vocab_size=300, hidden_size=32, num_layers=3, num_heads=2, dropout=0.1)
    settings.update(encoder_kwargs)
    encoder = bert_encoder(**settings)
    mlm = build_objective(functools.partial(MaskedLMObjective, mode="dynamic"), encoder, VOCAB)
    return PretrainingModel(encoder, ObjectiveMix({"mlm": mlm}))


def _batch(model: PretrainingModel) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    examples = []
    for length in (20, 14, 9, 20):
        ids = torch.randint(5, 300, (length,), generator=gen).tolist()
        examples.append(
            {"input_ids": [2, *ids, 3], "special_tokens_mask": [1] + [0] * length + [1]}
        )
    from ptm_core.data import PretrainingBatches

    source = PretrainingBatches(examples, 4, pad_id=0, transform=model.objectives.collate)
    return next(iter(source.iter_batches(0)))


def _saved_bytes(run: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, int]:
    """The loss and the bytes autograd keeps for backward (distinct storages)."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run()
    return loss, sum(storages.values())


def _loss_grads_and_memory(model: nn.Module, batch) -> tuple[float, dict, int]:
    model.train()
    torch.manual_seed(123)  # the dropout masks
    loss, saved = _saved_bytes(lambda: model(batch).loss)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return loss.item(), grads, saved


def test_checkpointed_layers_give_the_same_gradients_with_less_saved_memory() -> None:
    plain = _model()
    batch = _batch(plain)
    checkpointed = _model()
    names = enable_activation_checkpointing(checkpointed)
    assert names == ["encoder.layers.0", "encoder.layers.1", "encoder.layers.2"]
    loss_a, grads_a, saved_a = _loss_grads_and_memory(plain, batch)
    rng_after_plain = torch.get_rng_state()
    loss_b, grads_b, saved_b = _loss_grads_and_memory(checkpointed, batch)
    # Recomputation restores the RNG it used: the stream after backward is the plain one's.
    assert torch.equal(torch.get_rng_state(), rng_after_plain)
    assert loss_a == loss_b
    assert grads_a.keys() == grads_b.keys() and len(grads_a) > 10
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, rtol=0, atol=1e-6, msg=name)
    # Three layers keep only their inputs: under half of what the plain forward keeps.
    assert saved_b < 0.5 * saved_a, (saved_a, saved_b)
    # Without autograd the plain forward runs (nothing to recompute).
    with torch.no_grad():
        checkpointed.eval()
        plain.eval()
        out_a, out_b = plain.encoder(batch["input_ids"]), checkpointed.encoder(batch["input_ids"])
    torch.testing.assert_close(out_a.last_hidden_state, out_b.last_hidden_state)


def test_enabling_twice_wraps_once_and_shared_layers_count_once() -> None:
    model = _model(share_layers="all")
    assert enable_activation_checkpointing(model) == ["encoder.layers.0"]
    assert enable_activation_checkpointing(model) == ["encoder.layers.0"]
    wrapped = model.encoder.layers[0].__dict__["forward"]
    assert not isinstance(wrapped.forward, type(wrapped))  # not wrapped twice
    batch = _batch(model)
    model(batch).loss.backward()  # one module recomputed three times
    assert model.encoder.layers[0].feed_forward is model.encoder.layers[2].feed_forward


def test_xlnet_checkpoints_attention_and_feed_forward_of_each_layer() -> None:
    from ptm_core.encoders.presets import xlnet_tiny

    torch.manual_seed(0)
    plain = xlnet_tiny()
    torch.manual_seed(0)
    checkpointed = xlnet_tiny()
    names = enable_activation_checkpointing(checkpointed)
    assert names[:2] == ["layers.0.attention", "layers.0.feed_forward"]
    assert len(names) == 2 * len(checkpointed.layers)
    ids = torch.randint(5, 100, (2, 10), generator=torch.Generator().manual_seed(0))
    grads = []
    for model in (plain, checkpointed):
        model.train()
        torch.manual_seed(5)
        model(ids).last_hidden_state.square().mean().backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=0, atol=1e-6, msg=name)


def test_a_model_without_transformer_layers_is_refused(make_source, make_config, make_model):
    config = make_config(activation_checkpointing=True)
    with pytest.raises(ValueError, match=r"trainer\.activation_checkpointing=false"):
        Trainer(make_model(0), make_source(), config)


def test_trainer_switch_trains_the_same_as_without(tmp_path) -> None:
    from ptm_core.data import PretrainingBatches
    from ptm_core.training import TrainerConfig

    def run(name: str, switch: bool) -> tuple[list[float], nn.Module]:
        model = _model()
        gen = torch.Generator().manual_seed(1)
        examples = []
        for _ in range(16):
            ids = torch.randint(5, 300, (12,), generator=gen).tolist()
            examples.append(
                {"input_ids": [2, *ids, 3], "special_tokens_mask": [1] + [0] * 12 + [1]}
            )
        data = PretrainingBatches(examples, 4, pad_id=0, transform=model.objectives.collate)
        config = TrainerConfig(
            output_dir=str(tmp_path / name),
            max_steps=4,
            log_every=1,
            save_every=4,
            progress=False,
            device="cpu",
            learning_rate=1e-3,
            activation_checkpointing=switch,
        )
        result = Trainer(model, data, config).fit()
        return [r["loss"] for r in result.history], model

    losses_a, model_a = run("plain", False)
    losses_b, model_b = run("checkpointed", True)
    assert "forward" in model_b.encoder.layers[0].__dict__
    torch.testing.assert_close(losses_b, losses_a, rtol=0, atol=1e-6)
    pairs = zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True)
    for (name, a), b in pairs:
        torch.testing.assert_close(b, a, rtol=0, atol=1e-6, msg=name)


def test_cuda_graphs_are_refused_off_cuda(make_source, make_config, make_model) -> None:
    config = make_config(compile=True, cuda_graphs=True)
    with pytest.raises(ValueError, match=r"trainer\.cuda_graphs=true needs a CUDA device"):
        Trainer(make_model(0), make_source(), config)


def test_encoder_decoder_checkpoints_both_stacks_with_the_same_gradients() -> None:
    from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
    from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig

    config = Seq2SeqConfig(
        vocab_size=50,
        hidden_size=16,
        encoder_layers=2,
        decoder_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=16,
        dropout=0.1,
        attention_dropout=0.1,
    )
    torch.manual_seed(0)
    plain = EncoderDecoderModel(config)
    torch.manual_seed(0)
    checkpointed = EncoderDecoderModel(config)
    names = enable_activation_checkpointing(checkpointed)
    assert len(names) == 4 and any("decoder" in name for name in names)
    gen = torch.Generator().manual_seed(0)
    source, target = torch.randint(3, 50, (2, 7), generator=gen), torch.randint(3, 50, (2, 5))
    grads = []
    for model in (plain, checkpointed):
        model.train()
        torch.manual_seed(7)
        model(source, target).logits.logsumexp(-1).mean().backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=0, atol=1e-6, msg=name)
