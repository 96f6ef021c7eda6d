"""Every config in configs/ composes and instantiates at tiny size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import DictConfig

from flows.config import ConfigError, compose_config, config_dir
from ptm_core import TransformerEncoder
from ptm_core.objectives import Objective
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_core.training import TrainerConfig

VOCAB = VocabInfo(vocab_size=120, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
TINY = ["model.hidden_size=16", "model.num_heads=2", "model.intermediate_size=32"]


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


# Multimodal models are not TransformerEncoders and their objectives need the whole model:
# their own recipe builds both; a group option is checked inside its experiment.
MULTIMODAL = {"visualbert", "vilbert", "lxmert", "vlbert", "imagebert"}
# Encoder-decoder presets (recipe seq2seq): their model and objective build together too.
SEQ2SEQ_OPTIONS = {
    "model=bart_tiny": "bart_tiny",
    "objective=bart": "bart_tiny",
    "model=t5_tiny": "t5_tiny",
    "objective=t5": "t5_tiny",
    "model=mass_tiny": "mass_tiny",
    "objective=mass": "mass_tiny",
}
MULTIMODAL_OPTIONS = {
    "model=visualbert_tiny": "visualbert_tiny",
    "objective=vl_visualbert": "visualbert_tiny",
    "data=image_text_synthetic": "visualbert_tiny",
    "data=image_text_sample": "visualbert_tiny",
    "model=vilbert_tiny": "vilbert_tiny",
    "objective=vl_vilbert": "vilbert_tiny",
    "model=lxmert_tiny": "lxmert_tiny",
    "objective=vl_lxmert": "lxmert_tiny",
    "model=vlbert_tiny": "vlbert_tiny",
    "objective=vl_vlbert": "vlbert_tiny",
    "model=imagebert_tiny": "imagebert_tiny",
    "objective=vl_imagebert": "imagebert_tiny",
}


# Permutation LM needs a relative-position encoder: checked inside its experiment.
NEEDS_EXPERIMENT = {"objective=permutation_lm": "xlnet_tiny"}
# Static embeddings and recurrent LMs (not Transformers, so no TINY overrides): each recipe
# builds its own model; a model option is checked inside its experiment.
NOT_TRANSFORMER_OPTIONS = {
    "model=word2vec_tiny": "word2vec_tiny",
    "model=glove_tiny": "glove_tiny",
    "model=nnlm_tiny": "nnlm_tiny",
    "model=elmo_tiny": "elmo_tiny",
    "model=elmo_original": "elmo_tiny",
    "model=awd_lstm_tiny": "awd_lstm_tiny",
    "model=awd_lstm_paper": "awd_lstm_tiny",
    "model=cove_tiny": "cove_tiny",
}
NOT_TRANSFORMER = {"static_embeddings", "elmo", "awd_lstm", "cove"}


def _check_not_transformer(cfg: DictConfig) -> None:
    recipe = cfg.recipe
    from flows.runner import select, settings_of

    spec, _ = select(cfg)
    assert spec.name == recipe
    assert settings_of(spec, cfg) is not None  # every data key is a settings field
    if recipe == "static_embeddings":
        from ptm_classic.static.run import method_of

        assert method_of(instantiate(cfg.model, _convert_="all")) in ("word2vec", "glove", "nnlm")
        return
    if recipe == "cove":
        from ptm_classic.cove.translation import CoVeConfig

        config = instantiate(cfg.model)(input_size=8, target_vocab_size=VOCAB.vocab_size)
        assert isinstance(config, CoVeConfig) and config.target_vocab_size == VOCAB.vocab_size
        return
    if recipe == "elmo":
        from ptm_classic.recurrent.bilm import bilm_on_meta

        bilm = bilm_on_meta(instantiate(cfg.model)(vocab_size=VOCAB.vocab_size))
        assert bilm.num_layers == cfg.model.num_layers + 1
    else:
        from ptm_classic.recurrent.awd_lstm import AWDLSTMLanguageModel

        model = AWDLSTMLanguageModel(instantiate(cfg.model)(vocab_size=VOCAB.vocab_size))
        assert model.config.vocab_size == VOCAB.vocab_size


def _sentilr_network(encoder: TransformerEncoder) -> Any:
    from ptm_text.sentilr import SentiLRKnowledgeEmbeddings, SentiLRModel

    return SentiLRModel(encoder, SentiLRKnowledgeEmbeddings(encoder.config.hidden_size, 2))


# Families whose network wraps the core encoder the model preset builds (their plan does
# this once the data gives the label count).
FAMILY_NETWORKS = {"sentilr": _sentilr_network}


def _instantiate_all(overrides: list[str], tmp_path: Path) -> None:
    options = {
        **MULTIMODAL_OPTIONS,
        **SEQ2SEQ_OPTIONS,
        **NEEDS_EXPERIMENT,
        **NOT_TRANSFORMER_OPTIONS,
    }
    extra = [f"experiment={options[o]}" for o in overrides if o in options]
    cfg = compose_config([*extra, *overrides, f"trainer.output_dir={tmp_path}"])
    if cfg.get("recipe") not in NOT_TRANSFORMER:
        cfg = compose_config([*extra, *overrides, *TINY, f"trainer.output_dir={tmp_path}"])
    if cfg.get("recipe") in NOT_TRANSFORMER:
        _check_not_transformer(cfg)
    elif cfg.get("recipe") in MULTIMODAL:
        # what the families' plan builds once the data gives vocabulary and features (the
        # synthetic detector's: 32 wide, with classes, which ImageBERT's MOC classifies)
        from ptm_multimodal.synthetic import detector_spec

        model = instantiate(cfg.model)(
            vocab_size=VOCAB.vocab_size, visual_embedding_dim=32, feature_spec=detector_spec()
        )
        objectives = {
            name: build_objective(instantiate(node), model, VOCAB)
            for name, node in cfg.objective.objectives.items()
        }
        assert model.hidden_size == 16
        assert all(isinstance(o, Objective) for o in objectives.values())
    elif cfg.get("recipe") == "seq2seq":
        from ptm_core.encoders import EncoderDecoderModel
        from ptm_core.objectives import Seq2SeqObjective
        from ptm_core.seq2seq_pretraining import build_model

        objectives = {
            name: instantiate(node)(vocab=VOCAB, max_length=cfg.data.max_length)
            for name, node in cfg.objective.objectives.items()
        }
        model = build_model(instantiate(cfg.model), VOCAB, next(iter(objectives.values())))
        assert isinstance(model, EncoderDecoderModel)
        assert model.config.hidden_size == 16
        assert all(isinstance(o, Seq2SeqObjective) for o in objectives.values())
    else:
        encoder = instantiate(cfg.model)(vocab_size=VOCAB.vocab_size)
        assert isinstance(encoder, TransformerEncoder)
        assert encoder.config.hidden_size == 16
        network = FAMILY_NETWORKS.get(cfg.get("family"), lambda e: e)(encoder)
        for name, node in cfg.objective.objectives.items():
            objective = build_objective(instantiate(node), network, VOCAB)
            assert isinstance(objective, Objective), name
    assert set(cfg.objective.weights) <= set(cfg.objective.objectives)
    trainer = instantiate(cfg.trainer, _convert_="all")
    assert isinstance(trainer, TrainerConfig)
    if "data" in cfg:  # image-text fine-tunes read their task's files, not a corpus
        source = cfg.data.corpus if "corpus" in cfg.data else cfg.data.parallel  # CoVe: pairs
        assert Path(source).exists(), source
    if any(o.startswith("experiment=") for o in overrides):
        # A whole preset; a lone group option of another family (data=kg_sample) on the
        # default BERT config is no config a family runs.
        _check_settings(cfg)


def _check_settings(cfg: DictConfig) -> None:
    """A config a family runs fills that family's typed settings (no unknown key)."""
    from flows import runner
    from ptm_core.families import registry

    recipe = cfg.get("recipe")
    if cfg.get("family") or any(recipe in s.recipes for s in registry.families().values()):
        spec, _ = runner.select(cfg)
        runner.settings_of(spec, cfg)


