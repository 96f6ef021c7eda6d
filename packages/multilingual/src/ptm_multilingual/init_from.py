"""Continue XLM pre-training (MLM + TLM) from a checkpoint: ``init_from=<folder>``.

Two kinds of folder start an XLM run:

- **a Hugging Face XLM-R (or RoBERTa) folder** (``model_type`` ``xlm-roberta``/``roberta``,
  with its ``tokenizer.json``). Its layers fill XLM's text stack tensor for tensor, its
  ``lm_head`` fills the masked-LM head, and its own SentencePiece/BPE tokenizer prepares
  the corpora (no vocabulary is trained). XLM-R has no language embeddings (Conneau et al.,
  2020, dropped them), so XLM's table starts at **zero**: the run's first forward pass is
  XLM-R's, and TLM then learns the language vectors from there. XLM-R's head keeps its
  dense + LayerNorm transform (BERT's :class:`~ptm_core.heads.mlm.MaskedLMHead`) instead of
  XLM's single projection.
- **a ptm XLM ``final/``** (``"ptm_model": "xlm"``): encoder, language table, heads and
  shared tokenizer, continued as they are. Its languages must cover the corpora's.

Any other folder is refused in one line naming its ``config.json`` and ``model_type``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import torch
from tokenizers import Tokenizer

from ptm_core.checkpoints.init_report import check_folder_vocabulary, report_init
from ptm_core.checkpoints.io import read_json_object
from ptm_core.encoders import TransformerEncoder
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.objectives import ObjectiveMix
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.objective import XLMMaskedLMObjective
from ptm_multilingual.prepared_data import XLMInputs
from ptm_multilingual.settings import XLMData
from ptm_multilingual.tokenizer import LANGUAGES_FILE, TOKENIZER_FILE, SharedBPETokenizer

logger = logging.getLogger(__name__)

#: Hugging Face model types whose layers and tokenizer an XLM run can start from.
HF_START_TYPES = ("xlm-roberta", "roberta")


@dataclass(frozen=True)
class XLMStart:
    """An ``init_from`` folder, checked: where XLM's encoder, head and tokenizer come from.

    Attributes:
        folder: the folder.
        hf_model_type: ``xlm-roberta``/``roberta`` for a Hugging Face folder; ``None`` for a
            ptm XLM ``final/``.
        tokenizer: the folder's tokenizer, with the languages of the run.
    """

    folder: Path
    hf_model_type: str | None
    tokenizer: SharedBPETokenizer

    @classmethod
    def open(cls, folder: str | Path, data: XLMData) -> XLMStart:
        """Check ``folder`` and read its tokenizer.

        Raises:
            ValueError: no ``config.json``/``tokenizer.json``, another ``model_type``,
                ``data.tokenizer`` given as well, or languages the folder does not know.
        """
        path = Path(folder)
        config = read_json_object(path / "config.json")
        if data.tokenizer is not None:
            raise ValueError(
                f"data.tokenizer={data.tokenizer} and init_from={folder}: the corpora are "
                "tokenised with the init_from folder's own tokenizer (its ids index the "
                "token table); drop data.tokenizer"
            )
        if not (path / TOKENIZER_FILE).is_file():
            raise ValueError(
                f"{path / TOKENIZER_FILE}: missing; an XLM run starts from a folder with its "
                "tokenizer (save it there with tokenizer.save_pretrained)"
            )
        model_type = config.get("model_type")
        if config.get("ptm_model") == "xlm" or str(config.get("ptm_format", "")).startswith(
            "ptm-xlm"
        ):
            own = SharedBPETokenizer.from_directory(path)
            missing = sorted(set(_languages(data)) - set(own.languages))
            if missing:
                raise ValueError(
                    f"{path / LANGUAGES_FILE}: the folder's language table has "
                    f"{own.languages}, not {missing} of the corpora; continue on those "
                    "languages only, or start from an XLM-R folder (no language table)"
                )
            return cls(path, None, own)
        if model_type not in HF_START_TYPES:
            raise ValueError(
                f"{path / 'config.json'}: model_type {model_type!r}; XLM pre-training starts "
                f"from an XLM-R/RoBERTa folder ({', '.join(HF_START_TYPES)}) or a ptm XLM "
                "final/ folder"
            )
        tokenizer = SharedBPETokenizer(
            Tokenizer.from_file(str(path / TOKENIZER_FILE)), _languages(data)
        )
        return cls(path, str(model_type), tokenizer)

    @contextmanager
    def tokenizer_folder(self) -> Iterator[Path]:
        """The tokenizer saved as a shared-tokenizer folder (what :func:`prepare_xlm` takes)."""
        with TemporaryDirectory(prefix="ptm-xlm-init-") as scratch:
            yield self.tokenizer.save(scratch)

    def check_prepared(self, tokenizer: SharedBPETokenizer, prepared: str | None) -> None:
        """Refuse a ``data.prepared`` folder tokenised with another vocabulary.

        Raises:
            ValueError: its pieces or ids differ from the folder's (one line, both paths).
        """
        if prepared is None:
            return
        if tokenizer.tokenizer.get_vocab() != self.tokenizer.tokenizer.get_vocab():
            raise ValueError(
                f"data.prepared={prepared} was tokenised with another vocabulary than "
                f"{self.folder / TOKENIZER_FILE}; prepare the corpora again with init_from "
                "set (or with data.tokenizer=<that folder>)"
            )

    def encoder(self, languages: list[str]) -> XLMEncoder:
        """XLM's encoder with the folder's weights (language table zero for XLM-R)."""
        if self.hf_model_type is None:
            xlm = XLMEncoder.from_pretrained(self.folder)
            if xlm.languages != languages:
                xlm = _reorder_languages(xlm, languages)
        else:
            text = TransformerEncoder.from_pretrained(self.folder)
            xlm = XLMEncoder(text, languages)
            with torch.no_grad():
                xlm.lang_embeddings.weight.zero_()
        check_folder_vocabulary(self.folder, xlm.vocab_size, self.tokenizer.vocab_size)
        return xlm

    def load_heads(self, mix: ObjectiveMix, xlm: XLMEncoder) -> None:
        """Fill the masked-LM head from the folder; log which tensors came from it."""
        loaded: list[torch.nn.Module | str] = [xlm.encoder]
        if self.hf_model_type is None:
            from ptm_core.pretraining import load_init_heads

            if transform_head_in(self.folder):
                for _, objective in mix:
                    if isinstance(objective, XLMMaskedLMObjective):
                        use_transform_head(objective, xlm)
            fresh = set(load_init_heads(mix, self.folder))
            shared = {p.data_ptr() for p in xlm.parameters()}
            own = [
                f"objectives.{k}"
                for k, v in mix.state_dict().items()
                if k not in fresh or v.data_ptr() in shared
            ]
            report_init(_Whole(xlm, mix), self.folder, [*loaded, xlm.lang_embeddings, *own])
            return
        from ptm_core.checkpoints.hf.pretraining_heads import copy_head
        from ptm_core.checkpoints.hf.roberta import MLM_NAMES
        from ptm_core.checkpoints.io import read_weights

        weights, weights_path = read_weights(self.folder)
        heads = {k: v for k, v in weights.items() if k.startswith("lm_head.")}
        filled: list[torch.nn.Module] = []
        for name, objective in mix:
            if isinstance(objective, XLMMaskedLMObjective) and heads:
                use_transform_head(objective, xlm)
                try:
                    copy_head(heads, objective, MLM_NAMES)
                except ValueError as exc:
                    raise ValueError(
                        f"{weights_path}: the {name} head does not fit: {exc}"
                    ) from None
                filled.append(objective)
        if not heads:
            logger.warning(
                "%s holds no lm_head (an XLMRobertaModel, not ...ForMaskedLM): the masked-LM "
                "head starts from random init",
                weights_path,
            )
        report_init(_Whole(xlm, mix), self.folder, [*loaded, *filled])


def use_transform_head(objective: XLMMaskedLMObjective, xlm: XLMEncoder) -> None:
    """Give ``objective`` BERT's/XLM-R's head (dense, activation, LayerNorm, tied decoder)."""
    config = xlm.encoder.config
    objective.head = MaskedLMHead(
        config.hidden_size,
        xlm.vocab_size,
        activation=config.activation,
        layer_norm_eps=config.layer_norm_eps,
        tie_to=xlm.word_embeddings,
    )


def transform_head_in(folder: str | Path) -> bool:
    """Whether a ptm XLM folder's heads file holds the transform head (an XLM-R start)."""
    from safetensors import safe_open

    path = Path(folder) / "heads.safetensors"
    if not path.is_file():
        return False
    with safe_open(str(path), framework="pt") as handle:
        return any(".head.dense." in key for key in handle.keys())  # noqa: SIM118


class _Whole(torch.nn.Module):
    """The network and its objectives as one module, for the loaded/fresh count."""

    def __init__(self, network: XLMEncoder, objectives: ObjectiveMix) -> None:
        super().__init__()
        self.network = network
        self.objectives = objectives


def _languages(data: XLMData) -> list[str]:
    """The corpora's languages, sorted (as a trained shared tokenizer orders them)."""
    if data.prepared is not None:
        saved = Path(data.prepared) / "tokenizer" / LANGUAGES_FILE
        return list(json.loads(saved.read_text(encoding="utf-8"))["languages"])
    return sorted(XLMInputs.find(data.corpus, data.parallel).text_streams())


def _reorder_languages(xlm: XLMEncoder, languages: list[str]) -> XLMEncoder:
    """``xlm`` with its language table's rows in the order of ``languages``."""
    rows = [xlm.languages.index(lang) for lang in languages]
    out = XLMEncoder(xlm.encoder, languages)
    with torch.no_grad():
        out.lang_embeddings.weight.copy_(xlm.lang_embeddings.weight[rows])
    return out


__all__ = ["HF_START_TYPES", "XLMStart", "transform_head_in", "use_transform_head"]
