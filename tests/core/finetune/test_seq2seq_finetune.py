"""BART/T5 fine-tuning: BART's classification head (parity with transformers'
Bart/T5ForSequenceClassification) and T5's text-to-text mode (label generation, exact
match), through the recipe, save/load, predict and `ptm finetune model=<seq2seq final>`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.checkpoints import fill_shared_tensors
from ptm_core.checkpoints.hf import bart, t5
from ptm_core.encoders import build_encoder_decoder
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.recipe import finetune_seq2seq, load_finetuned, predict
from ptm_core.finetune.seq2seq import (
    Seq2SeqClassifier,
    load_seq2seq_tokenizer,
    shift_right,
)
from ptm_core.finetune.task_data import read_task
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.finetune.text_to_text import (
    TextToTextFeaturizer,
    TextToTextModel,
    evaluate_text_to_text,
    exact_match_metrics,
)
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

transformers = pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[3]
VOCAB = REPO / "data_specs/text_corpus/sample-vocab.txt"


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _randomise(model: torch.nn.Module) -> None:
    # Norm weights start at 1 and biases at 0: perturb everything so the map is checked.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=g))


def _eos_rows(eos: int, pad: int, vocab: int = 97) -> tuple[torch.Tensor, torch.Tensor]:
    """Three right-padded rows, each with two end tokens (a sentence pair), lengths 11/8/6."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    for row, length in enumerate((11, 8, 6)):
        ids[row, 3] = eos
        ids[row, length - 1] = eos
        ids[row, length:] = pad
        mask[row, length:] = 0
    return ids, mask


def _copy_head(ours: Seq2SeqClassifier, hf_head: torch.nn.Module) -> None:
    ours.head.load_state_dict(
        {
            f"{name}.{p}": getattr(getattr(hf_head, name), p)
            for name in ("dense", "out_proj")
            for p in ("weight", "bias")
        }
    )


def test_bart_classifier_matches_bart_for_sequence_classification() -> None:
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=97,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=40,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        num_labels=3,
    )
    hf = transformers.BartForSequenceClassification(config).eval()
    _randomise(hf)
    ptm_config = bart.hf_config_to_seq2seq(hf.config.to_dict(), source="test")
    seq2seq = EncoderDecoderModel(ptm_config)
    state = bart.hf_bart_to_ptm(dict(hf.model.state_dict()), ptm_config)
    seq2seq.load_state_dict(fill_shared_tensors(seq2seq, state))
    ours = Seq2SeqClassifier(seq2seq, "classification", 3, dropout=0.0).eval()
    _copy_head(ours, hf.classification_head)
    ids, mask = _eos_rows(config.eos_token_id, config.pad_token_id)
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours({"input_ids": ids, "attention_mask": mask, "labels": labels})
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=0)
    assert got.loss is not None
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=0)


def test_t5_classifier_matches_t5_for_sequence_classification() -> None:
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=97,
        d_model=32,
        d_kv=8,
        num_heads=4,
        num_layers=2,
        num_decoder_layers=2,
        d_ff=64,
        dropout_rate=0.0,
        classifier_dropout=0.0,
        decoder_start_token_id=0,
        num_labels=2,
    )
    hf = transformers.T5ForSequenceClassification(config).eval()
    _randomise(hf)
    ptm_config = t5.hf_config_to_seq2seq(hf.config.to_dict(), source="test")
    seq2seq = EncoderDecoderModel(ptm_config)
    body = {k: v for k, v in hf.transformer.state_dict().items()}
    state = t5.hf_t5_to_ptm(body, ptm_config)
    seq2seq.load_state_dict(fill_shared_tensors(seq2seq, state))
    ours = Seq2SeqClassifier(seq2seq, "classification", 2, dropout=0.0).eval()
    _copy_head(ours, hf.classification_head)
    ids, mask = _eos_rows(config.eos_token_id, config.pad_token_id)
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask).logits
        got = ours({"input_ids": ids, "attention_mask": mask}).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_classifier_reads_each_rows_last_end_token_and_rejects_rows_without_one() -> None:
    model = build_encoder_decoder(
        50,
        hidden_size=16,
        encoder_layers=1,
        decoder_layers=1,
        num_heads=2,
        max_positions=16,
        dropout=0.0,
    )
    classifier = Seq2SeqClassifier(model, "classification", 2, dropout=0.0).eval()
    ids = torch.tensor([[5, 6, 2, 7, 2, 1], [5, 2, 8, 1, 1, 1]])
    mask = (ids != 1).long()
    with torch.no_grad():
        both = classifier({"input_ids": ids, "attention_mask": mask}).logits
        second = classifier({"input_ids": ids[1:, :3], "attention_mask": mask[1:, :3]}).logits
    # Row 1 has a single end token at position 1 and is otherwise padding/continuation:
    # the causal decoder state there does not depend on later tokens.
    torch.testing.assert_close(both[1:], second, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="no end token"):
        classifier({"input_ids": torch.tensor([[5, 6, 7]])})
    with pytest.raises(ValueError, match="not 'tagging'"):
        Seq2SeqClassifier(model, "tagging", 3)


