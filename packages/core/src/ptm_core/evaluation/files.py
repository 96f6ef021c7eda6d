"""Reading a model directory's JSON files for an evaluation's checks, with one-line errors.

Every failure names the file and what is wrong, so ``ptm evaluate`` reports a missing or
broken file before any model is loaded. Light: no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Keys a ptm encoder's config.json must have: they fix the weights' shapes, so a default in
# their place would build another architecture and fail later with a list of mismatches.
ENCODER_SHAPE_KEYS = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")


def read_json(path: Path) -> Any:
    """Parse a JSON file; every failure is one line naming the file and what is wrong."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: missing; the model directory is incomplete, copy the whole final/ "
            "directory of the run"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 text (byte {exc.start}); restore the file from the run"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); "
            "restore the file from the run or re-save the model"
        ) from None


def read_json_object(
    path: Path, required: tuple[str, ...] = (), *, within: str | None = None
) -> dict[str, Any]:
    """A JSON object with ``required`` keys (of its ``within`` member, when given)."""
    data = read_json(path)
    node = data.get(within) if isinstance(data, dict) and within else data
    where = f"{within!r} in " if within else ""
    if not isinstance(node, dict):
        found = "nothing" if node is None else f"a JSON {type(node).__name__}"
        raise ValueError(f"{path}: expected a JSON object {where}the file, found {found}")
    missing = [key for key in required if key not in node]
    if missing:
        keys = ", ".join(repr(key) for key in missing)
        plural = "s" if len(missing) > 1 else ""
        scope = f" in {within!r}" if within else ""
        raise ValueError(
            f"{path}: missing key{plural} {keys}{scope}; restore the file from the run or "
            "re-save the model"
        )
    return data


def require_file(path: Path, why: str) -> None:
    """Raise ``FileNotFoundError`` naming ``path`` and ``why`` it is needed."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; {why}")


__all__ = ["ENCODER_SHAPE_KEYS", "read_json", "read_json_object", "require_file"]
