"""Save and load a trained CogQA system (System 1 encoder + heads, System 2, vocabulary).

Layout of the directory (written atomically):

- ``encoder/``: System 1's core encoder (``config.json`` + ``model.safetensors``), loadable
  alone with ``TransformerEncoder.from_pretrained``;
- ``heads.safetensors``: ``span_head.*`` (System 1 pointers) and ``reasoner.*`` (System 2);
- ``vocab.txt``: the word vocabulary, one token per line (ids = line numbers);
- ``cogqa.json``: reader settings, GNN sizes and graph limits;
- ``config.json``: ``{"ptm_model": "cogqa"}``, the kind that names the family (folders
  saved before it have ``cogqa.json`` alone and still load:
  :func:`ptm_knowledge.family_cogqa.is_cogqa_folder`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from safetensors.torch import load_file, save_file

from ptm_core import TransformerEncoder
from ptm_core.atomic import atomic_directory
from ptm_core.model_kinds import with_kind
from ptm_knowledge.cogqa.system import CogQASystem
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderConfig, WordVocab
from ptm_knowledge.cogqa.system2 import CogQAReasoner
from ptm_knowledge.family_cogqa import COGQA


def save_cogqa(system: CogQASystem, directory: str | Path) -> Path:
    """Write ``system`` to ``directory`` (replaced as a whole); returns the path."""
    directory = Path(directory)
    reasoner = system.reasoner
    settings = {
        "reader": dataclasses.asdict(system.reader.config),
        "gnn_hidden": reasoner.project.out_features,
        "gnn_layers": len(reasoner.layers),
        "max_depth": system.max_depth,
        "max_nodes": system.max_nodes,
    }
    tensors = {f"span_head.{k}": v for k, v in system.reader.span_head.state_dict().items()}
    tensors |= {f"reasoner.{k}": v for k, v in reasoner.state_dict().items()}
    with atomic_directory(directory) as tmp:
        system.reader.encoder.save_pretrained(tmp / "encoder")
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp / "heads.safetensors"))
        (tmp / "vocab.txt").write_text(
            "\n".join(system.reader.vocab.tokens) + "\n", encoding="utf-8"
        )
        (tmp / "cogqa.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
        config = json.dumps(with_kind({}, COGQA), indent=2)
        (tmp / "config.json").write_text(config + "\n", encoding="utf-8")
    return directory


def load_cogqa(directory: str | Path) -> CogQASystem:
    """Load a directory written by :func:`save_cogqa` (strict: every tensor must match)."""
    directory = Path(directory)
    settings = json.loads((directory / "cogqa.json").read_text(encoding="utf-8"))
    tokens = (directory / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    encoder = TransformerEncoder.from_pretrained(directory / "encoder")
    reader = CogQAReader(WordVocab(tokens), ReaderConfig(**settings["reader"]), encoder)
    reasoner = CogQAReasoner(
        reader.config.hidden_size, settings["gnn_hidden"], settings["gnn_layers"]
    )
    tensors = load_file(str(directory / "heads.safetensors"))
    reader.span_head.load_state_dict(
        {k.removeprefix("span_head."): v for k, v in tensors.items() if k.startswith("span_head.")}
    )
    reasoner.load_state_dict(
        {k.removeprefix("reasoner."): v for k, v in tensors.items() if k.startswith("reasoner.")}
    )
    reader.eval()
    reasoner.eval()
    return CogQASystem(
        reader, reasoner, max_depth=settings["max_depth"], max_nodes=settings["max_nodes"]
    )
