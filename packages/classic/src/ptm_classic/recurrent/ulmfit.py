"""ULMFiT's classifier (Howard & Ruder, 2018): a pre-trained AWD-LSTM encoder with concat
pooling and a BN/dropout/linear head, fine-tuned with the paper's techniques.

The techniques are the core Trainer's switches (:mod:`ptm_core.training.finetuning`):
``layer_lr_decay=0.3846`` (= 1/2.6, discriminative fine-tuning), ``schedule=
slanted_triangular`` and ``unfreeze_every=<steps>`` (gradual unfreezing). They reach this
model through the :class:`~ptm_core.training.finetuning.LayerGroups` hook: depth 0 is the
token table, depth ``l + 1`` LSTM layer ``l``, the top the classifier head (fastai's
``awd_lstm_clas_split``).

:func:`finetune_ulmfit` runs it on a classification task of ``ptm finetune``'s format
(GLUE TSV/JSONL) and writes a ``final/`` that :func:`load_ulmfit_classifier` reads.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from torch.nn.utils import parametrize

from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMLanguageModel
from ptm_classic.recurrent.lstm_peft import attach_lstm_peft, lora_targets
from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, read_json_object
from ptm_core.finetune.model import TASK_FORMAT_VERSION
from ptm_core.peft import PeftConfig

MODEL_TYPE = "ulmfit_classifier"


class ConcatPoolingHead(nn.Module):
    """ULMFiT's classifier head (Howard & Ruder, 2018, section 3.3, "concat pooling").

    ``h_c = [h_T, maxpool(H), meanpool(H)]`` over the real (unpadded) time steps of the
    last layer, then blocks of BatchNorm -> dropout -> Linear (ReLU between blocks):
    ``3D -> hidden -> num_labels`` (the paper's 50 hidden units).

    Args:
        input_size: ``D``, the encoder's output size.
        num_labels: classes.
        hidden_size: the intermediate layer (50).
        dropouts: dropout before each linear layer (fastai: 0.4, 0.1).

    Shapes:
        ``hidden (B, T, D)``, ``mask (B, T)`` (True on real tokens, right padded) ->
        ``(B, num_labels)``.
    """

    def __init__(
        self,
        input_size: int,
        num_labels: int,
        hidden_size: int = 50,
        dropouts: Sequence[float] = (0.4, 0.1),
    ) -> None:
        super().__init__()
        sizes = [3 * input_size, hidden_size, num_labels]
        if len(dropouts) != len(sizes) - 1:
            raise ValueError(f"dropouts needs {len(sizes) - 1} values, got {list(dropouts)}")
        blocks: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            blocks += [nn.BatchNorm1d(n_in), nn.Dropout(dropouts[i]), nn.Linear(n_in, n_out)]
            if i < len(sizes) - 2:
                blocks.append(nn.ReLU())
        self.layers = nn.Sequential(*blocks)

    @staticmethod
    def pool(hidden: Tensor, mask: Tensor) -> Tensor:
        """``[last, max, mean]`` over the real time steps: ``(B, T, D) -> (B, 3D)``."""
        mask = mask.bool()
        lengths = mask.sum(1).clamp(min=1)  # (B,)
        last = hidden[torch.arange(hidden.size(0), device=hidden.device), lengths - 1]
        keep = mask.unsqueeze(-1)
        maxed = hidden.masked_fill(~keep, float("-inf")).max(1).values
        mean = (hidden * keep).sum(1) / lengths.unsqueeze(-1).to(hidden.dtype)
        return torch.cat([last, maxed, mean], dim=-1)

    def forward(self, hidden: Tensor, mask: Tensor) -> Tensor:
        return self.layers(self.pool(hidden, mask))


@dataclass
class ClassifierOutput:
    """``logits (B, C)``; ``loss`` when labels were given; ``metrics`` for the Trainer."""

    logits: Tensor
    loss: Tensor | None = None
    metrics: dict[str, Tensor] = field(default_factory=dict)


class ULMFiTClassifier(nn.Module):
    """AWD-LSTM encoder + :class:`ConcatPoolingHead` (ULMFiT stage 3).

    Paper: Howard & Ruder, 2018, section 3.3. Implements the ``LayerGroups`` hook of
    :mod:`ptm_core.training.finetuning` (depths: token table 0, LSTM layer ``l`` at
    ``l + 1``, head ``num_layers + 1``), so discriminative rates and gradual unfreezing
    follow the paper's layer groups. Documents are read in one pass (the tasks here are
    short); the paper splits long ones into BPTT windows.

    Args:
        encoder: a (pre-trained) :class:`AWDLSTMEncoder`.
        num_labels: classes.
        hidden_size: head's intermediate size.
        dropouts: head dropouts.
        label_names: class names, recorded in the saved config.

    Forward:
        ``batch`` with ``input_ids (B, T)``, ``attention_mask (B, T)`` and optional
        ``labels (B,)`` -> :class:`ClassifierOutput`.
    """

    def __init__(
        self,
        encoder: AWDLSTMEncoder,
        num_labels: int,
        *,
        hidden_size: int = 50,
        dropouts: Sequence[float] = (0.4, 0.1),
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = ConcatPoolingHead(
            encoder.config.layer_sizes()[-1][1], num_labels, hidden_size, dropouts
        )
        self.head_config = {
            "num_labels": num_labels,
            "hidden_size": hidden_size,
            "dropouts": list(dropouts),
            "label_names": list(label_names or []),
        }

    # LayerGroups hook (ptm_core.training.finetuning).
    def depth_top(self) -> int:
        """The head's depth: ``num_layers + 1``."""
        return len(self.encoder.layers) + 1

    def parameter_depth(self, name: str) -> int:
        """0 = ``encoder.embeddings``, ``l + 1`` = ``encoder.layers.<l>``, top = ``head``.

        With an adapter (:mod:`~ptm_classic.recurrent.lstm_peft`): a layer's LoRA/IA3 share
        its depth, a soft prompt sits with the embeddings (0), a trained initial state of
        layer ``l`` at ``l + 1``; a prompt/prefix wrapper's ``encoder.encoder.`` is the
        encoder."""
        if name.startswith("encoder.encoder."):
            name = name.removeprefix("encoder.")
        if name == "encoder.prompt":
            return 0
        if name.startswith("encoder.prefix_state_"):
            return int(name.split(".")[2]) + 1
        if name.startswith("head."):
            return self.depth_top()
        if name.startswith("encoder.embeddings."):
            return 0
        if name.startswith("encoder.layers."):
            return int(name.split(".")[2]) + 1
        raise ValueError(
            f"parameter {name!r} of ULMFiTClassifier has no layer group; give it one in "
            "ptm_classic/recurrent/ulmfit.py:ULMFiTClassifier.parameter_depth"
        )

    def forward(self, batch: dict[str, Tensor]) -> ClassifierOutput:
        input_ids = batch["input_ids"]
        mask = batch.get("attention_mask")
        if mask is None:
            mask = torch.ones_like(input_ids, dtype=torch.bool)
        with parametrize.cached():  # an adapter's weights, computed once per call
            encoded = self.encoder(input_ids)
        logits = self.head(encoded.raw_outputs[-1].float(), mask)
        labels = batch.get("labels")
        if labels is None:
            return ClassifierOutput(logits)
        loss = F.cross_entropy(logits, labels)
        accuracy = (logits.argmax(-1) == labels).float().mean()
        return ClassifierOutput(logits, loss, {"accuracy": accuracy.detach()})


