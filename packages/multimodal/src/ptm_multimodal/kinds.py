"""The ``"ptm_model"`` kinds of ptm-multimodal's folders (claimed by its family specs).

Imports nothing: the specs (:mod:`ptm_multimodal.families`), the evaluation registry and
``read_model_kind`` read these before torch is loaded.
"""

VISUALBERT = "visualbert"
VILBERT = "vilbert"
LXMERT = "lxmert"
VLBERT = "vlbert"
IMAGEBERT = "imagebert"
