"""Write the fine-tuning task sample ``data_specs/image_text/tasks/`` (deterministic).

The scenes, regions and answers come from the synthetic generator
(:func:`ptm_multimodal.synthetic.write_synthetic_tasks`), so the sample is written for the
project and license-clean. Run from the repository root:

    uv run python data_specs/image_text/make_task_sample.py [OUT_DIR] [--train-images 32]

Larger sets for benchmarks use the same function with more images
(``benchmarks/multimodal_gain.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ptm_multimodal.synthetic import write_synthetic_tasks

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=str(HERE / "tasks"))
    parser.add_argument("--train-images", type=int, default=32)
    parser.add_argument("--dev-images", type=int, default=24)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    out = write_synthetic_tasks(
        args.out_dir, train_images=args.train_images, dev_images=args.dev_images, seed=args.seed
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
