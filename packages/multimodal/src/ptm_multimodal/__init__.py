"""ptm-multimodal: visual features (timm grids, precomputed regions), VisualBERT, ViLBERT.

Everything builds on ptm-core: VisualBERT feeds text and region embeddings to one core
encoder through ``inputs_embeds``; ViLBERT runs core text layers and a core-built image
stream joined by co-attention. See ``packages/multimodal/README.md``.
"""

from ptm_multimodal.alignment import AlignmentHead, AlignmentObjective
from ptm_multimodal.boxes import encode_boxes, grid_boxes
from ptm_multimodal.co_attention import CoAttentionLayer, CrossAttention
from ptm_multimodal.data import (
    ImageTextBatches,
    ImageTextDataset,
    ImageTextError,
    ImageTextPair,
    InMemoryPairs,
    PairRows,
    read_image_text_pairs,
)
from ptm_multimodal.evaluation import (
    MatchingResult,
    RetrievalResult,
    matching_accuracy,
    retrieval_recall,
)
from ptm_multimodal.feature_spec import FeatureMismatchError, FeatureSpec, hash_module, hash_text
from ptm_multimodal.finetune import finetune_image_text, predict_image_text
from ptm_multimodal.grid_features import GridFeatureExtractor, grid_feature_set
from ptm_multimodal.loading import load_multimodal
from ptm_multimodal.lxmert import LxmertModel, LxmertOutput
from ptm_multimodal.lxmert_hf import load_hf_lxmert, save_hf_lxmert
from ptm_multimodal.lxmert_loading import load_lxmert
from ptm_multimodal.lxmert_pretraining import (
    LxmertImageQAObjective,
    LxmertMaskedLMObjective,
    LxmertMatchingObjective,
    LxmertObjectPredictionObjective,
)
from ptm_multimodal.matching import ImageTextMatchObjective
from ptm_multimodal.prepared import (
    GridExtraction,
    PreparedImageText,
    PreparedImageTextError,
    open_image_text,
    prepare_image_text,
)
from ptm_multimodal.pretraining import (
    MultimodalPretrainResult,
    check_checkpoint_features,
    pretrain_multimodal,
)
from ptm_multimodal.pretraining_model import MultimodalOutput, MultimodalPretraining
from ptm_multimodal.region_features import (
    ImageRegions,
    RegionFeatureError,
    RegionFeatureSet,
    read_region_features,
    stack_regions,
    write_region_features,
)
from ptm_multimodal.region_masking import MaskedRegionObjective, RegionPredictionHead, mask_regions
from ptm_multimodal.task_data import (
    ImageTextTask,
    ImageTextTaskError,
    read_image_text_task,
    vqa_accuracy,
)
from ptm_multimodal.task_io import load_image_text_task_model, save_image_text_task_model
from ptm_multimodal.task_model import ImageTextTaskModel, VilbertFusionHead
from ptm_multimodal.training import train_steps
from ptm_multimodal.vilbert import ImageEmbeddings, VilbertModel, VilbertOutput, vilbert
from ptm_multimodal.visual_features import VisualFeatures
from ptm_multimodal.visualbert import VisualBertModel, visualbert
from ptm_multimodal.visualbert_hf import hf_visualbert_to_ptm, load_hf_visualbert

# LXMERT's builder stays `ptm_multimodal.lxmert.lxmert` (the configs' _target_): exporting it
# here would shadow the submodule of the same name.
__all__ = [
    "AlignmentHead",
    "AlignmentObjective",
    "CoAttentionLayer",
    "CrossAttention",
    "FeatureMismatchError",
    "FeatureSpec",
    "GridExtraction",
    "GridFeatureExtractor",
    "ImageEmbeddings",
    "ImageRegions",
    "ImageTextBatches",
    "ImageTextDataset",
    "ImageTextError",
    "ImageTextMatchObjective",
    "ImageTextPair",
    "ImageTextTask",
    "ImageTextTaskError",
    "ImageTextTaskModel",
    "InMemoryPairs",
    "LxmertImageQAObjective",
    "LxmertMaskedLMObjective",
    "LxmertMatchingObjective",
    "LxmertModel",
    "LxmertObjectPredictionObjective",
    "LxmertOutput",
    "MaskedRegionObjective",
    "MatchingResult",
    "MultimodalOutput",
    "MultimodalPretrainResult",
    "MultimodalPretraining",
    "PairRows",
    "PreparedImageText",
    "PreparedImageTextError",
    "RegionFeatureError",
    "RegionFeatureSet",
    "RegionPredictionHead",
    "RetrievalResult",
    "VilbertFusionHead",
    "VilbertModel",
    "VilbertOutput",
    "VisualBertModel",
    "VisualFeatures",
    "check_checkpoint_features",
    "encode_boxes",
    "finetune_image_text",
    "grid_boxes",
    "grid_feature_set",
    "hash_module",
    "hash_text",
    "hf_visualbert_to_ptm",
    "load_hf_lxmert",
    "load_hf_visualbert",
    "load_image_text_task_model",
    "load_lxmert",
    "load_multimodal",
    "mask_regions",
    "matching_accuracy",
    "open_image_text",
    "predict_image_text",
    "prepare_image_text",
    "pretrain_multimodal",
    "read_image_text_pairs",
    "read_image_text_task",
    "read_region_features",
    "retrieval_recall",
    "save_hf_lxmert",
    "save_image_text_task_model",
    "stack_regions",
    "train_steps",
    "vilbert",
    "visualbert",
    "vqa_accuracy",
    "write_region_features",
]
