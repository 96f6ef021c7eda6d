"""The AWD-LSTM language model: published sizes, BPTT stream, training, save/load."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ptm_classic.families import AWD_LSTM
from ptm_classic.recurrent.awd_lstm import (
    AWDLSTMConfig,
    AWDLSTMLanguageModel,
    BPTTLanguageModel,
    awd_lstm_paper,
    count_parameters,
    evaluate_perplexity,
)
from ptm_classic.recurrent.bptt import BPTTBatches, LMTokenStream
from ptm_classic.recurrent.lm_objective import network_loss
from ptm_core.atomic import OUTPUT_MARKER
from ptm_core.checkpoints import CheckpointError
from ptm_core.data.token_store import InMemoryTokenStore
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.training import TrainerConfig
from ptm_core.training.trainer import Trainer


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny recurrences are latency bound: extra threads only spin on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tiny(vocab_size: int = 30, **overrides: float) -> AWDLSTMConfig:
    return AWDLSTMConfig(
        vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_layers=3, **overrides
    )


@pytest.mark.parametrize(
    ("vocab_size", "published_millions"),
    [(10_000, 24), (33_278, 33)],  # PTB, WikiText-2 (Merity et al., 2018, tables 1 and 2)
)
def test_paper_configuration_has_the_published_parameter_count(
    vocab_size: int, published_millions: int
) -> None:
    model = AWDLSTMLanguageModel(awd_lstm_paper(vocab_size))
    n = count_parameters(model)
    # Closed form: tied table V*400, three LSTMs (400->1150, 1150->1150, 1150->400; nn.LSTM
    # keeps two bias vectors) and the decoder bias V.
    lstm = sum(4 * o * (i + o) + 8 * o for i, o in [(400, 1150), (1150, 1150), (1150, 400)])
    assert n == vocab_size * 400 + lstm + vocab_size
    # The tables print whole millions: 24,221,600 -> "24M", 33,556,078 -> "33M" (truncated,
    # not rounded: 33.56M is listed as 33M), so the count must lie in [M, M + 1) million.
    assert published_millions * 10**6 <= n < (published_millions + 1) * 10**6
    assert model.decoder.weight is model.encoder.embeddings.weight
    assert [layer.hidden_size for layer in model.encoder.layers] == [1150, 1150, 400]


def test_stream_separates_documents_and_batches_are_contiguous_rows() -> None:
    store = InMemoryTokenStore([[[5, 6, 7], [8]], [[9, 10]], [[11, 12, 13, 14]]])
    stream = LMTokenStream(store, separator_id=3)
    assert stream.read(0, len(stream)).tolist() == [5, 6, 7, 8, 3, 9, 10, 3, 11, 12, 13, 14, 3]
    assert stream.read(6, 9).tolist() == [10, 3, 11]
    batches = BPTTBatches(stream, batch_size=2, bptt=2)
    out = list(batches.iter_batches(0))
    assert len(out) == batches.batches_per_epoch == 3
    # Row 0 = stream[0:6], row 1 = stream[6:12]; windows continue each other.
    rows = torch.cat([b["input_ids"] for b in out], dim=1)
    assert rows.tolist() == [[5, 6, 7, 8, 3], [10, 3, 11, 12, 13]]
    assert torch.equal(out[0]["labels"][:, :-1], out[0]["input_ids"][:, 1:])
    assert [bool(b["reset"]) for b in out] == [True, False, False]
    assert [b["input_ids"].tolist() for b in batches.iter_batches(0, 1)] == [
        b["input_ids"].tolist() for b in out[1:]
    ]


def test_variable_bptt_lengths_are_seeded_per_epoch_and_stay_in_the_row() -> None:
    store = InMemoryTokenStore([[list(range(4, 2004))]])
    batches = BPTTBatches(LMTokenStream(store, 3), 2, 70, variable_length=True, seed=1)
    first, again, other = batches.windows(0), batches.windows(0), batches.windows(1)
    assert first == again and first != other
    assert len(first) == len(other) == batches.batches_per_epoch
    for windows in (first, other):
        positions = [p for p, _ in windows]
        assert positions == sorted(positions) and all(length >= 1 for _, length in windows)
        assert windows[-1][0] + windows[-1][1] <= batches.row_length - 1
        # contiguous: each window starts where the previous one ended
        assert all(a[0] + a[1] == b[0] for a, b in itertools.pairwise(windows))


def _trained(lm: AWDLSTMLanguageModel, batch_size: int) -> PretrainingModel:
    # What the runner trains: the awd_lstm spec's network and input keys in the one model.
    return PretrainingModel(
        BPTTLanguageModel(lm, batch_size), network_loss(), input_keys=AWD_LSTM.input_keys
    )


def test_a_checkpoint_of_the_old_wrapper_loads_into_the_runner_model() -> None:
    # Runs started before the one PretrainingModel saved the BPTT wrapper's keys at the root
    # (lm.*, state_h_0); resuming one reads them as the network's.
    torch.manual_seed(0)
    old = BPTTLanguageModel(AWDLSTMLanguageModel(_tiny()), 2).state_dict()
    model = _trained(AWDLSTMLanguageModel(_tiny()), 2)
    model.load_state_dict(old, strict=True)
    for name, tensor in old.items():
        assert torch.equal(model.state_dict()[f"encoder.{name}"], tensor), name


def test_hidden_state_is_carried_detached_and_reset_at_epoch_start() -> None:
    model = BPTTLanguageModel(AWDLSTMLanguageModel(_tiny(wdrop=0.0)), batch_size=2).eval()
    ids = torch.randint(4, 30, (2, 6))
    batch = {"input_ids": ids, "labels": ids, "reset": torch.tensor(True)}
    first = model(**batch).metrics["lm_loss"]
    state = model.state_h_2.clone()
    assert state.abs().sum() > 0 and not state.requires_grad
    carried = model(**{**batch, "reset": torch.tensor(False)}).metrics["lm_loss"]
    assert not torch.allclose(carried, first)  # started from the carried state
    again = model(**batch).metrics["lm_loss"]
    torch.testing.assert_close(again, first)  # reset: zeros again
    assert "state_h_0" in model.state_dict()  # in checkpoints: resume carries on exactly


def test_language_model_loss_falls_on_a_tiny_corpus(tmp_path: Path) -> None:
    # A repeating pattern of 20 word types: a working LM learns it quickly.
    docs = [[[4 + (i * 7 + j) % 20 for j in range(30)] for i in range(3)] for _ in range(8)]
    stream = LMTokenStream(InMemoryTokenStore(docs), separator_id=3)
    batches = BPTTBatches(stream, batch_size=4, bptt=12, variable_length=True)
    torch.manual_seed(0)
    lm = AWDLSTMLanguageModel(
        AWDLSTMConfig(
            vocab_size=30,
            embedding_size=16,
            hidden_size=32,
            num_layers=2,
            dropoute=0.0,
            dropouti=0.1,
            dropouth=0.1,
            dropout=0.1,
            wdrop=0.2,
        )
    )
    config = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=60,
        learning_rate=3e-2,
        adam_betas=(0.7, 0.99),
        log_every=10,
        save_every=60,
        progress=False,
        device="cpu",
    )
    before = evaluate_perplexity(lm, BPTTBatches(stream, 4, 12))
    result = Trainer(_trained(lm, 4), batches, config).fit()
    losses = [record["lm/lm_loss"] for record in result.history]
    assert losses[-1] < losses[0] - 1.0  # ln(30) = 3.4 at the start
    after = evaluate_perplexity(lm, BPTTBatches(stream, 4, 12))
    assert after["perplexity"] < before["perplexity"] / 2


def test_save_load_round_trip_gives_identical_outputs(tmp_path: Path) -> None:
    lm = AWDLSTMLanguageModel(_tiny()).eval()
    ids = torch.randint(0, 30, (2, 9))
    final = lm.save_pretrained(tmp_path / "final")
    names = ["config.json", "model.safetensors", OUTPUT_MARKER]  # the marker: #31
    assert sorted(p.name for p in final.iterdir()) == sorted(names)
    loaded = AWDLSTMLanguageModel.from_pretrained(final).eval()
    assert loaded.config == lm.config
    assert loaded.decoder.weight is loaded.encoder.embeddings.weight  # re-tied
    torch.testing.assert_close(loaded(ids).logits, lm(ids).logits, rtol=0, atol=0)


def test_broken_or_missing_final_raises_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such directory"):
        AWDLSTMLanguageModel.from_pretrained(tmp_path / "nowhere")
    final = AWDLSTMLanguageModel(_tiny()).save_pretrained(tmp_path / "final")
    (final / "model.safetensors").write_bytes(b"truncated")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot read the weights"):
        AWDLSTMLanguageModel.from_pretrained(final)
    (final / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors: missing"):
        AWDLSTMLanguageModel.from_pretrained(final)
    (final / "config.json").write_text('{"model_type": "awd_lstm", "vocab_size": 30,\n')
    with pytest.raises(CheckpointError, match=r"config\.json:2: invalid JSON"):
        AWDLSTMLanguageModel.from_pretrained(final)
    other = AWDLSTMLanguageModel(_tiny()).save_pretrained(tmp_path / "other")
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "hidden_size": 12}))
    with pytest.raises(CheckpointError, match="does not fit"):
        AWDLSTMLanguageModel.from_pretrained(other)


class _StopAtStep3:
    def on_save(self, step: int, path: Path) -> None:
        if step == 3:
            raise KeyboardInterrupt


def test_interrupted_run_resumes_bit_identically_with_the_carried_state(tmp_path: Path) -> None:
    docs = [[[4 + (i * 7 + j) % 20 for j in range(30)] for i in range(3)] for _ in range(8)]
    stream = LMTokenStream(InMemoryTokenStore(docs), separator_id=3)

    def run(directory: Path, callbacks: list[object]) -> AWDLSTMLanguageModel:
        torch.manual_seed(0)
        lm = AWDLSTMLanguageModel(_tiny(wdrop=0.3))
        config = TrainerConfig(
            output_dir=str(directory),
            max_steps=7,
            learning_rate=1e-2,
            save_every=3,
            progress=False,
            device="cpu",
        )
        batches = BPTTBatches(stream, 4, 12, variable_length=True)
        Trainer(_trained(lm, 4), batches, config, callbacks=callbacks).fit()
        return lm

    straight = run(tmp_path / "straight", [])
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", [_StopAtStep3()])
    resumed = run(tmp_path / "resumed", [])  # from step 3: weights, optimizer, LSTM state
    for (name, a), b in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
