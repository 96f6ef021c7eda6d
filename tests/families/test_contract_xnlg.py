"""The family contract for XNLG on a generated language pair (never the bundled samples).

XNLG starts from an XLM ``final/``: the case first runs stage 1 (the ``xlm`` family,
``experiment=xnlg_stage1_tiny``) on the generated ``xq``/``xz`` corpora, then the contract's
pre-training is stage 2 (``experiment=xnlg_tiny``) and its fine-tuning the zero-shot
headline task (``experiment=xnlg_zero_shot``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from family_contract import FAST, FamilyContract

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "multilingual"))
from xnlg_generated import corpora, headline_task

FAMILY = "xnlg"


def _inputs(tmp_path: Path) -> list[str]:
    data = corpora(tmp_path / "data", mono=60, pairs=40)
    return [
        f"data.corpus={data / 'mono'}",
        f"data.parallel={data / 'parallel'}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "data.batch_size=4",
        "data.max_length=24",
        "trainer.save_every=1000",
        "trainer.device=cpu",
    ]


class TestXNLGContract(FamilyContract):
    family = FAMILY
    finetune_config = "config"  # `ptm pretrain experiment=xnlg_zero_shot init_from=...`

    def saved_folder(self, tmp_path: Path) -> Path:
        from flows.config import compose_config
        from flows.runner import run_composed

        stage1 = compose_config(
            [
                *FAST,
                "experiment=xnlg_stage1_tiny",
                *_inputs(tmp_path),
                "data.directions=[xq-xz,xz-xq]",
                "data.vocab_size=100",
                "data.stream_length=16",
                "model.hidden_size=16",
                "model.intermediate_size=32",
                "trainer.max_steps=2",
                f"trainer.output_dir={tmp_path / 'stage1'}",
            ]
        )
        self.stage1 = Path(run_composed(stage1).encoder_dir)
        return super().saved_folder(tmp_path)

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(corpora(tmp_path / "eval", mono=1, pairs=6) / "parallel")

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        return [
            "experiment=xnlg_tiny",
            f"init_from={self.stage1}",
            *_inputs(tmp_path),
            "trainer.max_steps=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        task = headline_task(tmp_path / "task", train=8, dev=4)
        return [
            "experiment=xnlg_zero_shot",
            f"init_from={final_dir}",
            f"xnlg_finetune.train_file={task['train']}",
            "xnlg_finetune.train_lang=xq",
            "~xnlg_finetune.dev",
            f"+xnlg_finetune.dev={{xq:{task['xq']},xz:{task['xz']}}}",
            "xnlg_finetune.max_source_length=24",
            "trainer.max_steps=2",
            "trainer.save_every=1000",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
