"""What ``ptm evaluate`` and ``ptm retrain`` score on, how much of it, and where reports go.

A model is judged on held-out documents of the data it was trained for, never on the
bundled 5-document sample by default:

- ``ptm retrain`` holds out a deterministic split of the retrain corpus
  (:func:`ptm_core.data.held_out.split_held_out`) in the candidate's run folder and records
  it; the candidate trains on the rest.
- ``ptm evaluate`` of a text language model reads the split its run recorded; a model whose
  vocabulary is the bundled sample's (trained on the sample) is scored on the bundled
  evaluation sample; any other model needs ``--corpus``.

Two models are compared only on at least :data:`MIN_COMPARE_TOKENS` scored tokens: below
that, a difference of a few tokens reads as "better".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.config import project_root
from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory
from ptm_core.data.held_out import RUN_SPLIT_DIR, SPLIT_RECORD, recorded_split

DEFAULT_EVAL_CORPUS = "data_specs/text_corpus/sample/corpus.jsonl"
SAMPLE_VOCAB = "data_specs/text_corpus/sample-vocab.txt"
#: Fewest scored (masked) tokens on which two models are compared; a setting
#: (``--min-tokens`` / ``--min-eval-tokens``). At 1,000 tokens the standard error of an
#: accuracy near 0.3 is 0.014; the bundled sample scores 67.
MIN_COMPARE_TOKENS = 1_000
#: The first line of every report ``ptm evaluate`` writes: only such a file is replaced.
#: The keys an evaluation reports its count of scored tokens under.
_COUNT_KEYS = ("predictions", "tokens")


def trained_on_sample(model_dir: str | Path) -> bool:
    """Whether the model's vocabulary is the bundled sample's (so it was trained on it)."""
    found = find_tokenizer_directory(model_dir)
    vocab = found / "vocab.txt" if found is not None else Path(model_dir) / "vocab.txt"
    sample = project_root() / SAMPLE_VOCAB
    if not vocab.is_file() or not sample.is_file():
        return False
    # T5 and friends add their sentinel tokens after the sample's.
    words, sample_words = vocab.read_bytes().split(), sample.read_bytes().split()
    return words[: len(sample_words)] == sample_words


def default_eval_corpus(model_dir: str | Path) -> tuple[str, str]:
    """The held-out text a text language model is scored on when ``--corpus`` is not given.

    Returns:
        ``(corpus, where it came from in words)``.

    Raises:
        ValueError: the model's run recorded no held-out split and it was not trained on
            the bundled sample (one line: pass ``--corpus``).
    """
    run_dir = Path(model_dir).resolve().parent
    split = recorded_split(run_dir)
    if split is not None:
        return split.held_out, f"the held-out split of its run ({split.describe()})"
    if trained_on_sample(model_dir):
        sample = project_root() / DEFAULT_EVAL_CORPUS
        return str(sample), "the bundled evaluation sample (the model has the sample's vocabulary)"
    raise ValueError(
        f"{model_dir}: its run recorded no held-out split ({run_dir / RUN_SPLIT_DIR / SPLIT_RECORD}"
        "; ptm retrain records one) and it was not trained on the bundled sample; pass "
        "--corpus <held-out text of your own data, not trained on>"
    )


def scored_tokens(scores: dict[str, Any]) -> int | None:
    """How many tokens an evaluation scored (``None`` when it does not count tokens)."""
    for key in _COUNT_KEYS:
        value = scores.get(key)
        if isinstance(value, (int, float)):
            return int(value)
    return None


def check_enough_tokens(tokens: int | None, minimum: int, corpus: str, what: str) -> None:
    """Refuse to compare two models on fewer than ``minimum`` scored tokens.

    Raises:
        ValueError: ``tokens`` below ``minimum`` (one line, with the two ways out).
    """
    if minimum < 0:
        raise ValueError(f"min tokens={minimum}: must be 0 or more")
    if tokens is not None and tokens < minimum:
        raise ValueError(
            f"{corpus}: {tokens:,} tokens scored, fewer than the {minimum:,} needed to compare "
            f"{what}: a difference on so few tokens is noise. Give a larger held-out set, or "
            "lower the minimum (--min-tokens for ptm evaluate, --min-eval-tokens for ptm retrain)"
        )


def default_report_path(model_dir: str | Path) -> Path:
    """``evaluation-<model folder name>.md`` beside the model folder (one per model)."""
    directory = Path(model_dir).resolve()
    return directory.parent / f"evaluation-{directory.name}.md"


def metrics_lines(label: str, scores: dict[str, Any]) -> str:
    """``label: name value, ...`` of the numeric scores, for the terminal."""
    shown = ", ".join(
        f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
        for name, value in sorted(scores.items())
        if isinstance(value, (int, float)) and not name.startswith("_")
    )
    return f"{label}: {shown}"


__all__ = [
    "DEFAULT_EVAL_CORPUS",
    "MIN_COMPARE_TOKENS",
    "check_enough_tokens",
    "default_eval_corpus",
    "default_report_path",
    "metrics_lines",
    "scored_tokens",
    "trained_on_sample",
]
