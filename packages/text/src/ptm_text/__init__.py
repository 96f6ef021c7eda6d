"""ptm text: pre-training systems that change the objective on plain text.

Each system is one folder (``ptm_text.<system>``) holding its objectives, its
:class:`~ptm_core.families.spec.FamilySpec` and its settings; nothing in ``ptm_core`` or
``flows`` names it.
"""
