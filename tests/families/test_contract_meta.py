"""Every registered family has a contract case (``tests/families/family_contract.py``).

The families come from the installed packages' ``ptm.families`` entry points; the cases from
importing every ``test_contract_*.py`` here. A family without its case fails here, by name.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from family_contract import FamilyContract

from ptm_core.families import families

HERE = Path(__file__).resolve().parent


# The case modules stay referenced: __subclasses__ holds weak references, so a module
# dropped after loading can take its case class with it before the walk below.
_LOADED: list[object] = []


def _cases() -> dict[str, type[FamilyContract]]:
    for path in sorted(HERE.glob("test_contract_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"contract_cases.{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED.append(module)
    found: dict[str, type[FamilyContract]] = {}
    todo = [FamilyContract]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if "family" in vars(sub):
                found[sub.family] = sub
    return found


def test_every_registered_family_has_a_contract_case() -> None:
    cases = _cases()
    missing = sorted(set(families()) - set(cases))
    assert not missing, (
        f"families without a contract case: {missing}; add tests/families/"
        "test_contract_<family>.py with a FamilyContract subclass (see family_contract.py)"
    )


def test_every_case_names_a_registered_family() -> None:
    stray = sorted(set(_cases()) - set(families()))
    assert not stray, f"contract cases of families no package registers: {stray}"
