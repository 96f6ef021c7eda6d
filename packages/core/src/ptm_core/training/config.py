"""Trainer settings: one flat dataclass whose field names are the Hydra config keys."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import torch

from ptm_core.atomic import file_in_the_way

PRECISIONS = ("auto", "fp32", "bf16")
SCHEDULES = ("linear", "slanted_triangular")
# Experiment trackers the trainer can feed (training/loggers.py); each is an optional extra.
LOGGERS = ("tensorboard", "mlflow")
# Boolean switches of training/memory.py, training/sharding.py and compilation.
MEMORY_AND_COMPILE_SWITCHES = ("cuda_graphs", "activation_checkpointing", "fsdp")


def _fail(field: str, requirement: str, value: object) -> ValueError:
    return ValueError(f"TrainerConfig.{field} {requirement}, got {value!r}.")


@dataclass
class TrainerConfig:
    """Settings for :class:`~ptm_core.training.Trainer`.

    Args:
        output_dir: Directory for ``metrics.jsonl`` and ``checkpoints/``.
        max_steps: Number of optimizer steps to train for.
        learning_rate: Peak learning rate of the warm-up/decay schedule.
        weight_decay: AdamW decoupled weight decay (not applied to 1-d parameters).
        adam_betas: AdamW ``(beta1, beta2)``.
        adam_eps: AdamW epsilon.
        warmup_steps: Linear warm-up length in optimizer steps; wins over ``warmup_ratio``.
        warmup_ratio: Warm-up length as a fraction of ``max_steps``, used when
            ``warmup_steps`` is 0.
        gradient_accumulation_steps: Micro-batches per optimizer step.
        max_grad_norm: Clip the global gradient norm to this; ``None`` disables clipping
            (the norm is still logged).
        precision: ``"auto"`` (bf16 autocast where the hardware computes bf16 natively:
            CUDA with bf16 support, CPUs with AVX-512 BF16 or AMX; fp32 elsewhere; the
            environment variable ``PTM_PRECISION=fp32|bf16`` overrides ``auto``),
            ``"fp32"`` or ``"bf16"`` (bf16 autocast on any device). Parameters, optimizer
            state and checkpoints stay fp32 either way; see
            :mod:`ptm_core.training.precision`.
        device: ``"auto"`` (CUDA if available) or any ``torch.device`` string.
        seed: Seed for the global torch/Python/NumPy RNGs at the start of a fresh run.
        log_every: Write a metrics line every this many steps (and at the last step).
        save_every: Write a checkpoint every this many steps (and at the last step).
        keep_last: Number of newest checkpoints kept on disk.
        resume: Resume from the newest complete checkpoint in ``output_dir`` if there is one
            and the folder's fingerprint (:mod:`ptm_core.training.run_folder`) matches this
            run; ``False`` starts fresh (the old run's files are moved aside, never deleted);
            ``"force"`` resumes even when the fingerprint differs.
        progress: Show progress: a bar with rate and ETA on a terminal, else a plain log
            line every ``PTM_PROGRESS_SECONDS`` (:mod:`ptm_core.progress`).
        fused_optimizer: Use fused AdamW; ``None`` means fused wherever torch has the kernel
            for every trainable parameter (float tensors on CPU or CUDA).
        sparse_lookups: Token tables tied to an output layer add their lookups' gradient
            rows in place into that layer's dense gradient instead of building a second
            dense ``(V, D)`` one (:mod:`ptm_core.training.sparse_lookups`; the same sum up
            to float rounding; that table is 94 MB at BERT-base, and the measured
            whole-process peak falls 20-45 MB). ``None``: on in one
            eager process; ``True`` refuses ``compile``, ``fsdp`` and ``devices > 1``.
        compile: Run the training step's forward (model and loss) through ``torch.compile``;
            its backward is compiled with it (AOTAutograd). The optimizer step stays eager
            (fused AdamW is already one kernel per group).
        cuda_graphs: With ``compile``, compile in ``mode="reduce-overhead"`` so each step
            replays CUDA graphs (fewer kernel launches; fixed batch shapes pay best). CUDA
            only: the trainer refuses it on other devices and with ``fsdp``.
        attention_backend: The kernel every attention module runs (Hydra:
            ``attention.backend``): ``"auto"`` (SDPA for padding and causal masks; flex
            attention with a block-sparse mask for the structured kinds on CUDA),
            ``"flex"``, ``"sdpa"`` or ``"dense"`` (the boolean reference path). See
            :class:`~ptm_core.modules.execution.ExecutionSettings`.
        unpad: Unpadding (Hydra: ``attention.unpad``): ``"auto"`` (drop padding after the
            embeddings when a batch has enough of it to pay), ``"on"`` or ``"off"``. See
            :mod:`~ptm_core.encoders.unpadding`.
        structured_masks: Have the mask producers describe masks as
            :class:`~ptm_core.modules.attention_structure.AttentionStructure` instead of
            ``[B, L, L]`` tensors (Hydra: ``attention.structured_masks``): UniLM's objective,
            packed pre-training rows and K-BERT's visible matrix. The pipelines that build
            those producers read it (:func:`ptm_core.pretraining.pretrain`, K-BERT's
            ``finetune_kbert``); a producer built by hand takes its own flag.
        activation_checkpointing: Recompute every Transformer layer's forward in backward
            instead of storing its activations (less memory, about one more forward of
            compute; same gradients, dropout included).
        fsdp: Shard parameters, gradients and optimizer state across the processes with
            FSDP2 (``torch.distributed.fsdp.fully_shard`` on each Transformer layer, then
            the whole model) instead of replicating them with DDP. Needs several processes
            (``devices`` > 1 / torchrun). Checkpoints are then written sharded through
            ``torch.distributed.checkpoint``; ``final/`` stays a normal ptm checkpoint.
        devices: Processes to train with. The trainer itself joins whatever process group
            ``torchrun`` set up (``WORLD_SIZE`` > 1); the ``pretrain`` flow reads this to
            launch ``torchrun --nproc-per-node=devices`` for you.
        distributed_backend: ``"auto"`` (NCCL on CUDA, Gloo on CPU), ``"nccl"`` or ``"gloo"``.
        schedule: ``"linear"`` (BERT: linear warm-up, then linear decay to 0) or
            ``"slanted_triangular"`` (ULMFiT, Howard & Ruder 2018, eq. 3: a short linear
            rise over ``stlr_cut_frac`` of the steps, then a long linear fall to
            ``1 / stlr_ratio`` of the peak; ``warmup_*`` are not used).
        stlr_cut_frac: ULMFiT's ``cut_frac``: the share of steps spent rising.
        stlr_ratio: ULMFiT's ``ratio``: how much smaller the lowest rate is than the peak.
        layer_lr_decay: Discriminative (layer-wise) learning rates: the head trains at
            ``learning_rate`` and every depth below it at ``layer_lr_decay`` times the
            rate above (ELECTRA: 0.8; ULMFiT's ``1 / 2.6`` = 0.385). ``None`` = one rate
            for every parameter. Needs a model with an ``encoder`` whose ``layers`` are
            numbered (every fine-tuning model).
        unfreeze_every: Gradual unfreezing (ULMFiT): 0 = off; otherwise only the head
            trains at first and one more depth, top down, is unfrozen every this many
            optimizer steps. It depends only on the step, so resume stays exact.
        loggers: Experiment trackers fed every ``metrics.jsonl`` line: any of
            ``"tensorboard"`` (``pip install "ptm-core[tensorboard]"``) and ``"mlflow"``
            (``pip install "ptm-core[mlflow]"``). Empty = ``metrics.jsonl`` only.
        tensorboard_dir: Where TensorBoard event files go; ``None`` =
            ``<output_dir>/tensorboard``.
        mlflow_tracking_uri: MLflow tracking store; ``None`` = the ``MLFLOW_TRACKING_URI``
            environment variable, else ``file:<output_dir>/mlruns``.
        mlflow_experiment: MLflow experiment name; ``None`` = the name of ``output_dir``.
    """

    output_dir: str
    max_steps: int = 1000
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    warmup_steps: int = 0
    warmup_ratio: float = 0.0
    gradient_accumulation_steps: int = 1
    max_grad_norm: float | None = 1.0
    precision: str = "auto"
    device: str = "auto"
    seed: int = 0
    log_every: int = 10
    save_every: int = 500
    keep_last: int = 2
    resume: bool | str = True
    progress: bool = True
    fused_optimizer: bool | None = None
    sparse_lookups: bool | None = None
    compile: bool = False
    cuda_graphs: bool = False
    activation_checkpointing: bool = False
    fsdp: bool = False
    attention_backend: str = "auto"
    unpad: str = "auto"
    structured_masks: bool = False
    devices: int = 1
    distributed_backend: str = "auto"
    schedule: str = "linear"
    stlr_cut_frac: float = 0.1
    stlr_ratio: float = 32.0
    layer_lr_decay: float | None = None
    unfreeze_every: int = 0
    loggers: list[str] = dataclasses.field(default_factory=list)
    tensorboard_dir: str | None = None
    mlflow_tracking_uri: str | None = None
    mlflow_experiment: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.output_dir, os.PathLike):
            self.output_dir = os.fspath(self.output_dir)
        if not isinstance(self.output_dir, str) or not self.output_dir:
            raise _fail("output_dir", "must be a non-empty path", self.output_dir)
        blocker = file_in_the_way(self.output_dir)
        if blocker is not None:  # checked before any data is prepared or model built
            raise _fail(
                "output_dir",
                f"must be a folder, and {blocker} is an existing file; give a folder path",
                self.output_dir,
            )
        for name in ("max_steps", "gradient_accumulation_steps", "log_every", "save_every"):
            self._check_int(name, minimum=1)
        self._check_int("keep_last", minimum=1)
        self._check_int("devices", minimum=1)
        if self.distributed_backend not in ("auto", "nccl", "gloo"):
            raise _fail(
                "distributed_backend", "must be 'auto', 'nccl' or 'gloo'", self.distributed_backend
            )
        self._check_int("warmup_steps", minimum=0)
        self._check_int("seed", minimum=0)
        if self.warmup_steps > self.max_steps:
            raise _fail(
                "warmup_steps", f"must be <= max_steps ({self.max_steps})", self.warmup_steps
            )
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise _fail("warmup_ratio", "must be in [0, 1]", self.warmup_ratio)
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise _fail("learning_rate", "must be a finite number > 0", self.learning_rate)
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise _fail("weight_decay", "must be a finite number >= 0", self.weight_decay)
        if not self.adam_eps > 0:
            raise _fail("adam_eps", "must be > 0", self.adam_eps)
        betas = tuple(self.adam_betas)  # Hydra hands over lists
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise _fail("adam_betas", "must be two numbers in [0, 1)", self.adam_betas)
        self.adam_betas = (float(betas[0]), float(betas[1]))
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise _fail("max_grad_norm", "must be > 0 or None (no clipping)", self.max_grad_norm)
        if self.precision not in PRECISIONS:
            raise _fail("precision", f"must be one of {', '.join(PRECISIONS)}", self.precision)
        if self.device != "auto":
            try:
                torch.device(self.device)
            except (RuntimeError, TypeError) as exc:
                raise _fail(
                    "device", "must be 'auto' or a torch device like 'cpu'", self.device
                ) from exc
        if not (isinstance(self.resume, bool) or self.resume == "force"):
            raise _fail("resume", "must be true, false or force", self.resume)
        for name in ("progress", "compile", *MEMORY_AND_COMPILE_SWITCHES):
            if not isinstance(getattr(self, name), bool):
                raise _fail(name, "must be true or false", getattr(self, name))
        if self.cuda_graphs and not self.compile:
            raise _fail(
                "cuda_graphs",
                "replays graphs that torch.compile records: set compile=true too",
                self.cuda_graphs,
            )
        from ptm_core.encoders.unpadding import UNPADDING_MODES
        from ptm_core.modules.attention_backends import ATTENTION_BACKENDS

        if self.attention_backend not in ATTENTION_BACKENDS:
            raise _fail(
                "attention_backend",
                f"must be one of {', '.join(ATTENTION_BACKENDS)} (attention.backend=...)",
                self.attention_backend,
            )
        if self.unpad not in UNPADDING_MODES:
            raise _fail(
                "unpad",
                f"must be one of {', '.join(UNPADDING_MODES)} (attention.unpad=...)",
                self.unpad,
            )
        if not isinstance(self.structured_masks, bool):
            raise _fail(
                "structured_masks",
                "must be true or false (attention.structured_masks=...)",
                self.structured_masks,
            )
        if self.fused_optimizer is not None and not isinstance(self.fused_optimizer, bool):
            raise _fail("fused_optimizer", "must be true, false or None", self.fused_optimizer)
        if self.sparse_lookups is not None and not isinstance(self.sparse_lookups, bool):
            raise _fail("sparse_lookups", "must be true, false or None", self.sparse_lookups)
        if self.sparse_lookups and (self.compile or self.fsdp or self.devices > 1):
            raise _fail(
                "sparse_lookups",
                "applies to one eager process (compile, fsdp and devices > 1 keep dense "
                "lookups): set it to null",
                self.sparse_lookups,
            )
        if self.schedule not in SCHEDULES:
            raise _fail("schedule", f"must be one of {', '.join(SCHEDULES)}", self.schedule)
        if not 0.0 < self.stlr_cut_frac < 1.0:
            raise _fail("stlr_cut_frac", "must be in (0, 1)", self.stlr_cut_frac)
        if not (math.isfinite(self.stlr_ratio) and self.stlr_ratio >= 1.0):
            raise _fail("stlr_ratio", "must be a finite number >= 1", self.stlr_ratio)
        if self.layer_lr_decay is not None and not 0.0 < self.layer_lr_decay <= 1.0:
            raise _fail(
                "layer_lr_decay", "must be in (0, 1] or None (one rate)", self.layer_lr_decay
            )
        self._check_int("unfreeze_every", minimum=0)
        self._check_loggers()

    def _check_loggers(self) -> None:
        names = [self.loggers] if isinstance(self.loggers, str) else self.loggers
        try:
            names = [str(name) for name in names]  # Hydra hands over a ListConfig
        except TypeError:
            raise _fail(
                "loggers", f"must be a list of {', '.join(LOGGERS)}", self.loggers
            ) from None
        unknown = [name for name in names if name not in LOGGERS]
        if unknown:
            raise _fail("loggers", f"must name only {', '.join(LOGGERS)}", unknown)
        self.loggers = list(dict.fromkeys(names))
        for name in ("tensorboard_dir", "mlflow_tracking_uri", "mlflow_experiment"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                setattr(self, name, os.fspath(value))
            elif value is not None and (not isinstance(value, str) or not value):
                raise _fail(name, "must be a non-empty string or None (the default)", value)

    def _check_int(self, name: str, *, minimum: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _fail(name, f"must be an integer >= {minimum}", value)

    @property
    def num_warmup_steps(self) -> int:
        """Warm-up length in steps: ``warmup_steps`` if set, else ``ceil(ratio * max_steps)``."""
        if self.warmup_steps > 0:
            return self.warmup_steps
        return math.ceil(self.warmup_ratio * self.max_steps)

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as a JSON-ready dict (tuples become lists)."""
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        data["loggers"] = list(self.loggers)
        return data
