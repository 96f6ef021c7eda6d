"""VisualBERT, ViLBERT and LXMERT start their text stream from a BERT folder
(``init_from=<folder>``): the text layers equal the folder's, the rest starts fresh and the
log says which; LXMERT's language layers (before any cross-modal layer) give transformers'
``BertModel`` hidden states on the same ids within 1e-5. The same from a RoBERTa folder,
with its byte-level BPE ``tokenizer.json`` copied into the data folder in place of
``vocab.txt``: the captions get ``AutoTokenizer``'s ids, the language layers equal
``RobertaModel``, and ``ptm export`` writes the BPE tokenizer back. A folder without a
tokenizer, another vocabulary, a BERT folder with BPE captions, or other sizes are refused
in one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_multimodal.synthetic import write_synthetic_dataset

TOL = 1e-5
TINY = [
    "trainer.max_steps=2",
    "trainer.log_every=1",
    "trainer.progress=false",
    "trainer.device=cpu",
    "data.batch_size=8",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_dataset(tmp_path_factory.mktemp("pairs") / "train", 16, seed=1)


def _bert_folder(root: Path, vocab: Path, **sizes: int) -> Path:
    folder = root / "bert"
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text(vocab.read_text(encoding="utf-8"), encoding="utf-8")
    tokens = vocab.read_text(encoding="utf-8").split()
    settings = {
        "vocab_size": len(tokens),
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 40,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        **sizes,
    }
    config = transformers.BertConfig(**settings)
    torch.manual_seed(5)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def _run(experiment: str, folder: Path, data: Path, out: Path, *extra: str) -> object:
    cfg = compose_config(
        [
            f"experiment={experiment}",
            f"init_from={folder}",
            f"data.train_dir={data}",
            *TINY,
            "trainer.learning_rate=1e-30",  # too small to move fp32 weights: final = folder
            f"trainer.output_dir={out}",
            *extra,
        ]
    )
    return run_composed(cfg)


@pytest.mark.parametrize(
    ("experiment", "stack", "fresh"),
    [
        ("visualbert_tiny", "encoder.", "visual_projection.* ("),
        ("vilbert_tiny", "text_encoder.", "image_layers.0.* (12)"),
        ("lxmert_tiny", "language_encoder.", "cross_layers.0.* ("),
    ],
)
def test_the_text_stream_starts_from_the_folder(
    experiment: str,
    stack: str,
    fresh: str,
    data: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = _bert_folder(tmp_path, data / "vocab.txt")
    caplog.set_level(logging.INFO)
    result = _run(experiment, folder, data, tmp_path / "run")
    lines = [r.getMessage() for r in caplog.records if "tensors loaded from" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("init_from: ") and str(folder) in lines[0]
    assert fresh in lines[0] and f"{stack}layers" not in lines[0]
    theirs = TransformerEncoder.from_pretrained(folder).state_dict()
    final = result.encoder_dir  # type: ignore[attr-defined]
    from safetensors.torch import load_file

    saved = {
        k.removeprefix("network."): v
        for path in sorted(final.glob("*.safetensors"))
        for k, v in load_file(str(path)).items()
    }
    name = "layers.0.attention.qkv_proj.weight"
    key = next(k for k in saved if k.endswith(f"{stack}{name}"))
    assert torch.equal(saved[key], theirs[name])


def _lxmert(vocab_size: int) -> Any:
    """A tiny LXMERT whose language layers have the test folders' sizes (eval mode)."""
    from ptm_multimodal.lxmert import lxmert

    return lxmert(
        vocab_size=vocab_size,
        visual_embedding_dim=8,
        hidden_size=64,
        num_heads=4,
        intermediate_size=128,
        l_layers=2,
        r_layers=1,
        x_layers=1,
        max_positions=32,
        dropout=0.0,
        attention_dropout=0.0,
    ).eval()