def save_ulmfit_classifier(
    model: ULMFiTClassifier,
    directory: str | Path,
    *,
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write ``config.json`` (encoder and head) + ``model.safetensors`` atomically."""
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    with atomic_directory(directory) as tmp:
        write_classifier_config(model, tmp)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        for write in extra_writers:
            write(tmp)
    return Path(directory)


def write_classifier_config(model: ULMFiTClassifier, directory: Path) -> None:
    """``config.json`` of a classifier ``final/``: the encoder's config and the head's."""
    config = {
        "model_type": MODEL_TYPE,
        "encoder": model.encoder.config.to_dict(),
        "head": model.head_config,
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def load_ulmfit_classifier(directory: str | Path) -> ULMFiTClassifier:
    """Load a ``final/`` written by :func:`save_ulmfit_classifier` (eval mode), or an
    adapter ``final/`` of a ``finetune.peft`` run (its base AWD-LSTM + adapter + head).

    Raises:
        CheckpointError: missing or damaged files, or a folder of another model; for an
            adapter, a moved or changed base.
    """
    directory = Path(directory)
    config = read_json_object(
        directory / "config.json", "a ULMFiT final/ holds config.json and model.safetensors"
    )
    if config.get("model_type") != MODEL_TYPE:
        raise CheckpointError(
            f"{directory / 'config.json'}: model_type={config.get('model_type')!r}, expected "
            f"{MODEL_TYPE!r}; an AWD-LSTM language model loads with "
            "AWDLSTMLanguageModel.from_pretrained"
        )
    head = config["head"]
    encoder_config = AWDLSTMConfig.from_dict(config["encoder"], source=str(directory))
    record_path = directory / "task.json"
    record = read_json_object(record_path, "") if record_path.is_file() else {}

    def build(encoder: AWDLSTMEncoder) -> ULMFiTClassifier:
        return ULMFiTClassifier(
            encoder,
            int(head["num_labels"]),
            hidden_size=int(head["hidden_size"]),
            dropouts=[float(p) for p in head["dropouts"]],
            label_names=head.get("label_names") or None,
        )

    if "peft" in record:
        return load_ulmfit_adapter(directory, record, encoder_config, build).eval()
    model = build(AWDLSTMEncoder(encoder_config))
    weights = directory / "model.safetensors"
    try:
        state = load_file(str(weights))
        model.load_state_dict(state)
    except FileNotFoundError:
        raise CheckpointError(f"{weights}: missing; copy the whole final/ directory") from None
    except Exception as exc:
        raise CheckpointError(
            f"{weights}: cannot load ({type(exc).__name__}: {exc}); restore the file or "
            "fine-tune again"
        ) from None
    return model.eval()


def load_ulmfit_adapter(
    directory: Path,
    record: dict[str, Any],
    encoder_config: AWDLSTMConfig,
    build: Callable[[AWDLSTMEncoder], ULMFiTClassifier],
) -> ULMFiTClassifier:
    """An adapter ``final/``: the base AWD-LSTM ``task.json`` points at (checked against
    its fingerprint and ``config.json``'s encoder), the adapter and the head."""
    from ptm_core.finetune.model import TASK_HEAD_FILE, load_head_state
    from ptm_core.finetune.peft_folder import check_base, load_adapter, read_peft_config

    peft = read_peft_config(directory, record)
    base = check_base(directory, record)
    lm = AWDLSTMLanguageModel.from_pretrained(base)
    if lm.config != encoder_config:
        raise CheckpointError(
            f"{directory / 'config.json'}: its encoder differs from the base {base}'s "
            "config.json; copy config.json and task.json from the same run"
        )
    with torch.random.fork_rng(devices=[]):  # the fresh head and adapter are overwritten
        model = build(lm.encoder)
        attach_lstm_peft(model, peft)
    load_adapter(model, directory, peft)
    load_head_state(model.head, directory / TASK_HEAD_FILE, record)
    return model


def is_awd_lstm_directory(directory: str | Path) -> bool:
    """Whether ``directory`` holds an AWD-LSTM language model ``final/``."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("model_type") == "awd_lstm"
    except (ValueError, AttributeError):
        return False


def finetune_ulmfit(
    task: Any,
    *,
    model_dir: str | Path,
    trainer: Any,
    seed: int = 0,
    random_init: bool = False,
    hidden_size: int = 50,
    dropouts: Sequence[float] = (0.4, 0.1),
    num_workers: int = 0,
    provenance: dict[str, Any] | None = None,
    peft: PeftConfig | None = None,
) -> Any:
    """Fine-tune a ULMFiT classifier on a classification task (ULMFiT stage 3).

    The ULMFiT switches are the trainer's (``trainer.schedule=slanted_triangular``,
    ``trainer.layer_lr_decay=0.3846``, ``trainer.unfreeze_every=<steps per epoch>``).

    Args:
        task: a :class:`~ptm_core.finetune.task_spec.TaskSpec` of kind ``classification``.
        model_dir: an AWD-LSTM ``final/`` (``ptm pretrain experiment=awd_lstm_tiny``); its
            tokenizer is used.
        trainer: a :class:`~ptm_core.training.TrainerConfig`.
        seed: batch order seed.
        random_init: keep the architecture, re-initialise the encoder (the baseline).
        hidden_size: the head's intermediate size.
        dropouts: the head's dropouts.
        num_workers: DataLoader processes.
        provenance: facts recorded in ``task.json``.
        peft: a parameter-efficient method (:mod:`~ptm_classic.recurrent.lstm_peft`): the
            encoder stays frozen, the adapter and the head train, and ``final/`` holds only
            those beside a pointer to ``model_dir``.

    Returns:
        :class:`~ptm_core.finetune.scoring.FinetuneResult`; ``final/`` holds the classifier
        (or the adapter and the head), the tokenizer and ``task.json``; ``eval.json`` the
        dev metrics.
    """
    from ptm_core.atomic import atomic_write_text
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.finetune.model import TASK_JSON
    from ptm_core.finetune.scoring import train_task
    from ptm_core.finetune.task_data import read_task
    from ptm_core.seeding import derive_seed

    if task.kind != "classification":
        raise ValueError(
            f"task {task.name}: the ULMFiT classifier does {task.kind!r} only as "
            "'classification'; pick a classification task (e.g. task=gain_sentiment)"
        )
    task.check_files()
    lm = AWDLSTMLanguageModel.from_pretrained(model_dir)
    tokenizer = load_task_tokenizer(model_dir)
    if tokenizer.vocab_size != lm.config.vocab_size:
        raise CheckpointError(
            f"{model_dir}: the tokenizer has {tokenizer.vocab_size} ids, the model "
            f"{lm.config.vocab_size}; copy the tokenizer files of the same run into it"
        )
    train = read_task(task, "train", tokenizer)
    dev = read_task(task, "dev", tokenizer, train.label_names)
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    encoder = AWDLSTMEncoder(lm.config) if random_init else lm.encoder
    model = ULMFiTClassifier(
        encoder,
        len(train.label_names),
        hidden_size=hidden_size,
        dropouts=dropouts,
        label_names=train.label_names,
    )
    if peft is not None and peft.enabled:
        attach_lstm_peft(model, peft)
    else:
        peft = None
    # task.json in the fine-tuned format (ptm_core.finetune.model.read_task_json), so that
    # `ptm evaluate` and `predict` (ptm_core.finetune.recipe.load_finetuned) read it.
    record = {
        "ptm_task": TASK_FORMAT_VERSION,
        "kind": task.kind,
        "num_labels": len(train.label_names),
        "task": task.to_dict(),
        "ulmfit": True,
        "label_names": train.label_names,
        **({"provenance": provenance} if provenance else {}),
    }

    def save_final(directory: Path) -> None:
        if peft is not None:
            from ptm_core.finetune.peft_folder import save_adapter_folder

            save_adapter_folder(
                model,
                directory,
                config=peft,
                base=model_dir,
                record=record,
                extra_writers=[tokenizer.save],
                write_config=lambda path: write_classifier_config(model, path),
            )
            return

        def write_record(path: Path) -> None:
            atomic_write_text(path / TASK_JSON, json.dumps(record, indent=2) + "\n")

        save_ulmfit_classifier(model, directory, extra_writers=[tokenizer.save, write_record])

    return train_task(
        model,
        task,
        train,
        dev,
        trainer,
        save_final=save_final,
        seed=seed,
        num_workers=num_workers,
        group_by_length=False,
        peft=peft,
        print_trainable=True,
    )


def finetune_awd_lstm(run: Any) -> Any:
    """The awd_lstm family's ``finetune`` hook (``ptm finetune task=gain_sentiment
    model=<an AWD-LSTM final/>``): ULMFiT's classifier (concat pooling, BN/dropout/linear
    head) on ``run.init_from``. The ULMFiT switches are the trainer's
    (``trainer.schedule=slanted_triangular trainer.layer_lr_decay=0.3846
    trainer.unfreeze_every=<steps>``).

    Args:
        run: a :class:`~ptm_core.families.runner.FinetuneRun`; ``settings`` an
            :class:`~ptm_classic.settings.AWDLSTMSettings` (``task``, ``finetune``).

    Raises:
        ValueError: no ``init_from``, or a ``finetune`` switch the classifier does not have.
    """
    from ptm_core.finetune.task_spec import TaskSpec

    settings = run.settings
    task = TaskSpec.from_mapping(settings.task)
    task.check_files()  # before any model is loaded
    if not run.init_from:
        raise ValueError(
            "init_from: the ULMFiT classifier fine-tunes a pre-trained AWD-LSTM; give "
            "model=<the final/ of ptm pretrain experiment=awd_lstm_tiny>"
        )
    options = settings.finetune
    peft = PeftConfig.from_options(options)
    if peft.enabled:
        check_ulmfit_peft(peft, random_init=options.random_init, trainer=run.trainer)
    unsupported = [key for key in ("feature_based", "text_to_text") if getattr(options, key)]
    if unsupported:
        raise ValueError(
            f"finetune.{unsupported[0]}=true is not supported for an AWD-LSTM model "
            f"({run.init_from}); drop it (the ULMFiT classifier fine-tunes the whole encoder)"
        )
    return finetune_ulmfit(
        task,
        model_dir=run.init_from,
        trainer=run.trainer,
        seed=run.seed,
        random_init=options.random_init,
        num_workers=options.num_workers,
        provenance={"init_from": str(run.init_from), "random_init": options.random_init},
        peft=peft,
    )


def check_ulmfit_peft(peft: PeftConfig, *, random_init: bool, trainer: Any) -> None:
    """Refuse, in one line naming the setting, what an adapter on ULMFiT cannot do.

    Gradual unfreezing would unfreeze the frozen AWD-LSTM; discriminative rates
    (``trainer.layer_lr_decay``) and the slanted triangular schedule stay: each layer's
    adapter takes its layer's rate (the prompt the embeddings', layer ``l``'s initial state
    layer ``l``'s).
    """
    where = f"finetune.peft={peft.method}"
    if random_init:
        raise ValueError(
            f"{where} trains an adapter on the pre-trained AWD-LSTM; set finetune.random_init=false"
        )
    if trainer.unfreeze_every > 0:
        raise ValueError(
            f"{where}: trainer.unfreeze_every (ULMFiT's gradual unfreezing) would unfreeze the "
            "frozen AWD-LSTM; set trainer.unfreeze_every=0 (the adapter trains from the start)"
        )
    if peft.method == "lora":
        lora_targets(peft)