@pytest.mark.parametrize("experiment", _options("experiment"))
def test_every_experiment_composes_and_instantiates(experiment: str, tmp_path: Path) -> None:
    _instantiate_all([f"experiment={experiment}"], tmp_path)


@pytest.mark.parametrize(
    "override",
    [
        f"{group}={option}"
        for group in ("model", "objective", "data", "trainer")
        for option in _options(group)
    ],
)
def test_every_group_option_composes_and_instantiates(override: str, tmp_path: Path) -> None:
    _instantiate_all([*_family_of(override), override], tmp_path)


# Data presets no experiment names, with an experiment of the family whose data they are.
_DATA_FAMILY_EXPERIMENT = {"image_text_sample": "visualbert_tiny"}
# Objectives that only a family's network can carry, with an experiment of that family.
_OBJECTIVE_FAMILY_EXPERIMENT = {"sentilr": "sentilr_tiny"}


def _family_of(override: str) -> list[str]:
    """A data preset is typed by its family's settings: compose it with an experiment of
    that family (one whose defaults name it), not on the default BERT config."""
    group, _, option = override.partition("=")
    if group == "objective" and option in _OBJECTIVE_FAMILY_EXPERIMENT:
        return [f"experiment={_OBJECTIVE_FAMILY_EXPERIMENT[option]}"]
    if group != "data" or option == "sample_corpus":
        return []
    for path in sorted((config_dir() / "experiment").glob("*.yaml")):
        if f"override /data: {option}" in path.read_text(encoding="utf-8"):
            return [f"experiment={path.stem}"]
    return [f"experiment={_DATA_FAMILY_EXPERIMENT[option]}"]


def test_experiment_overrides_reach_the_trainer() -> None:
    cfg = compose_config(["experiment=bert_tiny", "trainer.max_steps=50"])
    assert cfg.trainer.max_steps == 50
    assert cfg.experiment_name == "bert_tiny"
    assert cfg.trainer.output_dir == "runs/bert_tiny"


def test_attention_group_reaches_the_trainer() -> None:
    cfg = compose_config(["experiment=bert_tiny"])
    assert (cfg.trainer.attention_backend, cfg.trainer.unpad) == ("auto", "auto")
    assert cfg.trainer.structured_masks is False
    cfg = compose_config(
        ["experiment=unilm_tiny", "attention.structured_masks=true", "attention.backend=flex"]
    )
    assert cfg.trainer.structured_masks is True and cfg.trainer.attention_backend == "flex"
    with pytest.raises(ValueError, match="structured_masks"):
        TrainerConfig(output_dir="x", structured_masks="yes")  # type: ignore[arg-type]


def test_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"(?s)experiment.*bert_tiny"):
        compose_config(["experiment=does_not_exist"])
    with pytest.raises(ConfigError, match=r"trainer\.max_stepz"):
        compose_config(["trainer.max_stepz=3"])
