"""K-BERT from a RoBERTa / XLM-R folder: ``kbert.init_from=<folder>`` fine-tunes with the
folder's own tokenizer (byte-level BPE, Unigram), one token type and RoBERTa's position
offset; with no branch in a sentence, K-BERT's Mask-Transformer is transformers'
``RobertaModel`` on the same ids (fp32, 1e-5); a folder whose tokenizer or tensors do not
fit is refused in one line naming the file and the tensor."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
import transformers
from hf_folders import roberta_folder
from safetensors.torch import load_file, save_file

from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.task_tokenizer import HFTokenizer, load_task_tokenizer
from ptm_knowledge.kbert import KBertFeaturizer, knowledge_from_graph, mask_transformer

TOL = 1e-5
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_specs" / "kbert_sample"
QUERY = "encoder.layer.0.attention.self.query.weight"


def _lines() -> list[str]:
    lines = []
    for name in ("train.tsv", "dev.tsv"):
        rows = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[1:]
        lines += [row.split("\t", 1)[1] for row in rows]
    return lines


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {t: roberta_folder(root, t, lines=_lines()) for t in ("roberta", "xlm-roberta")}


def _run(tmp_path: Path, folder: Path, *extra: str) -> object:
    cfg = compose_config(
        [
            "experiment=kbert_tiny_cls",
            f"kbert.init_from={folder}",
            "trainer.max_steps=2",
            "trainer.log_every=1",
            "trainer.save_every=2",
            "trainer.progress=false",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
            *extra,
        ]
    )
    return run_composed(cfg)


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_finetune_from_the_folder_keeps_its_weights_and_says_what_was_loaded(
    model_type: str, folders: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = folders[model_type]
    caplog.set_level(logging.INFO)
    # A learning rate too small to move an fp32 weight: the saved encoder is the folder's.
    result = _run(tmp_path, folder, "trainer.learning_rate=1e-30")
    final = result.encoder_dir  # type: ignore[attr-defined]
    theirs = load_file(str(folder / "model.safetensors"))
    ours = TransformerEncoder.from_pretrained(final)
    hidden = ours.config.hidden_size  # query, key, value are one fused projection in ptm
    query = ours.state_dict()["layers.0.attention.qkv_proj.weight"][:hidden]
    assert torch.equal(query, theirs[f"roberta.{QUERY}"])
    lines = [r.getMessage() for r in caplog.records if "tensors loaded from" in r.getMessage()]
    assert len(lines) == 1, lines
    n_encoder = len(ours.state_dict())
    assert lines[0].startswith(f"kbert.init_from: {n_encoder} tensors loaded from {folder}, 4 ")
    assert lines[0].endswith("fresh: head.classifier.* (2), head.pooler.* (2)")
    # The run keeps the folder's tokenizer: the saved one encodes as the folder's does.
    saved = load_task_tokenizer(final)
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    text = "The delegation arrived in Budapest on Monday morning."
    assert saved.tokenize_ids(text) == reference(text, add_special_tokens=False)["input_ids"]
    assert json.loads((final / "task.json").read_text())["provenance"]["init_from"] == str(folder)


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_without_branches_the_mask_transformer_is_roberta(
    model_type: str, folders: dict[str, Path], sample_kg
) -> None:
    folder = folders[model_type]
    tokenizer = load_task_tokenizer(folder)
    assert isinstance(tokenizer, HFTokenizer)
    encoder = TransformerEncoder.from_pretrained(folder).eval()
    theirs = transformers.AutoModel.from_pretrained(folder).eval()
    rows = [
        ["The", "delegation", "arrived", "on", "Monday", "."],
        ["We", "met", "in", "the", "morning", "after", "a", "long", "trip", "."],
    ]
    for kg in ("none", "full"):  # "full": no word of these rows is a KG subject
        featurizer = KBertFeaturizer(tokenizer, knowledge_from_graph(sample_kg), kg=kg)
        batch = featurizer.collate([featurizer.encode(words) for words in rows])
        assert not batch["is_knowledge"].any()
        assert not batch["token_type_ids"].any()
        assert batch["input_ids"][:, 0].eq(tokenizer.vocab_info.cls_id).all()
        with torch.no_grad():
            ours = mask_transformer(encoder, batch)
            reference = theirs(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).last_hidden_state
        real = batch["attention_mask"].bool()
        assert (ours[real] - reference[real]).abs().max().item() <= TOL


def test_branches_of_bpe_pieces_get_soft_positions_and_the_roberta_pair_layout(
    folders: dict[str, Path], sample_kg
) -> None:
    tokenizer = load_task_tokenizer(folders["roberta"])
    featurizer = KBertFeaturizer(tokenizer, knowledge_from_graph(sample_kg), max_length=64)
    tree = featurizer.tree(["They", "flew", "to", "Warsaw", "."])
    branch = tree.is_knowledge.nonzero().flatten().tolist()
    assert branch, "Warsaw is a KG subject: its objects hang on it"
    # "Warsaw" is word 4 of <s> They flew to Warsaw . </s>; a word keeps its space (Ġ).
    pieces = [i for i in range(len(tree)) if tree.word_index[i] == 4 and i not in branch]
    assert "".join(tree.tokens[i] for i in pieces) == "ĠWarsaw"
    subject_end = pieces[-1]
    assert branch[0] == subject_end + 1 and tree.tokens[branch[0]].startswith("Ġ")
    assert int(tree.soft_positions[branch[0]]) == int(tree.soft_positions[subject_end]) + 1
    # The branch sees its subject, the words after the subject do not see the branch.
    after = subject_end + len(branch) + 1
    assert tree.visible_matrix[branch[0], subject_end]
    assert not tree.visible_matrix[after, branch[0]]
    # Pairs follow the tokenizer's own template: <s> A </s></s> B </s>.
    item = featurizer.encode(["Paris"], ["Rome"])
    vocab = tokenizer.vocab_info
    ids = item["input_ids"][~item["is_knowledge"]].tolist()
    assert ids[0] == vocab.cls_id and ids.count(vocab.sep_id) == 3
    assert ids[-1] == vocab.sep_id


def test_a_folder_that_does_not_fit_is_refused_in_one_line(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    wide = roberta_folder(tmp_path / "wide", lines=_lines(), vocab_size=333)
    with pytest.raises(ValueError) as exc:
        _run(tmp_path / "a", wide)
    message = str(exc.value)
    assert "\n" not in message
    assert f"{wide / 'tokenizer.json'}" in message
    assert "'embeddings.word_embeddings.weight'" in message and "333 rows" in message
    # A tensor missing from the weights file.
    gone = tmp_path / "gone"
    gone.mkdir()
    for path in folders["roberta"].iterdir():
        (gone / path.name).write_bytes(path.read_bytes())
    state = load_file(str(gone / "model.safetensors"))
    del state[f"roberta.{QUERY}"]
    save_file(state, str(gone / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError) as missing:
        _run(tmp_path / "b", gone)
    # The first line names the file; check_state lists the tensors under it.
    assert str(missing.value).startswith(f"{gone / 'model.safetensors'}: ")
    assert f"missing tensors:\n  {QUERY}" in str(missing.value)
