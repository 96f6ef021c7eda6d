"""``ptm export --format hf``: ptm folders load in transformers' auto classes with the same
logits (fp32, 1e-5) and the same token ids, for BERT (pre-trained by ``ptm pretrain``), a
fine-tuned BERT head, ALBERT, ELECTRA, XLNet, BART and T5."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from hydra.utils import instantiate

from flows.cli import main
from flows.config import compose_config
from ptm_core.checkpoints.seq2seq import save_seq2seq
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.evaluation import load_masked_lm
from ptm_core.finetune.model import load_task_model
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.objectives.nsp import NextSentenceObjective
from ptm_core.pretraining import load_heads, save_heads
from ptm_core.seq2seq_pretraining import build_model
from ptm_core.tokenization import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"
TOL = 1e-5
SENTENCES = [
    "The Quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France, and Berlin of Germany!",
    "Ünïcode words and a [MASK] token",
]
PAIR = ("Alan Turing was born in London.", "He studied at Cambridge.")


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def bert_final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT trained by ``ptm pretrain experiment=bert_tiny`` (2 steps)."""
    run = tmp_path_factory.mktemp("bert-run")
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
            "data.batch_size=4",
            "data.max_length=64",
        ]
    )
    assert code == 0
    return run / "final"


def _export(source: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export", "--format", "hf", str(source), str(out)]) == 0
    return capsys.readouterr().out


def _check_token_ids(out: Path, tokenizer: WordPieceTokenizer) -> Any:
    hf = transformers.AutoTokenizer.from_pretrained(out)
    assert len(hf) == tokenizer.vocab_size
    assert (hf.cls_token, hf.sep_token, hf.pad_token, hf.mask_token, hf.unk_token) == (
        "[CLS]",
        "[SEP]",
        "[PAD]",
        "[MASK]",
        "[UNK]",
    )
    for text in SENTENCES:
        assert hf(text)["input_ids"] == tokenizer.encode(text).input_ids, text
    ours = tokenizer.encode(*PAIR)
    theirs = hf(*PAIR)
    assert theirs["input_ids"] == ours.input_ids
    assert theirs["token_type_ids"] == ours.token_type_ids
    # Lower-casing is kept: the uncased sample vocabulary has no upper-case pieces.
    assert hf.tokenize("QUICK") == hf.tokenize("quick")
    return hf


def _batch(hf_tokenizer: Any) -> dict[str, torch.Tensor]:
    return dict(hf_tokenizer(SENTENCES, padding=True, return_tensors="pt"))


def _assert_close(ours: torch.Tensor, theirs: torch.Tensor, real: torch.Tensor | None) -> None:
    if real is not None:
        ours, theirs = ours[real], theirs[real]
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() <= TOL


def _loaded(auto_class: str, out: Path) -> Any:
    model, info = getattr(transformers, auto_class).from_pretrained(out, output_loading_info=True)
    assert info["missing_keys"] == [] or not info["missing_keys"], info
    return model.eval()


def test_bert_from_ptm_pretrain_loads_in_auto_classes_with_same_logits_and_ids(
    bert_final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hf"
    printed = _export(bert_final, out, capsys)
    assert "BertForPreTraining" in printed
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"]
    assert {p.name for p in out.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
    }
    tokenizer = WordPieceTokenizer.from_directory(bert_final)
    hf_tokenizer = _check_token_ids(out, tokenizer)
    batch = _batch(hf_tokenizer)
    real = batch["attention_mask"].bool()

    encoder, mlm, _ = load_masked_lm(bert_final)
    nsp = build_objective(NextSentenceObjective, encoder, tokenizer.vocab_info)
    load_heads(ObjectiveMix({"mlm": mlm, "nsp": nsp}), bert_final)
    encoder.eval()
    with torch.no_grad():
        hidden = encoder(
            input_ids=batch["input_ids"],
            attention_mask=real,
            token_type_ids=batch["token_type_ids"],
        ).last_hidden_state
        ours_mlm, ours_nsp = mlm.head(hidden), nsp.head(hidden)
        masked_lm = _loaded("AutoModelForMaskedLM", out)
        assert type(masked_lm).__name__ == "BertForMaskedLM"
        theirs_mlm = masked_lm(**batch).logits
        pretraining = _loaded("AutoModelForPreTraining", out)
        theirs_pre = pretraining(**batch)
    _assert_close(ours_mlm, theirs_mlm, real)
    _assert_close(ours_mlm, theirs_pre.prediction_logits, real)
    _assert_close(ours_nsp, theirs_pre.seq_relationship_logits, None)
    # The trained head is really there: a fresh BertForMaskedLM differs.
    assert (ours_mlm.abs().max() > 0.1) and mlm.head.decoder.bias.abs().max() > 0


def test_a_fine_tuned_classifier_exports_to_auto_sequence_classification(
    bert_final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "ft"
    code = main(
        [
            "finetune",
            "task=kg_pair",
            f"model={bert_final}",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0
    capsys.readouterr()
    out = tmp_path / "hf"
    assert "BertForSequenceClassification" in _export(run / "final", out, capsys)
    model, task = load_task_model(run / "final")
    model.eval()
    hf_tokenizer = _check_token_ids(out, WordPieceTokenizer.from_directory(run / "final"))
    theirs = _loaded("AutoModelForSequenceClassification", out)
    assert theirs.config.id2label == dict(enumerate(task["label_names"]))
    assert theirs.config.label2id == {n: i for i, n in enumerate(task["label_names"])}
    batch = dict(
        hf_tokenizer([PAIR[0]] * 2, [PAIR[1], SENTENCES[0]], padding=True, return_tensors="pt")
    )
    with torch.no_grad():
        ours = model({**batch, "attention_mask": batch["attention_mask"].bool()}).logits
        expected = theirs(**batch).logits
    _assert_close(ours, expected, None)


# ------------------------------------------------------------------ the other families


def _perturb(module: torch.nn.Module, seed: int) -> None:
    """Every tensor moved off its init (zero biases, unit norms) so each name is checked."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in module.parameters():  # not the buffers: T5 has no final_logits_bias
            tensor.add_(0.05 * torch.randn(tensor.shape, generator=g))


def _encoder_final(experiment: str, path: Path) -> tuple[TransformerEncoder, ObjectiveMix]:
    """A ptm ``final/`` as ``ptm pretrain`` writes it, built from the experiment's config."""
    cfg = compose_config([f"experiment={experiment}", "model.dropout=0.0"])
    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)
    torch.manual_seed(0)
    encoder = instantiate(cfg.model)(vocab_size=tokenizer.vocab_size)
    objectives = {
        name: build_objective(instantiate(node), encoder, tokenizer.vocab_info)
        for name, node in cfg.objective.objectives.items()
    }
    mix = ObjectiveMix(objectives)
    _perturb(mix, 1)
    encoder.save_pretrained(
        path, extra_writers=[tokenizer.save, lambda d: save_heads(mix, encoder, d)]
    )
    return TransformerEncoder.from_pretrained(path).eval(), mix.eval()


def test_albert_exports_with_its_mlm_and_sop_heads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder, mix = _encoder_final("albert_tiny", tmp_path / "final")
    out = tmp_path / "hf"
    assert "AlbertForPreTraining" in _export(tmp_path / "final", out, capsys)
    batch = _batch(_check_token_ids(out, WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)))
    real = batch["attention_mask"].bool()
    objectives = dict(mix)
    with torch.no_grad():
        hidden = encoder(
            batch["input_ids"], attention_mask=real, token_type_ids=batch["token_type_ids"]
        ).last_hidden_state
        theirs = _loaded("AutoModelForPreTraining", out)(**batch)
        masked_lm = _loaded("AutoModelForMaskedLM", out)(**batch).logits
        _assert_close(objectives["mlm"].head(hidden), theirs.prediction_logits, real)
        _assert_close(objectives["mlm"].head(hidden), masked_lm, real)
        _assert_close(objectives["sop"].head(hidden), theirs.sop_logits, None)


def test_electra_exports_its_discriminator_and_its_generator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder, mix = _encoder_final("electra_tiny", tmp_path / "final")
    out = tmp_path / "hf"
    printed = _export(tmp_path / "final", out, capsys)
    assert "ElectraForPreTraining" in printed
    assert f"also           {out / 'generator'}: ElectraForMaskedLM\n" in printed
    assert "not exported" not in printed
    batch = _batch(_check_token_ids(out, WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)))
    _check_token_ids(out / "generator", WordPieceTokenizer.from_vocab(SAMPLE_VOCAB))
    real = batch["attention_mask"].bool()
    electra = dict(mix)["electra"]
    with torch.no_grad():
        hidden = encoder(
            batch["input_ids"], attention_mask=real, token_type_ids=batch["token_type_ids"]
        ).last_hidden_state
        ours = electra.discriminator_head(hidden)
        theirs = _loaded("AutoModelForPreTraining", out)(**batch).logits
        # The generator: a narrower encoder on the discriminator's embeddings, and its head.
        generated = electra.generator(
            batch["input_ids"], attention_mask=real, token_type_ids=batch["token_type_ids"]
        ).last_hidden_state
        ours_generator = electra.generator_head(generated)
        generator = _loaded("AutoModelForMaskedLM", out / "generator")
        theirs_generator = generator(**batch).logits
    _assert_close(ours, theirs, real)
    assert generator.config.hidden_size == electra.generator.config.hidden_size
    assert generator.config.num_attention_heads == electra.generator.config.num_heads
    _assert_close(ours_generator, theirs_generator, real)


def test_xlnet_exports_its_lm_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    encoder, mix = _encoder_final("xlnet_tiny", tmp_path / "final")
    out = tmp_path / "hf"
    assert "XLNetLMHeadModel" in _export(tmp_path / "final", out, capsys)
    hf_tokenizer = _check_token_ids(out, WordPieceTokenizer.from_vocab(SAMPLE_VOCAB))
    ids = torch.tensor([hf_tokenizer(SENTENCES[1])["input_ids"]])
    with torch.no_grad():
        ours = dict(mix)["plm"].logits(encoder(ids).last_hidden_state)
        theirs = _loaded("AutoModelForCausalLM", out)(ids).logits
    _assert_close(ours, theirs, None)


@pytest.mark.parametrize("experiment", ["bart_tiny", "t5_tiny"])
def test_seq2seq_families_export_to_auto_seq2seq_lm(
    experiment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = compose_config([f"experiment={experiment}", "model.dropout=0.0"])
    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)
    torch.manual_seed(0)
    vocab = tokenizer.vocab_info
    objectives = [
        instantiate(node)(vocab=vocab, max_length=cfg.data.max_length)
        for node in cfg.objective.objectives.values()
    ]
    model = build_model(instantiate(cfg.model), vocab, objectives[0])
    _perturb(model, 2)
    final = tmp_path / "final"
    save_seq2seq(model, final)
    tokenizer.save(final / "tokenizer")
    out = tmp_path / "hf"
    name = (
        "T5ForConditionalGeneration" if experiment == "t5_tiny" else "BartForConditionalGeneration"
    )
    assert name in _export(final, out, capsys)
    batch = _batch(_check_token_ids(out, tokenizer))
    decoder_ids = batch["input_ids"][:, :5]
    model.eval()
    with torch.no_grad():
        ours = model(
            batch["input_ids"], decoder_ids, attention_mask=batch["attention_mask"].bool()
        ).logits
        theirs = _loaded("AutoModelForSeq2SeqLM", out)(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_ids,
        ).logits
    _assert_close(ours, theirs, None)


def test_a_family_without_hf_counterpart_is_refused_with_the_supported_kinds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"encoder": {}, "languages": ["en"]}))
    assert main(["export", "--format", "hf", str(folder), str(tmp_path / "hf")]) == 1
    err = capsys.readouterr().err
    assert str(folder) in err and "Supported:" in err and "ALBERT" in err
    assert not (tmp_path / "hf").exists()
    missing = tmp_path / "nowhere"
    assert main(["export", str(missing), str(tmp_path / "hf")]) == 1
    assert f"{missing}: no such folder" in capsys.readouterr().err


