"""The pre-training loop: accumulation, clipping, schedule, logging, checkpoints, exact resume."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ptm_core.checkpoints import CheckpointError
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings
from ptm_core.progress import Progress
from ptm_core.seeding import derive_seed
from ptm_core.training.batch_cursor import BatchCursor, count_tokens
from ptm_core.training.checkpointing import (
    SHARDED_DIR,
    find_latest_checkpoint,
    load_training_state,
    prune_checkpoints,
    remove_temp_dirs,
    save_checkpoint,
)
from ptm_core.training.compilation import check_compile_switches, compile_forward
from ptm_core.training.config import TrainerConfig
from ptm_core.training.distributed import (
    ShardedBatches,
    barrier,
    init_distributed,
    mean_across_ranks,
)
from ptm_core.training.finite_loss import FiniteLossGuard
from ptm_core.training.memory import enable_activation_checkpointing
from ptm_core.training.metrics import MetricsLog, MetricsWindow
from ptm_core.training.optim import build_optimizer, build_schedule
from ptm_core.training.precision import bound_onednn_cache, choose_precision
from ptm_core.training.protocols import Batch, BatchSource, ModelOutput
from ptm_core.training.rng_state import capture_rng_state, restore_rng_state, rng_file
from ptm_core.training.run_folder import (
    FINGERPRINT_FILE,
    TrainingInterrupted,
    architecture_hash,
    check_fingerprint,
    current_identity,
    locked_run_folder,
    write_fingerprint,
)
from ptm_core.training.sparse_lookups import TiedLookupRows

logger = logging.getLogger(__name__)

# Keys the trainer writes itself; a model metric with one of these names is logged as model/<name>.
# Logged keys that measure time: they differ between runs of the same seed.
TIMING_KEYS = ("tokens_per_s", "data_wait_share")
_RESERVED_KEYS = {"step", "epoch", "loss", "lr", "grad_norm", *TIMING_KEYS}
# Settings that change nothing about the trajectory, so a resume may change them silently.
COSMETIC_KEYS = {
    "output_dir",
    "log_every",
    "save_every",
    "keep_last",
    "resume",
    "progress",
    "devices",
    "loggers",
    "tensorboard_dir",
    "mlflow_tracking_uri",
    "mlflow_experiment",
    # Recomputation restores the RNG it used: the same updates bit for bit (tested).
    "activation_checkpointing",
}


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns.

    Attributes:
        final_step: The last optimizer step completed (``config.max_steps`` on success).
        output_dir: The run directory.
        metrics_path: ``output_dir/metrics.jsonl``.
        last_checkpoint: The newest checkpoint directory, or ``None``.
        history: The metrics records logged by this call, in order.
    """

    final_step: int
    output_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)


