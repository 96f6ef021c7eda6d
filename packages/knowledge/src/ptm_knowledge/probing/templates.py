"""Cloze templates per relation: ``"[X] was born in [Y] ."``.

``[X]`` is the subject's name and ``[Y]`` the object, which the model must fill in. A
relation with no template gets one derived from its name (``born_in`` -> ``"[X] born in
[Y] ."``, ``_hypernym`` -> ``"[X] hypernym [Y] ."``); a YAML file overrides or adds
templates::

    born_in: "[X] was born in [Y] ."
    _hypernym: "[X] is a kind of [Y] ."
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

SUBJECT = "[X]"
OBJECT = "[Y]"

#: Templates shipped with ptm: the sample KG's relations and WordNet's (WN18RR) pointers.
#: LAMA's own T-REx templates are phrased the same way ("[X] was born in [Y] .").
BUILTIN_TEMPLATES: dict[str, str] = {
    # data_specs/knowledge_graph/sample
    "award_received": "[X] received the [Y] .",
    "born_in": "[X] was born in [Y] .",
    "capital_of": "[X] is the capital of [Y] .",
    "citizen_of": "[X] is a citizen of [Y] .",
    "died_in": "[X] died in [Y] .",
    "educated_at": "[X] was educated at [Y] .",
    "flows_through": "[X] flows through [Y] .",
    "lived_in": "[X] lived in [Y] .",
    "located_in": "[X] is located in [Y] .",
    "part_of": "[X] is part of [Y] .",
    "shares_border_with": "[X] shares a border with [Y] .",
    "worked_at": "[X] worked at [Y] .",
    "subclass_of": "[X] is a kind of [Y] .",
    # WordNet pointers as ptm's WordNet reader names them (ptm wordnet-kg)
    "_hypernym": "[X] is a kind of [Y] .",
    "_instance_hypernym": "[X] is an instance of [Y] .",
    "_member_meronym": "[X] has the member [Y] .",
    "_has_part": "[X] has the part [Y] .",
    "_derivationally_related_form": "[X] is related to the word [Y] .",
    "_also_see": "[X] is like [Y] .",
    "_similar_to": "[X] is similar to [Y] .",
    "_verb_group": "to [X] is to [Y] .",
    "_synset_domain_topic_of": "[X] is a term of [Y] .",
    "_member_of_domain_usage": "[X] is a usage of [Y] .",
    "_member_of_domain_region": "[X] is a term used in [Y] .",
}


class TemplateError(ValueError):
    """A template file or entry that cannot be used (the message names file and key)."""


def check_template(template: str, relation: str, source: str) -> str:
    """``template`` if it has exactly one ``[X]`` and one ``[Y]``.

    Raises:
        TemplateError: names ``source``, the relation and what is wrong.
    """
    if template.count(SUBJECT) != 1 or template.count(OBJECT) != 1:
        raise TemplateError(
            f"{source}: template of {relation!r} is {template!r}; it needs exactly one "
            f"{SUBJECT} (the subject) and one {OBJECT} (the object to predict)"
        )
    return template


def derived_template(relation: str) -> str:
    """A template from the relation's name: underscores and camelCase become words.

    ``born_in`` -> ``"[X] born in [Y] ."``; ``_hypernym`` -> ``"[X] hypernym [Y] ."``;
    ``P19`` stays ``"[X] P19 [Y] ."`` (name such relations in a template file).
    """
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", relation).replace("_", " ").split()
    return f"{SUBJECT} {' '.join(w.lower() for w in words) or relation} {OBJECT} ."


def load_templates(path: str | Path | None = None) -> dict[str, str]:
    """The built-in templates, overridden and extended by the YAML mapping at ``path``.

    Raises:
        TemplateError: the file is missing, not a mapping of relation -> string, or a
            template lacks ``[X]``/``[Y]`` (names the file and the relation).
    """
    templates = dict(BUILTIN_TEMPLATES)
    if path is None:
        return templates
    import yaml

    file = Path(path)
    if not file.is_file():
        raise TemplateError(f"{file}: no such template file (a YAML mapping relation: template)")
    try:
        loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TemplateError(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(loaded, Mapping):
        raise TemplateError(
            f"{file}: expected a mapping of relation -> template, such as "
            f'born_in: "{SUBJECT} was born in {OBJECT} ."'
        )
    for relation, template in loaded.items():
        if not isinstance(template, str):
            raise TemplateError(f"{file}: the template of {relation!r} must be a string")
        templates[str(relation)] = check_template(template, str(relation), str(file))
    return templates
