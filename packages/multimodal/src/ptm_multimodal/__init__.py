"""ptm-multimodal: visual features (timm grids, precomputed regions), VisualBERT, ViLBERT, LXMERT.

Everything builds on ptm-core: VisualBERT feeds text and region embeddings to one core
encoder through ``inputs_embeds``; ViLBERT runs core text layers and a core-built image
stream joined by co-attention. See ``packages/multimodal/README.md``.

The names below are imported on first use: importing the package (or its family specs,
:mod:`ptm_multimodal.families`) loads no torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# LXMERT's builder stays `ptm_multimodal.lxmert.lxmert` (the configs' _target_): exporting it
# here would shadow the submodule of the same name.
_EXPORTS = {
    "AlignmentHead": "ptm_multimodal.alignment",
    "AlignmentObjective": "ptm_multimodal.alignment",
    "encode_boxes": "ptm_multimodal.boxes",
    "grid_boxes": "ptm_multimodal.boxes",
    "CoAttentionLayer": "ptm_multimodal.co_attention",
    "CrossAttention": "ptm_multimodal.co_attention",
    "ImageTextBatches": "ptm_multimodal.data",
    "ImageTextDataset": "ptm_multimodal.data",
    "ImageTextError": "ptm_multimodal.data",
    "ImageTextPair": "ptm_multimodal.data",
    "InMemoryPairs": "ptm_multimodal.data",
    "PairRows": "ptm_multimodal.data",
    "read_image_text_pairs": "ptm_multimodal.data",
    "MatchingResult": "ptm_multimodal.evaluation",
    "RetrievalResult": "ptm_multimodal.evaluation",
    "matching_accuracy": "ptm_multimodal.evaluation",
    "retrieval_recall": "ptm_multimodal.evaluation",
    "FeatureMismatchError": "ptm_multimodal.feature_spec",
    "FeatureSpec": "ptm_multimodal.feature_spec",
    "hash_module": "ptm_multimodal.feature_spec",
    "hash_text": "ptm_multimodal.feature_spec",
    "finetune_image_text": "ptm_multimodal.finetune",
    "predict_image_text": "ptm_multimodal.finetune",
    "GridFeatureExtractor": "ptm_multimodal.grid_features",
    "grid_feature_set": "ptm_multimodal.grid_features",
    "load_multimodal": "ptm_multimodal.loading",
    "save_multimodal": "ptm_multimodal.loading",
    "LxmertModel": "ptm_multimodal.lxmert",
    "LxmertOutput": "ptm_multimodal.lxmert",
    "load_hf_lxmert": "ptm_multimodal.lxmert_hf",
    "save_hf_lxmert": "ptm_multimodal.lxmert_hf",
    "load_lxmert": "ptm_multimodal.lxmert_loading",
    "LxmertImageQAObjective": "ptm_multimodal.lxmert_pretraining",
    "LxmertMaskedLMObjective": "ptm_multimodal.lxmert_pretraining",
    "LxmertMatchingObjective": "ptm_multimodal.lxmert_pretraining",
    "LxmertObjectPredictionObjective": "ptm_multimodal.lxmert_pretraining",
    "ImageTextMatchObjective": "ptm_multimodal.matching",
    "GridExtraction": "ptm_multimodal.prepared",
    "PreparedImageText": "ptm_multimodal.prepared",
    "PreparedImageTextError": "ptm_multimodal.prepared",
    "open_image_text": "ptm_multimodal.prepared",
    "prepare_image_text": "ptm_multimodal.prepared",
    "MultimodalPretrainResult": "ptm_multimodal.pretraining",
    "check_checkpoint_features": "ptm_multimodal.pretraining",
    "plan_pretraining": "ptm_multimodal.pretraining",
    "ImageRegions": "ptm_multimodal.region_features",
    "RegionFeatureError": "ptm_multimodal.region_features",
    "RegionFeatureSet": "ptm_multimodal.region_features",
    "read_region_features": "ptm_multimodal.region_features",
    "stack_regions": "ptm_multimodal.region_features",
    "write_region_features": "ptm_multimodal.region_features",
    "MaskedRegionObjective": "ptm_multimodal.region_masking",
    "RegionPredictionHead": "ptm_multimodal.region_masking",
    "mask_regions": "ptm_multimodal.region_masking",
    "ImageTextTask": "ptm_multimodal.task_spec",
    "ImageTextTaskError": "ptm_multimodal.task_data",
    "read_image_text_task": "ptm_multimodal.task_data",
    "vqa_accuracy": "ptm_multimodal.task_data",
    "load_image_text_task_model": "ptm_multimodal.task_io",
    "save_image_text_task_model": "ptm_multimodal.task_io",
    "ImageTextTaskModel": "ptm_multimodal.task_model",
    "VilbertFusionHead": "ptm_multimodal.task_model",
    "ImageEmbeddings": "ptm_multimodal.vilbert",
    "VilbertModel": "ptm_multimodal.vilbert",
    "VilbertOutput": "ptm_multimodal.vilbert",
    "vilbert": "ptm_multimodal.vilbert",
    "VisualFeatures": "ptm_multimodal.visual_features",
    "VisualBertModel": "ptm_multimodal.visualbert",
    "visualbert": "ptm_multimodal.visualbert",
    "hf_visualbert_to_ptm": "ptm_multimodal.visualbert_hf",
    "VlbertModel": "ptm_multimodal.vlbert",
    "VlbertOutput": "ptm_multimodal.vlbert",
    "vlbert": "ptm_multimodal.vlbert",
    "load_hf_visualbert": "ptm_multimodal.visualbert_hf",
    "ImageBertModel": "ptm_multimodal.imagebert",
    "ImageBertOutput": "ptm_multimodal.imagebert",
    "imagebert": "ptm_multimodal.imagebert",
    "build_imagebert": "ptm_multimodal.imagebert",
    "build_visualbert": "ptm_multimodal.visualbert",
    "build_vlbert": "ptm_multimodal.vlbert",
    "SingleStreamSize": "ptm_multimodal.single_stream_size",
}

__all__ = sorted(_EXPORTS)
# Builders named like their module: ``ptm_multimodal.visualbert`` is the function (the
# configs' ``_target_``), also once ``import ptm_multimodal.visualbert`` has bound the module.
_BUILDERS = ("visualbert", "vilbert", "vlbert", "imagebert")


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _BUILDERS and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
