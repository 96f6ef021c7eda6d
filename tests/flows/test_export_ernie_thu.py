"""``ptm export --format hf`` of ERNIE-THU: refused, or its text layers with a note (#31)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import save_file

from flows.cli import main
from flows.export import export
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.export import export_hf
from ptm_core.encoders import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.ernie.task_io import save_ernie_task_model
from ptm_knowledge.ernie.task_model import build_ernie_task_model
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

WORDS = ["glacier", "moraine", "cirque", "esker", "drumlin", "fjord", "tarn"]
ENTITIES = 13


@pytest.fixture
def tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    (tmp_path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n", encoding="utf-8"
    )
    return WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt")


def _model(tokenizer: WordPieceTokenizer) -> KnowledgeableEncoder:
    torch.manual_seed(4)
    text = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=24,
        num_layers=3,
        num_heads=2,
        intermediate_size=40,
    )
    return KnowledgeableEncoder(text, torch.randn(ENTITIES, 6), 2, entity_heads=2).eval()


@pytest.fixture
def thu_final(tmp_path: Path, tokenizer: WordPieceTokenizer) -> Path:
    model = _model(tokenizer)

    def heads(directory: Path) -> None:  # the pre-training heads, as ptm names them
        save_file(
            {
                "objectives.mlm.head.decoder.bias": torch.zeros(tokenizer.vocab_size),
                "objectives.dea.projection.weight": torch.zeros(6, 24),
            },
            str(directory / "heads.safetensors"),
        )

    ids = [f"Q{i}" for i in range(ENTITIES)]
    return model.save_pretrained(
        tmp_path / "final", entity_ids=ids, extra_writers=[tokenizer.save, heads]
    )


def test_export_is_refused_in_one_line_that_names_the_flag(thu_final: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    with pytest.raises(CheckpointError) as err:
        export(thu_final, out)
    message = str(err.value)
    assert message.startswith(f"{thu_final}: an ERNIE-THU model"), message
    assert "2 knowledgeable layer(s)" in message and f"{ENTITIES} entities" in message
    assert "--text-layers-only" in message and "\n" not in message
    assert not out.exists()


def test_the_cli_refuses_with_exit_1(thu_final: Path, tmp_path: Path, capsys) -> None:
    assert main(["export", str(thu_final), str(tmp_path / "hf")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ptm: ") and "ERNIE-THU" in err and err.count("\n") == 1


def test_text_layers_only_exports_the_t_encoder_with_a_note(
    thu_final: Path, tmp_path: Path, tokenizer: WordPieceTokenizer, capsys
) -> None:
    out = tmp_path / "hf"
    assert main(["export", "--text-layers-only", str(thu_final), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "not exported   the K-Encoder (2 knowledgeable layer(s)" in printed
    assert "NOT_EXPORTED.md" in printed
    note = (out / "NOT_EXPORTED.md").read_text(encoding="utf-8")
    assert "3 text layer(s)" in note and "2 knowledgeable layer(s)" in note
    assert f"({ENTITIES} entities)" in note and "dea, mlm" in note
    hf = transformers.AutoModel.from_pretrained(out).eval()
    assert type(hf).__name__ == "BertModel"
    ids = torch.tensor([tokenizer.encode("glacier esker fjord tarn").input_ids])
    model = _model(tokenizer)
    with torch.no_grad():
        ours = model.text_encoder(ids).last_hidden_state
        theirs = hf(input_ids=ids).last_hidden_state
    assert (ours - theirs).abs().max().item() <= 1e-5


def test_a_fine_tuned_ernie_thu_is_refused_even_with_the_flag(
    tmp_path: Path, tokenizer: WordPieceTokenizer
) -> None:
    task = build_ernie_task_model(_model(tokenizer), "classification", 3)
    final = save_ernie_task_model(
        task,
        tmp_path / "task",
        entity_ids=[f"Q{i}" for i in range(ENTITIES)],
        task_config={"task": {"name": "landforms"}},
        extra_writers=[tokenizer.save],
    )
    with pytest.raises(CheckpointError, match=r"a fine-tuned ERNIE-THU model; .* task head"):
        export_hf(final, tmp_path / "hf", text_layers_only=True)


def test_the_flag_is_refused_for_a_model_that_exports_whole(
    tmp_path: Path, tokenizer: WordPieceTokenizer
) -> None:
    final = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=24,
    ).save_pretrained(tmp_path / "bert")
    with pytest.raises(CheckpointError, match="--text-layers-only is for ERNIE-THU folders"):
        export_hf(final, tmp_path / "hf", text_layers_only=True)


def test_text_layers_only_export_is_replaced_with_overwrite(
    thu_final: Path, tmp_path: Path
) -> None:
    """The text-layers export is an export like any other: ``--overwrite`` replaces it, and
    without the flag it is refused (it carries ptm's marker of kind ``export``)."""
    out = tmp_path / "hf"
    assert main(["export", "--text-layers-only", str(thu_final), str(out)]) == 0
    assert main(["export", "--text-layers-only", str(thu_final), str(out)]) == 1
    assert main(["export", "--overwrite", "--text-layers-only", str(thu_final), str(out)]) == 0
    assert (out / "NOT_EXPORTED.md").is_file()