def test_shift_right_puts_the_start_token_first_and_pads_ignored_positions() -> None:
    labels = torch.tensor([[7, 8, 2, -100], [9, 2, -100, -100]])
    assert shift_right(labels, 0, 1).tolist() == [[0, 7, 8, 2], [0, 9, 2, 1]]


# --------------------------------------------------------------------------- ptm models


def _tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)


def _tiny(tokenizer: WordPieceTokenizer, layout: str = "t5") -> EncoderDecoderModel:
    torch.manual_seed(0)
    vocab = tokenizer.vocab_info
    extra: dict[str, Any] = (
        dict(
            position_encoding="t5_buckets",
            norm_type="rmsnorm",
            norm_position="pre",
            layer_norm_eps=1e-6,
            position_offset=0,
            bias=False,
            attention_scale=False,
            embedding_layer_norm=False,
            scale_decoder_output=True,
            initialization="t5",
            activation="relu",
        )
        if layout == "t5"
        else {}
    )
    return build_encoder_decoder(
        tokenizer.vocab_size,
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
        dropout=0.0,
        pad_token_id=vocab.pad_id,
        bos_token_id=vocab.cls_id,
        eos_token_id=vocab.sep_id,
        decoder_start_token_id=vocab.cls_id,
        **extra,
    )


PLACES = ["cambridge", "london", "oxford", "paris", "warsaw", "france"]


def _task(tmp_path: Path) -> TaskSpec:
    """A single-sentence task decided by the place: fits in a few dozen steps."""
    rows = ["sentence\tlabel"]
    for person in ("alan turing", "marie curie"):
        for i, place in enumerate(PLACES):
            rows.append(f"{person} worked at {place} .\t{'positive' if i % 2 else 'negative'}")
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return TaskSpec.from_mapping(
        {
            "name": "places",
            "kind": "classification",
            "format": "glue",
            "train": str(path),
            "dev": str(path),
            "text_fields": None,
            "label_field": "label",
            "max_length": 16,
            "batch_size": 6,
            "eval_batch_size": 5,
            "metric": "accuracy",
        }
    )


def _trainer(tmp_path: Path, steps: int = 80) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=steps,
        learning_rate=1e-2,
        warmup_ratio=0.1,
        log_every=20,
        save_every=1000,
        device="cpu",
        precision="fp32",
        progress=False,
    )


def test_text_to_text_batches_hold_label_targets_and_shifted_decoder_inputs(
    tmp_path: Path,
) -> None:
    tokenizer = _tokenizer()
    model = TextToTextModel(_tiny(tokenizer), tokenizer, ["negative", "positive"])
    task = _task(tmp_path)
    data = read_task(task, "train", tokenizer)
    featurizer = TextToTextFeaturizer.for_model(model, tokenizer, task.max_length)
    batch = featurizer.featurize(data.rows[:3])
    sep, cls = tokenizer.vocab_info.sep_id, tokenizer.vocab_info.cls_id
    for row, example in enumerate(data.rows[:3]):
        target = [*tokenizer.tokenize_ids(data.label_names[example.label]), sep]
        assert batch["labels"][row, : len(target)].tolist() == target
        assert (batch["labels"][row, len(target) :] == -100).all()
        assert batch["decoder_input_ids"][row, : len(target)].tolist() == [cls, *target[:-1]]
    assert batch["class_labels"].tolist() == [e.label for e in data.rows[:3]]
    assert batch["input_ids"].shape[0] == 3 and "labels" in batch


