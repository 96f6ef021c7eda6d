"""Import cycles among ptm's modules: ``uv run python -m tools.import_cycles``.

Every ``import`` and ``from ... import`` in ``packages/*/src`` and ``flows/`` counts, also
those inside functions (a lazy import that closes a loop is still a loop: it only moves
the failure from import time to call time) and those under ``if TYPE_CHECKING:`` (they do
not run, but a module that names its caller's type depends on its caller: the layers are
upside down all the same). ``from pkg import name`` is an edge to ``pkg.name`` when that is
a module, else to ``pkg`` (its ``__init__``).

Exit status 0 when there is no cycle; 1 with each strongly connected group printed,
one edge per line, so the import to cut is visible.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_roots(root: Path = ROOT) -> list[Path]:
    """Folders whose children are top-level import names."""
    return [*sorted(root.glob("packages/*/src")), root]


def discover(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for the ptm packages and ``flows``."""
    modules: dict[str, Path] = {}
    tops = [p for src in sorted(root.glob("packages/*/src")) for p in src.iterdir()]
    tops.append(root / "flows")
    for top in tops:
        if not (top / "__init__.py").is_file():
            continue
        for path in sorted(top.rglob("*.py")):
            if "_bundle" in path.parts:
                continue
            rel = path.relative_to(top.parent).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ptm modules that ``name`` (at ``path``) imports, type-checking imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _all_imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
            continue
        if node.level:
            base_parts = package.split(".")
            if node.level > 1:
                base_parts = base_parts[: -(node.level - 1)]
            base = ".".join(base_parts)
            target = f"{base}.{node.module}" if node.module else base
        else:
            target = node.module or ""
        for alias in node.names:
            candidate = f"{target}.{alias.name}"
            found.add(candidate if candidate in modules else target)
    return {m for m in found if m in modules and m != name}


def graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); groups of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def cycles(root: Path = ROOT) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """Each cycle group with the edges inside it."""
    modules = discover(root)
    edges = graph(modules)
    out = []
    for group in strongly_connected(edges):
        members = set(group)
        inner = [(a, b) for a in group for b in sorted(edges[a]) if b in members]
        out.append((group, inner))
    return out


def render(found: Iterable[tuple[list[str], list[tuple[str, str]]]]) -> str:
    lines = []
    for group, inner in found:
        lines.append(f"cycle among {len(group)} modules:")
        lines.extend(f"  {a} -> {b}" for a, b in inner)
    return "\n".join(lines)


def main() -> int:
    found = cycles()
    n_modules = len(discover())
    if not found:
        print(f"no import cycles among {n_modules} modules")
        return 0
    print(render(found))
    print(f"{len(found)} import cycle group(s) among {n_modules} modules")
    return 1


if __name__ == "__main__":
    sys.exit(main())