def resolve_device(name: str) -> torch.device:
    """Map ``"auto"`` to CUDA when available, else CPU; check that a named CUDA device exists.

    Raises:
        ValueError: a CUDA device is named that this machine does not have.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"trainer.device={name!r}, but torch sees no CUDA device on this machine "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); set "
                "trainer.device=auto (a GPU when there is one) or trainer.device=cpu"
            )
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"trainer.device={name!r}, but this machine has {count} CUDA device(s) "
                f"(cuda:0..cuda:{count - 1}); pick one of those or trainer.device=auto"
            )
    return device


class Trainer:
    """Trains a model on a :class:`BatchSource` with AdamW and the BERT schedule.

    Each optimizer step accumulates ``gradient_accumulation_steps`` micro-batches (each loss
    divided by that count), clips the gradient norm, steps the optimizer and scheduler.
    Metrics go to ``output_dir/metrics.jsonl``, checkpoints to ``output_dir/checkpoints``.
    With ``resume=True`` a run continues from the newest complete checkpoint and produces
    the same weights, bit for bit, as a run that was never interrupted (on the same device).

    Args:
        model: A module whose ``forward(batch)`` returns a :class:`ModelOutput`; it is moved
            to the configured device.
        data: The batch source; tensors are moved to the device by the trainer.
        config: Trainer settings.
        callbacks: Objects with optional ``on_log(step, record)`` / ``on_save(step, path)``
            / ``on_train_begin(step, output_dir)`` / ``on_train_end(step)``. The trackers
            ``config.loggers`` names (TensorBoard, MLflow) are added after them.
    """

    def __init__(
        self,
        model: nn.Module,
        data: BatchSource,
        config: TrainerConfig,
        *,
        callbacks: Iterable[object] | None = None,
    ) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.dist = init_distributed(config.distributed_backend, self.device.type)
        if self.dist.enabled:
            if self.device.type == "cuda":
                self.device = torch.device("cuda", self.dist.local_rank)
                torch.cuda.set_device(self.device)
            data = ShardedBatches(data, self.dist.rank, self.dist.world_size)
        self.cursor = BatchCursor(data)  # fails early on an empty source
        check_compile_switches(config, self.device)
        # How attention runs (attention.backend / attention.unpad): the run's execution
        # settings, given once through the model's own method; not part of its checkpoint.
        apply_execution_settings(
            model,
            ExecutionSettings(attention_backend=config.attention_backend, unpadding=config.unpad),
        )
        if config.activation_checkpointing:
            enable_activation_checkpointing(model)
        # With FSDP the user's model stays where it is (it may not fit the device); a
        # sharded copy is trained and the final weights are gathered back into it.
        self._fsdp_source: nn.Module | None = model if config.fsdp else None
        self._architecture = architecture_hash(model)
        self.model = model if config.fsdp else model.to(self.device)
        self.data = data
        self.callbacks = list(callbacks or [])
        if config.loggers and self.dist.is_main:
            from ptm_core.training.loggers import build_loggers

            # Built here, not at fit(): a missing package fails before any work is done.
            self.callbacks += build_loggers(config)
        precision = choose_precision(config.precision, self.device)
        if self.dist.is_main:
            logger.info("precision: %s (%s)", precision.name, precision.reason)
        self._autocast_dtype = precision.dtype
        if precision.dtype is not None and self.device.type == "cpu":
            bound_onednn_cache()
        if config.fsdp:
            # FSDP replaces DDP (it averages gradients across ranks itself); the optimizer,
            # schedule and unfreezing below are built on the sharded parameters.
            from ptm_core.training.sharding import shard_model

            self.model = shard_model(
                self.model, self.device, bf16=self._autocast_dtype == torch.bfloat16
            )
        self.optimizer = build_optimizer(self.model, config)
        self.scheduler = build_schedule(self.optimizer, config)
        if config.sparse_lookups and self.dist.enabled:
            raise ValueError(
                "TrainerConfig.sparse_lookups applies to one process; this run is distributed "
                f"(world size {self.dist.world_size}): set trainer.sparse_lookups=null"
            )
        # ULMFiT's gradual unfreezing: which depths train is a function of the step alone,
        # so a resumed run freezes exactly what an uninterrupted one did at that step.
        self._unfreezing: Any = None
        if config.unfreeze_every > 0:
            from ptm_core.training.finetuning import GradualUnfreezing

            # DDP/FSDP fix the set of gradients they sync when they wrap the model, and
            # torch.compile would recompile at every unfreezing: all keep requires_grad
            # and drop the frozen depths' gradients after backward instead.
            self._unfreezing = GradualUnfreezing(
                self.model,
                every_steps=config.unfreeze_every,
                mode="grad_mask" if self.dist.enabled or config.compile else "requires_grad",
            )
        self.output_dir = Path(config.output_dir)
        self.checkpoints_dir = self.output_dir / "checkpoints"
        self.metrics_log = MetricsLog(self.output_dir / "metrics.jsonl")
        forward: nn.Module = self.model
        if self.dist.enabled and not config.fsdp:
            # Gradients are averaged across ranks inside backward(); self.model stays the
            # plain module, so checkpoints have the same names as single-process runs.
            forward = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self._forward = compile_forward(forward, config)
        self.step = 0
        self._window = MetricsWindow()
        # Immediate on one CPU process (free there); else read at logs, saves and the end.
        self._finite = FiniteLossGuard(
            immediate=self.device.type == "cpu" and not self.dist.enabled
        )
        self._lr = 0.0  # rate used by the last step, for logging
        self._lookups: TiedLookupRows | None = None  # set up for the loop in _fit
        # torch uses its multi-tensor norm and scaling by default on CUDA only; on CPU the
        # per-tensor loop is ~116 small ops a BERT-mini step. FSDP's DTensor gradients
        # keep torch's default.
        self._foreach_clip = (
            True if self.device.type in ("cpu", "cuda") and not config.fsdp else None
        )
        self._data_wait = 0.0  # seconds spent waiting for batches since the last log line
        self._fit_called = False

    def fit(self) -> TrainResult:
        """Train until ``config.max_steps``, resuming first if configured and possible.

        Returns:
            The final step, paths and the metrics logged during this call.

        Raises:
            CheckpointError: If the checkpoint to resume from is broken.
            RuntimeError: If called twice on one trainer.
        """
        if self._fit_called:
            # A second call would start from in-memory optimizer state that no checkpoint holds.
            raise RuntimeError(
                "Trainer.fit() was already called on this trainer; build a new Trainer (with "
                "resume=true it continues from the last checkpoint)."
            )
        self._fit_called = True
        with contextlib.ExitStack() as stack:
            if self.dist.is_main:  # one writer per folder; the kernel frees it if we die
                stack.enter_context(locked_run_folder(self.output_dir))
            return self._fit()

    def fingerprint(self) -> dict[str, Any]:
        """What determines this run's result: the composed run's identity (set by
        :func:`~ptm_core.training.run_folder.run_identity`), the model's parameter shapes and
        every trainer setting that changes the trajectory."""
        keys = current_identity()
        keys["model.architecture"] = self._architecture
        for key, value in self.config.to_dict().items():
            if key not in COSMETIC_KEYS:
                keys[f"trainer.{key}"] = value
        return keys

    def _fit(self) -> TrainResult:
        main = self.dist.is_main
        if main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            # Crashed writes leave `.<name>.<random>.tmp` here too (final/, metrics).
            remove_temp_dirs(self.output_dir)
            remove_temp_dirs(self.checkpoints_dir)
        barrier()
        last_checkpoint = self._restore_or_start()
        if main:
            self.metrics_log.truncate_after(self.step)
            self._call("on_train_begin", self.step, self.output_dir)
        history: list[dict[str, Any]] = []
        bar = Progress(
            "train",
            self.config.max_steps,
            "step",
            initial=self.step,
            enabled=self.config.progress and main,
        )
        tokens, since, self._data_wait = 0, time.perf_counter(), 0.0
        # Tied tables' lookups turn row-sparse for this loop only: the model leaves fit()
        # as it came.
        sparse = self.config.sparse_lookups is not False and not (
            self.dist.enabled or self.config.fsdp or self.config.compile
        )
        self._lookups = TiedLookupRows(self.model) if sparse else None
        try:
            while self.step < self.config.max_steps:
                tokens += self._train_step()
                bar.update(1)
                if self.step % self.config.log_every == 0 or self.step == self.config.max_steps:
                    self._finite.check()
                    elapsed = max(time.perf_counter() - since, 1e-9)
                    record = self._log(tokens / elapsed, self._data_wait / elapsed)
                    history.append(record)
                    bar.set_status(
                        loss=f"{record['loss']:.4f}",
                        lr=f"{record['lr']:.2e}",
                        tok_s=f"{record['tokens_per_s']:.0f}",
                    )
                    tokens, since, self._data_wait = 0, time.perf_counter(), 0.0
                if self.step % self.config.save_every == 0 or self.step == self.config.max_steps:
                    self._finite.check()  # never a checkpoint of weights trained on NaN
                    rank_rngs = self._gather_rng_states()  # DDP: a collective on every rank
                    if main or self._fsdp_source is not None:  # sharded saves: every rank
                        last_checkpoint = self._save(rank_rngs)
                    barrier()
            self._finite.check()
            if self._fsdp_source is not None:
                from ptm_core.training.sharding import copy_full_weights

                copy_full_weights(self.model, self._fsdp_source)
        except KeyboardInterrupt:
            # Ctrl-C: checkpoints are atomic, so the newest complete one is where a rerun
            # continues; one line says so instead of a traceback through the loop.
            latest = find_latest_checkpoint(self.checkpoints_dir)
            resume_step = int(latest.name.removeprefix("step-")) if latest is not None else 0
            raise TrainingInterrupted(self.step, resume_step) from None
        finally:
            bar.close()
            self.cursor.close()
            if self._lookups is not None:
                self._lookups.restore()
                self._lookups = None
            if main:
                self._call("on_train_end", self.step)
        return TrainResult(
            final_step=self.step,
            output_dir=self.output_dir,
            metrics_path=self.metrics_log.path,
            last_checkpoint=last_checkpoint,
            history=history,
        )

    def _restore_or_start(self) -> Path | None:
        checkpoint = find_latest_checkpoint(self.checkpoints_dir) if self.config.resume else None
        if checkpoint is not None and self.dist.is_main:
            # Another model, data or settings: refused before any state is loaded.
            check_fingerprint(self.output_dir, self.fingerprint(), self.config.resume)
        if checkpoint is None:
            if self.dist.is_main:
                if not self.config.resume:
                    self._archive_previous_run()
                write_fingerprint(self.output_dir, self.fingerprint())
            barrier()
            # Rank r seeds seed + r: different dropout per rank, the same as before for rank 0.
            self._seed(self.config.seed + self.dist.rank)
            self.step, self.cursor = 0, BatchCursor(self.data)
            self._window.reset()
            return None
        own_rng = False
        if self._fsdp_source is not None:
            from ptm_core.training.sharding import load_sharded_checkpoint

            state, own_rng = load_sharded_checkpoint(
                checkpoint, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler
            )
        elif (checkpoint / SHARDED_DIR).is_dir():
            raise CheckpointError(
                f"{checkpoint} is a sharded checkpoint written with trainer.fsdp=true; "
                "resume it with trainer.fsdp=true, or set resume=false to start over."
            )
        else:
            state = load_training_state(
                checkpoint,
                model=self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                device=self.device,
            )
        self.step = int(state["step"])
        self.cursor = BatchCursor(self.data, int(state["epoch"]), int(state["batch_index"]))
        self._window.load_state_dict(state.get("metrics_window", {}))
        changed = sorted(
            key
            for key, value in self.config.to_dict().items()
            if key not in COSMETIC_KEYS and state.get("config", {}).get(key, value) != value
        )
        if changed:
            logger.warning(
                "Resuming from %s with changed settings %s; the run will not match an "
                "uninterrupted one.",
                checkpoint,
                ", ".join(changed),
            )
        if self.dist.enabled and self.dist.rank > 0 and not own_rng:
            own = checkpoint / rng_file(self.dist.rank)
            if own.is_file() and state.get("world_size") == self.dist.world_size:
                # DDP: the rank's own stream, so the resumed run equals an uninterrupted one.
                restore_rng_state(torch.load(own, weights_only=True))
            else:
                # Written before per-rank files, or by another number of processes: the
                # checkpoint holds rank 0's RNG state; give the other ranks their own.
                self._seed(derive_seed(self.config.seed, self.step, self.dist.rank) % 2**32)
        logger.info("Resumed from %s (step %d).", checkpoint, self.step)
        return checkpoint

    def _archive_previous_run(self) -> None:
        # resume=false must not mix a new run with the old one's checkpoints (pruning and
        # `latest` would pick the old ones), yet must not destroy them: move them aside.
        candidates = (
            self.checkpoints_dir,
            self.metrics_log.path,
            self.output_dir / FINGERPRINT_FILE,
            self.output_dir / "final",
        )
        old = [p for p in candidates if p.exists()]
        if not old:
            return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        archive = self.output_dir / f"previous-run-{stamp}"
        archive.mkdir()
        for path in old:
            os.rename(path, archive / path.name)
        logger.warning("resume=false: moved the earlier run's files to %s.", archive)

    @staticmethod
    def _seed(seed: int) -> None:
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed)

    def _train_step(self) -> int:
        self.model.train()
        if self._unfreezing is not None:
            self._unfreezing.on_step_begin(self.step)
        accumulation = self.config.gradient_accumulation_steps
        tokens = 0
        for _ in range(accumulation):
            waited = time.perf_counter()
            batch = next(self.cursor)
            self._data_wait += time.perf_counter() - waited
            tokens += count_tokens(batch)  # on the host copy: no device sync
            output = self._forward_batch(batch)
            self._finite.observe(self.step + 1, output.loss, output.metrics)
            (output.loss / accumulation).backward()
            self._window.add("loss", output.loss)
            for name, value in output.metrics.items():
                self._window.add(f"model/{name}" if name in _RESERVED_KEYS else name, value)
        if self._lookups is not None:
            self._lookups.flush()
        if self._unfreezing is not None:
            self._unfreezing.on_after_backward(self.step)
        max_norm = self.config.max_grad_norm
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(),
            max_norm if max_norm is not None else float("inf"),
            foreach=self._foreach_clip,
        )
        if self._fsdp_source is not None:
            from ptm_core.training.sharding import local_value

            grad_norm = local_value(grad_norm)  # a replicated DTensor under FSDP
        self._window.add("grad_norm", grad_norm)
        self._lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return tokens

    def _forward_batch(self, batch: Batch) -> ModelOutput:
        on_device = {
            key: value.to(self.device, non_blocking=True)
            if isinstance(value, torch.Tensor)
            else value
            for key, value in batch.items()
        }
        autocast = (
            torch.autocast(self.device.type, dtype=self._autocast_dtype)
            if self._autocast_dtype is not None
            else contextlib.nullcontext()
        )
        with autocast:
            return cast(ModelOutput, self._forward(on_device))

    def _log(self, tokens_per_s: float, data_wait_share: float) -> dict[str, Any]:
        means = self._window.means()
        self._window.reset()
        if self.dist.enabled:
            # Every rank takes part in the reductions; only rank 0 writes.
            # One all-reduce for every metric (rank metric names match: see dEA's logging).
            names = sorted(means)
            reduced = mean_across_ranks(torch.tensor([means[k] for k in names])).tolist()
            means = dict(zip(names, reduced, strict=True))
            tokens_per_s *= self.dist.world_size
        record: dict[str, Any] = {
            "step": self.step,
            "epoch": self.cursor.epoch_progress,
            "loss": means.pop("loss"),
            "lr": self._lr,
            "grad_norm": means.pop("grad_norm"),
            "tokens_per_s": tokens_per_s,
            # Fraction of the wall time since the last line spent waiting for batches.
            "data_wait_share": data_wait_share,
        }
        record.update(means)
        if not self.dist.is_main:
            return record
        self.metrics_log.append(record)
        # One line per metrics line, for logs (the flows forward ``ptm_core`` to Prefect).
        logger.info(
            "step %d/%d: %s",
            self.step,
            self.config.max_steps,
            ", ".join(
                f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                for key, value in record.items()
                if key != "step"
            ),
        )
        for callback in self.callbacks:
            hook = getattr(callback, "on_log", None)
            if hook is not None:
                hook(self.step, dict(record))
        return record

    def _call(self, name: str, *args: Any) -> None:
        for callback in self.callbacks:
            hook = getattr(callback, name, None)
            if hook is not None:
                hook(*args)

    def _gather_rng_states(self) -> list[dict[str, Any]] | None:
        """Every rank's RNG states on rank 0 under DDP (None elsewhere, and under FSDP,
        whose ranks write their own files)."""
        if not self.dist.enabled or self._fsdp_source is not None:
            return None
        import torch.distributed as dist

        states: list[Any] | None = [None] * self.dist.world_size if self.dist.is_main else None
        dist.gather_object(capture_rng_state(), states, dst=0)
        return states

    def _save(self, rank_rngs: list[dict[str, Any]] | None = None) -> Path:
        epoch, index = self.cursor.position
        trainer_state = {
            "epoch": epoch,
            "batch_index": index,
            "metrics_window": self._window.state_dict(),
            "config": self.config.to_dict(),
        }
        save: Callable[..., Path]
        if self._fsdp_source is not None:  # every rank writes its shard and its own RNG file
            from ptm_core.training.sharding import save_sharded_checkpoint as save
        else:
            save = functools.partial(save_checkpoint, rank_rng_states=rank_rngs)
            trainer_state["world_size"] = self.dist.world_size
        path = save(
            self.checkpoints_dir,
            step=self.step,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            trainer_state=trainer_state,
        )
        if not self.dist.is_main:
            return path
        prune_checkpoints(self.checkpoints_dir, self.config.keep_last)
        logger.info("Saved %s.", path)
        for callback in self.callbacks:
            hook = getattr(callback, "on_save", None)
            if hook is not None:
                hook(self.step, path)
        return path
