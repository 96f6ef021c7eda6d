"""Run under torchrun by test_trainer_ddp.py: a tiny BERT+MLM trained data-parallel."""

from __future__ import annotations

import functools
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

VOCAB = VocabInfo(vocab_size=300, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def main(out: Path) -> None:
    torch.manual_seed(0)  # same initial weights on both ranks, as DDP requires
    encoder = bert_encoder(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2)
    mlm = build_objective(functools.partial(MaskedLMObjective, mode="dynamic"), encoder, VOCAB)
    model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm}))
    gen = torch.Generator().manual_seed(1)
    examples = []
    for _ in range(64):
        ids = torch.randint(5, 300, (20,), generator=gen).tolist()
        examples.append({"input_ids": [2, *ids, 3], "special_tokens_mask": [1] + [0] * 20 + [1]})
    data = PretrainingBatches(examples, 4, pad_id=0, transform=model.objectives.collate)
    config = TrainerConfig(
        output_dir=str(out / "run"),
        max_steps=8,
        save_every=4,
        log_every=2,
        progress=False,
        device="cpu",
        learning_rate=1e-3,
    )
    Trainer(model, data, config).fit()
    rank = dist.get_rank()
    save_file(
        {k: v.contiguous() for k, v in encoder.state_dict().items()},
        str(out / f"rank{rank}.safetensors"),
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
