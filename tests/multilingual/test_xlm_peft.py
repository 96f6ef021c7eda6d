"""XLM zero-shot fine-tuning with xlm_finetune.peft: only the adapter and the head train,
final/ holds just those beside a pointer to the XLM folder and reloads to the same model,
and a killed run resumes bit for bit."""

from __future__ import annotations

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
from test_xlm_finetune import xlm_dir  # noqa: F401 (the fixture)

import ptm_multilingual.finetune as xlm_finetune
from flows import runner
from flows.config import compose_config
from ptm_core.peft import PeftConfig, SoftPromptEncoder, attach_peft
from ptm_core.peft.prompts import text_positions
from ptm_multilingual.finetune import XLMClassifier, build_xlm_classifier, load_xlm_classifier
from ptm_multilingual.model import XLMEncoder


def run(base: Path, out: Path, method: str, *extra: str, steps: int = 6) -> Any:
    cfg = compose_config(
        [
            "experiment=xlm_zero_shot",
            f"init_from={base}",
            f"xlm_finetune.peft={method}",
            "xlm_finetune.peft_r=4",
            "xlm_finetune.peft_virtual_tokens=3",
            "xlm_finetune.batch_size=8",
            f"trainer.max_steps={steps}",
            "trainer.log_every=1",
            "trainer.learning_rate=1e-2",
            f"trainer.output_dir={out}",
            "trainer.device=cpu",
            "trainer.progress=false",
            *extra,
        ]
    )
    return runner.run(cfg)


@pytest.mark.parametrize("method", ["lora", "ia3", "prefix", "prompt"])
def test_only_the_adapter_and_head_train_and_final_reloads(
    xlm_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    seen = spy_on_attach(monkeypatch, xlm_finetune, "attach_peft")
    result = run(xlm_dir, tmp_path / "run", method)
    after = result.model.state_dict()
    assert_only_adapter_and_head_trained(seen["before"], after)
    assert not result.model.encoder.lang_embeddings.weight.requires_grad
    record = assert_adapter_folder(result.encoder_dir, xlm_dir, method)
    assert record["family"] == "xlm"
    loaded, _, _ = load_xlm_classifier(result.encoder_dir)
    assert_same_state(loaded, after)


def test_what_an_adapter_cannot_do_is_one_line(xlm_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(ValueError, match=r"^xlm_finetune.peft=lora .*set xlm_finetune.freeze=none"):
        run(xlm_dir, tmp_path / "b", "lora", "xlm_finetune.freeze=embeddings", steps=1)
    with pytest.raises(ValueError, match=r"^xlm_finetune.peft: unknown method 'lorra'"):
        run(xlm_dir, tmp_path / "c", "lorra", steps=1)


@pytest.mark.parametrize("method", ["lora", "prompt"])
def test_crash_and_resume_is_bit_identical(
    xlm_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    assert_resume_is_bit_identical(
        monkeypatch,
        XLMClassifier,
        lambda name: run(xlm_dir, tmp_path / name, method, "trainer.save_every=4", steps=8),
    )


def test_a_prompt_takes_the_rows_language(xlm_dir: Path) -> None:  # noqa: F811
    """A prompt equal to the embeddings of ``P`` tokens gives the states of XLM run on those
    tokens prepended to the row, each with the row's language embedding, at positions
    ``0..P-1`` (the row's tokens after them); padding stays hidden and every real token
    reads the prompt."""
    encoder = XLMEncoder.from_pretrained(xlm_dir).eval()
    assert len(encoder.languages) > 1
    model = attach_peft(
        build_xlm_classifier(encoder, 3), PeftConfig("prompt", num_virtual_tokens=4)
    )
    wrapped = model.encoder
    assert isinstance(wrapped, SoftPromptEncoder)
    assert wrapped.languages == encoder.languages  # checkpoints read the base through it
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(5, encoder.vocab_size, (2, 8), generator=generator)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[0, 5:] = 0
    langs = torch.tensor([[0] * 8, [1] * 8])  # one language per row, as fine-tuning rows
    virtual = torch.tensor([7, 8, 9, 10])
    with torch.no_grad():
        wrapped.prompt.copy_(encoder.word_embeddings.weight[virtual])
        ours = wrapped(ids, mask, langs=langs).last_hidden_state
        prompted = torch.cat([virtual.expand(2, -1), ids], 1)
        full_mask = torch.cat([torch.ones(2, 4, dtype=torch.long), mask], 1)
        theirs = encoder(prompted, full_mask, langs=torch.cat([langs[:, :4], langs], 1))
        swapped = encoder(prompted, full_mask, langs=torch.cat([1 - langs[:, :4], langs], 1))
    real = mask.bool()
    torch.testing.assert_close(ours[real], theirs.last_hidden_state[:, 4:][real], atol=1e-5, rtol=0)
    assert not torch.allclose(ours, swapped.last_hidden_state[:, 4:])  # the language counts

    def encode(pad: int) -> torch.Tensor:
        padding = torch.zeros(2, pad, dtype=torch.long)
        with torch.no_grad():
            return wrapped(
                torch.cat([ids, padding + 2], 1),
                torch.cat([mask, padding], 1),
                langs=torch.cat([langs, langs[:, :pad]], 1),
            ).last_hidden_state

    assert_prompt_seen_and_padding_hidden(encode, wrapped.prompt, mask)


def test_a_prompt_too_long_for_the_rows_names_xlms_own_keys(
    xlm_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """XLM's settings are ``xlm_finetune.*``: when the prompt leaves a row no room, the
    message names the keys the user sets there, not core's ``finetune``/``task`` ones."""
    positions = text_positions(XLMEncoder.from_pretrained(xlm_dir))  # what the prompt fits in
    assert positions is not None
    with pytest.raises(ValueError) as caught:
        run(
            xlm_dir,
            tmp_path / "long",
            "prompt",
            f"xlm_finetune.peft_virtual_tokens={positions - 2}",
            steps=1,
        )
    message = str(caught.value)
    assert "plus" in message and "prompt tokens exceeds" in message, message
    assert message.endswith(
        "lower xlm_finetune.max_length to 2 or xlm_finetune.peft_virtual_tokens"
    )
    assert " finetune." not in message and " task." not in message