def test_lxmert_language_layers_are_bert(data: Path, tmp_path: Path) -> None:
    from ptm_multimodal.text_init import init_text_stream

    folder = _bert_folder(tmp_path, data / "vocab.txt")
    network = _lxmert(len((data / "vocab.txt").read_text().split()))
    init_text_stream(network, folder, data / "vocab.txt")
    theirs = transformers.BertModel.from_pretrained(folder).eval()
    ids = torch.randint(
        5, theirs.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0)
    )
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        ours = network.text_stack(ids, attention_mask=mask).last_hidden_state
        reference = theirs(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    assert (ours[real] - reference[real]).abs().max() <= TOL


def test_folders_that_do_not_fit_are_refused_in_one_line(data: Path, tmp_path: Path) -> None:
    roberta = tmp_path / "roberta"
    roberta.mkdir()
    other = _bert_folder(tmp_path / "other", data / "vocab.txt")
    (other / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nzebra\n")
    wide = _bert_folder(tmp_path / "wide", data / "vocab.txt", num_hidden_layers=3)
    cases = [
        (roberta, f"init_from={roberta}: no vocab.txt or tokenizer.json"),
        (other, f"{data / 'vocab.txt'}: the captions' tokenizer is not {other / 'vocab.txt'}"),
        (wide, f"{wide / 'config.json'}: num_layers is 3 but the model's text stream has 2"),
    ]
    for n, (folder, says) in enumerate(cases):
        with pytest.raises(ValueError) as exc:
            _run("vilbert_tiny", folder, data, tmp_path / f"run{n}")
        assert "\n" not in str(exc.value) and str(exc.value).startswith(says)


def _roberta_data(root: Path, data: Path) -> tuple[Path, Path]:
    """A copy of ``data`` whose captions use a RoBERTa folder's tokenizer, and the folder."""
    import shutil

    from hf_folders import roberta_folder

    captions = [
        json.loads(line)["caption"]
        for line in (data / "pairs.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    folder = roberta_folder(
        root,
        "roberta",
        lines=captions * 4,
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        layer_norm_eps=1e-12,
        model_class=transformers.RobertaModel,
    )
    copied = root / "pairs"
    shutil.copytree(data, copied)
    (copied / "vocab.txt").unlink()
    shutil.copyfile(folder / "tokenizer.json", copied / "tokenizer.json")
    return copied, folder


def test_the_text_stream_starts_from_a_roberta_folder(
    data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ptm_multimodal.prepared import open_image_text
    from ptm_multimodal.text_init import init_text_stream

    pairs, folder = _roberta_data(tmp_path, data)
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    network = _lxmert(len(reference))
    init_text_stream(network, folder, pairs / "tokenizer.json")
    theirs = transformers.RobertaModel.from_pretrained(folder).eval()
    batch = reference(
        ["a red cube", "two blue spheres near a cube"], padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        ours = network.text_stack(batch["input_ids"], attention_mask=batch["attention_mask"])
        expected = theirs(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    assert (ours.last_hidden_state[real] - expected[real]).abs().max() <= TOL

    caplog.set_level(logging.INFO)
    # box_position off: transformers' VisualBERT has no box encoding, and the run exports.
    result = _run("visualbert_tiny", folder, pairs, tmp_path / "run", "model.box_position=false")
    line = next(r.getMessage() for r in caplog.records if "tensors loaded from" in r.getMessage())
    assert str(folder) in line and "encoder.layers" not in line
    prepared = open_image_text(pairs, max_length=32, cache_dir=tmp_path / "cache")
    assert prepared.vocab_path.name == "tokenizer.json"
    first = json.loads((pairs / "pairs.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert list(prepared.caption(0).input_ids) == reference(first["caption"])["input_ids"]
    final = result.encoder_dir  # type: ignore[attr-defined]
    assert (final / "tokenizer.json").is_file() and not (final / "vocab.txt").exists()

    from flows.cli import main

    out = tmp_path / "hf"
    assert main(["export", "--format", "hf", str(final), str(out)]) == 0
    exported = transformers.AutoTokenizer.from_pretrained(out)
    text = "a red cube near two spheres"
    assert exported(text)["input_ids"] == reference(text)["input_ids"]


def test_bpe_captions_with_a_bert_folder_are_refused(data: Path, tmp_path: Path) -> None:
    pairs, _ = _roberta_data(tmp_path / "rb", data)
    bert = _bert_folder(tmp_path, data / "vocab.txt")
    with pytest.raises(ValueError) as exc:
        _run("vilbert_tiny", bert, pairs, tmp_path / "run")
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"{pairs / 'tokenizer.json'}: the captions' tokenizer is not")
    assert f"copy {bert / 'vocab.txt'} into the data folder" in message
