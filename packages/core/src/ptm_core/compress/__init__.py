"""Compression for serving: quantisation, head pruning, layer dropping, ONNX export.

``compress_final(source, output, method)`` is what ``ptm compress`` runs; the pieces are
public too: :func:`quantize_dynamic_int8`, :func:`quantize_weight_only`,
:func:`head_importance` / :func:`select_heads_to_prune` / :func:`prune_heads` (Michel et al.,
2019), :func:`drop_layers`, :func:`export_onnx`, and :func:`load_compressed`, which loads any
directory ``ptm compress`` writes (pruned and layer-dropped ones are ordinary ``final/``
folders that ``load_task_model`` loads as well). ONNX needs ``pip install 'ptm-core[compress]'``.
"""

from ptm_core._lazy import lazy_exports

_EXPORTS = {
    "METHODS": "ptm_core.compress.methods",
    "CompressionResult": "ptm_core.compress.methods",
    "compress_final": "ptm_core.compress.methods",
    "FinalModel": "ptm_core.compress.final_dir",
    "load_final": "ptm_core.compress.final_dir",
    "load_compressed": "ptm_core.compress.final_dir",
    "weight_bytes": "ptm_core.compress.final_dir",
    "WeightOnlyLinear": "ptm_core.compress.quantize",
    "quantize_dynamic_int8": "ptm_core.compress.quantize",
    "quantize_weight_only": "ptm_core.compress.quantize",
    "head_importance": "ptm_core.compress.prune",
    "head_mask": "ptm_core.compress.prune",
    "select_heads_to_prune": "ptm_core.compress.prune",
    "prune_heads": "ptm_core.compress.prune",
    "drop_layers": "ptm_core.compress.prune",
    "layers_to_keep": "ptm_core.compress.prune",
    "export_onnx": "ptm_core.compress.onnx_export",
    "onnx_session": "ptm_core.compress.onnx_export",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