def test_a_pre_ln_gpt_final_is_refused_naming_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _encoder_final("gpt_tiny", tmp_path / "final")
    assert main(["export", "--format", "hf", str(tmp_path / "final"), str(tmp_path / "hf")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'final'}: " in err and "post-LN" in err and "Supported:" in err
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    ("task", "auto_class"),
    [("kg_ner", "AutoModelForTokenClassification"), ("kg_squad", "AutoModelForQuestionAnswering")],
)
def test_fine_tuned_tagger_and_qa_export_to_their_auto_classes(
    task: str,
    auto_class: str,
    bert_final: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "ft"
    code = main(
        [
            "finetune",
            f"task={task}",
            f"model={bert_final}",
            "trainer.max_steps=2",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0
    capsys.readouterr()
    out = tmp_path / "hf"
    _export(run / "final", out, capsys)
    model, record = load_task_model(run / "final")
    model.eval()
    batch = _batch(_check_token_ids(out, WordPieceTokenizer.from_directory(run / "final")))
    real = batch["attention_mask"].bool()
    theirs = _loaded(auto_class, out)
    with torch.no_grad():
        ours = model({**batch, "attention_mask": real})
        expected = theirs(**batch)
    if task == "kg_ner":
        assert theirs.config.id2label == dict(enumerate(record["label_names"]))
        _assert_close(ours.logits, expected.logits, real)
    else:
        _assert_close(ours.start_logits, expected.start_logits, real)
        _assert_close(ours.end_logits, expected.end_logits, real)