def test_text_to_text_scores_exact_matches_and_counts_other_text_as_wrong(tmp_path: Path) -> None:
    tokenizer = _tokenizer()
    model = TextToTextModel(_tiny(tokenizer), tokenizer, ["negative", "positive"])
    task = _task(tmp_path)
    data = read_task(task, "dev", tokenizer)
    gold = [e.label for e in data.rows]
    neg, pos = model.label_ids
    # Right, right, then a label word without its end token and a longer text: both wrong.
    answers = [model.label_ids[g] for g in gold]
    answers[2] = (neg if gold[2] == 0 else pos)[:-1]
    answers[3] = [*pos[:-1], *neg]
    queue = list(answers)

    def fake(input_ids: torch.Tensor, mask: torch.Tensor | None = None) -> list[list[int]]:
        return [queue.pop(0) for _ in range(input_ids.shape[0])]

    model.predict_ids = fake  # type: ignore[method-assign]
    metrics, predicted = evaluate_text_to_text(model, task, data)
    assert predicted[:2] == gold[:2] and predicted[2] == -1 and predicted[3] == -1
    assert metrics["accuracy"] == pytest.approx((len(gold) - 2) / len(gold))
    assert metrics["invalid_rate"] == pytest.approx(2 / len(gold))
    assert metrics["loss"] > 0


def test_labels_that_tokenize_alike_are_an_error() -> None:
    tokenizer = _tokenizer()
    with pytest.raises(ValueError, match="distinct"):
        TextToTextModel(_tiny(tokenizer), tokenizer, ["Positive", "positive"])


@pytest.mark.parametrize("text_to_text", [True, False], ids=["text_to_text", "head"])
def test_finetune_fits_the_task_and_final_dir_predicts_the_same(
    tmp_path: Path, text_to_text: bool
) -> None:
    tokenizer = _tokenizer()
    task = _task(tmp_path)
    result = finetune_seq2seq(
        task,
        model=_tiny(tokenizer, "t5" if text_to_text else "bart"),
        tokenizer=tokenizer,
        trainer=_trainer(tmp_path),
        text_to_text=text_to_text,
    )
    assert result.final_metrics["dev/accuracy"] == 1.0
    # The fine-tuning report: every dev example on the diagonal, no "(not a label)" text.
    labels = json.loads((result.output_dir / "dev_labels.json").read_text())
    confusion = labels["confusion"]
    assert labels["labels"][-1] != "(not a label)"
    assert sum(confusion[i][i] for i in range(len(confusion))) == sum(map(sum, confusion))
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["seq2seq"] == ("text_to_text" if text_to_text else "classification_head")
    # final/ is also a plain seq2seq checkpoint.
    EncoderDecoderModel.from_pretrained(result.encoder_dir)
    model, _tok, loaded_task, _ = load_finetuned(result.encoder_dir)
    assert isinstance(model, TextToTextModel if text_to_text else Seq2SeqClassifier)
    assert loaded_task.name == "places"
    metrics, predictions = predict(result.encoder_dir)
    assert metrics["accuracy"] == 1.0
    data = read_task(task, "dev", tokenizer)
    assert predictions == [data.label_names[e.label] for e in data.rows]


@pytest.mark.integration
def test_ptm_finetune_accepts_a_seq2seq_final_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.cli import main

    pre = tmp_path / "pre"
    pretrain = [
        "pretrain",
        "experiment=t5_tiny",
        "trainer.max_steps=2",
        f"trainer.output_dir={pre}",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "data.max_length=64",
        "trainer.progress=false",
    ]
    assert main(pretrain) == 0, capsys.readouterr().err
    final = pre / "final"  # the encoder-decoder, and the tokenizer in final/tokenizer/
    assert (final / "tokenizer" / "vocab.txt").is_file()
    assert load_seq2seq_tokenizer(final).vocab_info.sep_id == (
        EncoderDecoderModel.from_pretrained(final).config.eos_token_id
    )
    for switch in ("false", "true"):
        out = tmp_path / f"ft-{switch}"
        code = main(
            [
                "finetune",
                "task=kg_pair",
                f"model={final}",
                f"finetune.text_to_text={switch}",
                "trainer.max_steps=3",
                f"trainer.output_dir={out}",
                "trainer.progress=false",
            ]
        )
        assert code == 0, capsys.readouterr().err
        evaluation = json.loads((out / "eval.json").read_text())
        assert 0.0 <= evaluation["dev/accuracy"] <= 1.0
        record = json.loads((out / "final" / "task.json").read_text())
        mode = "text_to_text" if switch == "true" else "classification_head"
        assert record["seq2seq"] == mode
        assert record["provenance"]["init_from"] == str(final)
        metrics, predictions = predict(out / "final")
        assert metrics["accuracy"] == pytest.approx(evaluation["dev/accuracy"])
        assert len(predictions) == 68 and all(isinstance(p, str) for p in predictions)


