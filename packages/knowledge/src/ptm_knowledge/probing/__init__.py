"""Knowledge probes: LAMA cloze statements from any ptm KG (Petroni et al., 2019)."""

from ptm_knowledge.probing.lama import LamaResult, compare_lama, score_lama
from ptm_knowledge.probing.sentence_trees import StatementTrees, TreeInjection, statement_trees
from ptm_knowledge.probing.statements import ClozeStatement, StatementSet, build_statements
from ptm_knowledge.probing.templates import TemplateError, derived_template, load_templates

__all__ = [
    "ClozeStatement",
    "LamaResult",
    "StatementSet",
    "StatementTrees",
    "TemplateError",
    "TreeInjection",
    "build_statements",
    "compare_lama",
    "derived_template",
    "load_templates",
    "score_lama",
    "statement_trees",
]
