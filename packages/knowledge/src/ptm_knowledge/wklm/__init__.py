"""WKLM (Xiong et al., 2020): type-constrained entity replacement and its detection."""

from ptm_knowledge.wklm.detection import (
    EntityReplacementObjective,
    OutsideMentionsMLMObjective,
    ReplacementDetectionHead,
    boundary_positions,
)
from ptm_knowledge.wklm.pretraining import (
    EntityReplacementRows,
    ReplacementBatches,
    plan_wklm,
)
from ptm_knowledge.wklm.replacement import (
    ReplacedRow,
    ReplacementStats,
    SurfaceForms,
    replace_mentions,
    row_mentions,
)
from ptm_knowledge.wklm.type_index import NO_TYPE, EntityTypeIndex

__all__ = [
    "NO_TYPE",
    "EntityReplacementObjective",
    "EntityReplacementRows",
    "EntityTypeIndex",
    "OutsideMentionsMLMObjective",
    "ReplacedRow",
    "ReplacementBatches",
    "ReplacementDetectionHead",
    "ReplacementStats",
    "SurfaceForms",
    "boundary_positions",
    "plan_wklm",
    "replace_mentions",
    "row_mentions",
]
