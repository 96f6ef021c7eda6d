"""ERNIE-THU from a RoBERTa folder: ``knowledge.init_from=<folder>`` prepares the linked
corpus with the folder's byte-level BPE tokenizer (mentions aligned to the first BPE piece
through character offsets), initialises the T-Encoder and the aggregators' token streams
from the folder (one token type, RoBERTa's position offset), logs what was loaded and what
starts fresh, and the result fine-tunes. With no entity, the knowledgeable encoder is
transformers' ``RobertaModel`` on the same ids (fp32, 1e-5). NSP, which needs a second
token type, is refused in one line before the KG is embedded."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import transformers
from hf_folders import roberta_folder
from knowledge_sample_paths import CORPUS, KG_DIR
from safetensors.torch import load_file

from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.task_tokenizer import HFTokenizer, load_task_tokenizer
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie import KnowledgeableEncoder, finetune_ernie_thu
from ptm_knowledge.ernie.task_features import _text_of_token
from ptm_knowledge.linking.alignment import align_mentions_to_pieces

TOL = 1e-5
QUERY = "roberta.encoder.layer.{}.attention.self.query.weight"
TINY = [
    "experiment=ernie_thu_tiny",
    "~objective.objectives.nsp",
    "~objective.weights.nsp",
    "knowledge.kg_embeddings.num_epochs=2",
    "data.max_length=48",
    "data.batch_size=8",
    "trainer.max_steps=2",
    "trainer.log_every=1",
    "trainer.progress=false",
    "trainer.device=cpu",
]


def _lines() -> list[str]:
    return [line for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Three layers: a 2-layer T-Encoder and one aggregator initialised from layer 2.
    return roberta_folder(tmp_path_factory.mktemp("hf"), lines=_lines(), num_hidden_layers=3)


def test_pretrain_from_the_folder_then_finetune(
    folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # A learning rate too small to move an fp32 weight: the saved layers are the folder's.
    cfg = compose_config(
        [
            *TINY,
            f"knowledge.init_from={folder}",
            "trainer.learning_rate=1e-30",
            f"trainer.output_dir={tmp_path / 'pre'}",
        ]
    )
    result = run_composed(cfg)
    final = result.encoder_dir
    theirs = load_file(str(folder / "model.safetensors"))
    ours = KnowledgeableEncoder.from_pretrained(final).state_dict()
    hidden = 24
    first = ours["text_encoder.layers.0.attention.qkv_proj.weight"][:hidden]
    assert torch.equal(first, theirs[QUERY.format(0)])
    donated = ours["knowledge_layers.0.token_attention.qkv_proj.weight"][:hidden]
    assert torch.equal(donated, theirs[QUERY.format(2)])
    lines = [r.getMessage() for r in caplog.records if "tensors loaded from" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("knowledge.init_from: ")
    assert f"loaded from {folder}, " in lines[0] and "knowledge_layers.0.* (" in lines[0]
    assert lines[0].endswith("fresh: entity_table (1), knowledge_layers.0.* (11)")
    # The run's tokenizer is the folder's BPE: the same ids as its own AutoTokenizer.
    saved = load_task_tokenizer(final)
    assert isinstance(saved, HFTokenizer)
    text = "In 1891 she moved to Paris and enrolled at the Sorbonne."
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    assert saved.tokenize_ids(text) == reference(text, add_special_tokens=False)["input_ids"]
    # ... and it fine-tunes, linking the task text and aligning entities to BPE pieces.
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    rows = {
        "train": ["city\tShe moved to Paris in 1891.", "country\tShe was born in Poland."] * 3,
        "dev": ["city\tThey studied in Warsaw.", "country\tThey travelled to France."],
    }
    for split, body in rows.items():
        (task_dir / f"{split}.tsv").write_text("label\tsentence\n" + "\n".join(body) + "\n")
    task = TaskSpec(
        name="typing",
        kind="classification",
        train=str(task_dir / "train.tsv"),
        dev=str(task_dir / "dev.tsv"),
        max_length=32,
        batch_size=4,
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "ft"), max_steps=2, learning_rate=1e-3, progress=False
    )
    tuned = finetune_ernie_thu(
        task, model_dir=final, kg=KG_DIR, trainer=trainer, cache_dir=tmp_path / "links"
    )
    assert (tuned.encoder_dir / "task.json").is_file()


def test_without_entities_the_knowledgeable_encoder_is_roberta(folder: Path) -> None:
    # output_activation=False is the released code's aggregator, whose token stream is
    # a BERT layer (the paper's default adds an activation there: the T-Encoder matches).
    text = TransformerEncoder.from_pretrained(folder)
    network = KnowledgeableEncoder.from_text_encoder(
        text, torch.randn(5, 8), 1, output_activation=False
    ).eval()
    theirs = transformers.AutoModel.from_pretrained(folder).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, text.config.vocab_size, (2, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    ids = ids.masked_fill(mask == 0, 1)  # RoBERTa's <pad>, right-padded as ptm pads
    with torch.no_grad():
        ours = network(ids, mask, output_hidden_states=True)
        reference = theirs(ids, attention_mask=mask, output_hidden_states=True)
    real = mask.bool()
    t_encoder = ours.hidden_states[2]  # after the T-Encoder's 2 layers
    assert (t_encoder[real] - reference.hidden_states[2][real]).abs().max() <= TOL
    last = ours.last_hidden_state[real] - reference.last_hidden_state[real]
    assert last.abs().max() <= TOL


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_mentions_align_to_the_first_piece_in_both_texts_of_a_pair(
    model_type: str, folder: Path, tmp_path: Path
) -> None:
    if model_type == "xlm-roberta":  # Unigram pieces, "▁" before a word
        folder = roberta_folder(tmp_path, model_type, lines=_lines())
    tokenizer = load_task_tokenizer(folder)
    a, b = "She moved to Paris.", "Marie Curie lived in Warsaw."
    (enc,) = tokenizer.encode_batch([a], [b])
    texts = _text_of_token(enc.special_tokens_mask)  # <s> a </s></s> b </s>: one token type
    assert not any(enc.token_type_ids) and set(texts) == {0, 1}
    for segment, (text, word) in enumerate(((a, "Paris"), (b, "Warsaw"))):
        start = text.index(word)
        outside = [
            int(s or t != segment) for s, t in zip(enc.special_tokens_mask, texts, strict=True)
        ]
        aligned = align_mentions_to_pieces(
            enc.offsets, [(start, start + len(word), "e")], {"e": 0}, outside
        )
        first = aligned.index(0)
        assert aligned.count(0) == 1 and texts[first] == segment
        # The first piece that covers a character of the word (a bare "Ġ"/"▁" covers none).
        assert enc.offsets[first][0] == start
        assert word.startswith(enc.tokens[first].lstrip("Ġ▁"))


def test_nsp_is_refused_before_the_kg_is_embedded(folder: Path, tmp_path: Path) -> None:
    cfg = compose_config(
        [*TINY[:1], *TINY[3:], f"knowledge.init_from={folder}", f"trainer.output_dir={tmp_path}"]
    )
    with pytest.raises(ValueError) as exc:
        run_composed(cfg)
    message = str(exc.value)
    assert "\n" not in message and "one token type" in message and str(folder) in message
    assert not (tmp_path / "kg_embeddings").exists()
