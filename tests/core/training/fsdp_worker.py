"""Run under torchrun by test_trainer_fsdp.py: a tiny BERT+MLM trained with DDP and FSDP2.

Five runs in one process group (starting processes is the slow part):
``ddp`` (reference), ``fsdp`` (uninterrupted, through ``train_and_save``, with activation
checkpointing), ``interrupted`` (FSDP, the data source fails after step 4 on every rank)
followed by its resume from the step-4 sharded checkpoint with differently initialised
weights, and ``bf16`` (FSDP with bf16 all-gathers and fp32 gradient reduction). Rank 0
writes each run's logged losses and every rank its final weights.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file

from ptm_core import bert_encoder
from ptm_core.data import PretrainingBatches
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.run import train_and_save

VOCAB = VocabInfo(vocab_size=300, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


class Interrupted(Exception):
    pass


class FailsAfter:
    """A batch source that raises on the batch after ``limit`` (each rank counts its own)."""

    def __init__(self, source: PretrainingBatches, limit: int) -> None:
        self.source, self.limit, self.served = source, limit, 0

    @property
    def batches_per_epoch(self) -> int:
        return self.source.batches_per_epoch

    def batch(self, epoch: int, index: int):
        self.served += 1
        if self.served > self.limit:
            raise Interrupted
        return self.source.batch(epoch, index)

    def iter_batches(self, epoch: int, start: int = 0):
        for index in range(start, self.batches_per_epoch):
            yield self.batch(epoch, index)


def build(seed: int = 0) -> tuple[PretrainingModel, PretrainingBatches]:
    torch.manual_seed(seed)  # the same initial weights on both ranks
    encoder = bert_encoder(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2)
    mlm = build_objective(functools.partial(MaskedLMObjective, mode="dynamic"), encoder, VOCAB)
    model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm}))
    gen = torch.Generator().manual_seed(1)
    examples = []
    for _ in range(64):
        ids = torch.randint(5, 300, (20,), generator=gen).tolist()
        examples.append({"input_ids": [2, *ids, 3], "special_tokens_mask": [1] + [0] * 20 + [1]})
    data = PretrainingBatches(examples, 4, pad_id=0, transform=model.objectives.collate)
    return model, data


def config(out: Path, name: str, **overrides) -> TrainerConfig:
    settings = dict(
        output_dir=str(out / name),
        max_steps=8,
        save_every=4,
        log_every=1,
        progress=False,
        device="cpu",
        learning_rate=1e-3,
        warmup_steps=2,
        # fp32 unless a run asks for bf16: the DDP/FSDP comparison is exact only in fp32
        # (under bf16 FSDP all-gathers bf16 parameters, DDP casts inside autocast).
        precision="fp32",
    )
    settings.update(overrides)
    return TrainerConfig(**settings)


def main(out: Path) -> None:
    rank = None
    losses: dict[str, list[float]] = {}

    def finish(name: str, model: PretrainingModel, history) -> None:
        state = {k: v.clone() for k, v in model.state_dict().items()}
        save_file(state, str(out / f"{name}-rank{dist.get_rank()}.safetensors"))
        losses[name] = [record["loss"] for record in history]

    model, data = build()
    finish("ddp", model, Trainer(model, data, config(out, "ddp")).fit().history)
    rank = dist.get_rank()

    # DDP's resume: rank 1's dropout stream must come back from the checkpoint too.
    model, data = build()
    try:
        Trainer(model, FailsAfter(data, 4), config(out, "ddp-interrupted")).fit()
    except Interrupted:
        pass
    else:
        raise AssertionError("the interrupted DDP run was not interrupted")
    model, data = build(seed=99)
    finish("ddp-resumed", model, Trainer(model, data, config(out, "ddp-interrupted")).fit().history)

    model, data = build()
    run = train_and_save(
        model,
        data,
        config(out, "fsdp", fsdp=True, activation_checkpointing=True),
        save_final=lambda path: model.encoder.save_pretrained(path),
    )
    finish("fsdp", model, run.result.history)

    model, data = build()
    try:
        Trainer(model, FailsAfter(data, 4), config(out, "interrupted", fsdp=True)).fit()
    except Interrupted:
        pass
    else:
        raise AssertionError("the interrupted run was not interrupted")
    losses["before-interruption"] = [
        json.loads(line)["loss"]
        for line in (out / "interrupted" / "metrics.jsonl").read_text().splitlines()
    ]
    model, data = build(seed=99)  # other initial weights: everything must come from disk
    finish(
        "resumed", model, Trainer(model, data, config(out, "interrupted", fsdp=True)).fit().history
    )
    model, data = build()
    bf16 = Trainer(model, data, config(out, "bf16", fsdp=True, precision="bf16", max_steps=3))
    seen: set[torch.dtype] = set()  # parameter dtype inside the forward (all-gathered)
    bf16.model.encoder.layers[0].feed_forward.register_forward_pre_hook(
        lambda module, _: seen.update(p.dtype for p in module.parameters())
    )
    finish("bf16", model, bf16.fit().history)
    assert seen == {torch.bfloat16}, seen
    if rank == 0:
        (out / "losses.json").write_text(json.dumps(losses))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