def test_switches_that_do_not_fit_the_model_are_errors(tmp_path: Path) -> None:
    from ptm_core.encoders import bert_encoder
    from ptm_core.finetune.recipe import finetune

    tokenizer = _tokenizer()
    task = _task(tmp_path)
    with pytest.raises(ValueError, match=r"set finetune\.feature_based=false"):
        finetune(
            task,
            encoder=_tiny(tokenizer),
            tokenizer=tokenizer,
            trainer=_trainer(tmp_path),
            feature_based=True,
        )
    with pytest.raises(ValueError, match=r"set finetune\.text_to_text=false"):
        finetune(
            task,
            encoder=bert_encoder(
                vocab_size=tokenizer.vocab_size, hidden_size=16, num_layers=1, num_heads=2
            ),
            tokenizer=tokenizer,
            trainer=_trainer(tmp_path),
            text_to_text=True,
        )
    tagging = TaskSpec.from_mapping({**task.to_dict(), "kind": "tagging", "format": "conll"})
    with pytest.raises(ValueError, match="GLUE-format classification or regression"):
        finetune_seq2seq(
            tagging, model=_tiny(tokenizer), tokenizer=tokenizer, trainer=_trainer(tmp_path)
        )


def test_exact_match_metrics_score_texts_that_are_no_label_as_wrong() -> None:
    from sklearn.metrics import f1_score, matthews_corrcoef

    gold = [0, 1, 1, 0, 1, 0]
    # Without invalid texts: the task's usual classification metrics.
    assert exact_match_metrics(gold, gold, 2) == {
        "accuracy": 1.0,
        "f1": 1.0,
        "f1_macro": 1.0,
        "matthews_corrcoef": 1.0,
        "invalid_rate": 0.0,
    }
    # Only invalid texts: nothing right, and no correlation (not -1).
    nothing = exact_match_metrics([-1] * 6, gold, 2)
    assert nothing["accuracy"] == 0.0 and nothing["matthews_corrcoef"] == 0.0
    assert nothing["f1"] == 0.0 and nothing["invalid_rate"] == 1.0
    # Mixed: an invalid text is a missed positive for class 1 (recall 2/3, precision 1).
    mixed = exact_match_metrics([0, 1, -1, -1, 1, 0], gold, 2)
    assert mixed["accuracy"] == pytest.approx(4 / 6)
    assert mixed["f1"] == pytest.approx(f1_score(gold, [0, 1, 0, 0, 1, 0]))
    assert mixed["f1"] == pytest.approx(0.8)
    assert mixed["matthews_corrcoef"] == pytest.approx(matthews_corrcoef(gold, [0, 1, 2, 2, 1, 0]))
    assert mixed["invalid_rate"] == pytest.approx(2 / 6)


def test_hf_seq2seq_folders_are_detected_and_a_missing_wordpiece_tokenizer_is_explained(
    tmp_path: Path,
) -> None:
    from flows.runner import family_of_folder

    config = transformers.T5Config(
        vocab_size=97, d_model=16, d_kv=8, num_heads=2, num_layers=1, d_ff=32
    )
    transformers.T5ForConditionalGeneration(config).save_pretrained(tmp_path / "t5")
    # A Hugging Face T5 folder (no "ptm_model") is the seq2seq family's: its recognizes hook.
    found = family_of_folder(tmp_path / "t5")
    assert found is not None and found.name == "seq2seq"
    assert family_of_folder(tmp_path) is None
    with pytest.raises(ValueError, match=r"no tokenizer in the folder or in its tokenizer/"):
        load_seq2seq_tokenizer(tmp_path / "t5")
    # A WordPiece vocabulary whose [PAD]/[SEP] are not the model's pad/end ids is refused.
    tokenizer = _tokenizer()
    tokenizer.save(tmp_path / "t5")
    model = EncoderDecoderModel.from_pretrained(tmp_path / "t5")
    with pytest.raises(ValueError, match="eos_token_id=1 but the tokenizer's"):
        finetune_seq2seq(
            _task(tmp_path), model=model, tokenizer=tokenizer, trainer=_trainer(tmp_path)
        )
