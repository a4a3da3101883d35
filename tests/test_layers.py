"""Imports run one way: no circle among sparkcast's modules, and no import against the layers.

Every import counts, wherever it is written: at module level, inside a function, or under
``TYPE_CHECKING`` (a circle is a circle however it is spelled). ``from package import name``
counts as an import of the module ``package.name`` when that is a module, else of ``package``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sparkcast

SRC = Path(sparkcast.__file__).parent

#: The layers, lowest first: a module may import its own layer's modules (without a circle) and
#: any lower layer's, never a higher one's. A module belongs to the first entry that prefixes it.
LAYERS: list[tuple[str, ...]] = [
    ("sparkcast.errors", "sparkcast.version", "sparkcast.jvm"),
    ("sparkcast.api",),
    ("sparkcast.core",),
    ("sparkcast.spark.layout",),  # pure names, which monitoring reads written outputs by
    ("sparkcast.monitoring", "sparkcast.testing"),
    ("sparkcast.spark.plan", "sparkcast.spark.environment"),
    ("sparkcast.spark.state",),
    ("sparkcast.spark.observe",),
    ("sparkcast.spark.launch",),
    ("sparkcast.spark.execution",),
    ("sparkcast.spark.planning",),
    ("sparkcast.spark.outputs",),
    ("sparkcast.spark.tools",),
    ("sparkcast.spark.datastream",),
    ("sparkcast.spark",),  # the package: its public names, loaded lazily
    ("sparkcast.sources",),  # broadcast sides read from outside (a PostgreSQL table)
    ("sparkcast",),  # the root package: the API, and ``Stream`` lazily
    ("sparkcast.apps",),
    ("sparkcast.cli",),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imports_of(module: str, source: str, known: set[str]) -> set[str]:
    """The sparkcast modules ``module`` imports anywhere in ``source``."""
    is_package = MODULES.get(module, Path()).name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: None if is_package else -1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        for target in targets:
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != module:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = set(MODULES)
    return {m: imports_of(m, p.read_text(encoding="utf-8"), known) for m, p in MODULES.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (strongly connected components > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str) -> int:
    best, depth = -1, -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = number, len(prefix)
    return best


def against_layers(edges: dict[str, set[str]]) -> list[str]:
    return [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
            for a, targets in sorted(edges.items()) for b in sorted(targets)
            if layer_of(b) > layer_of(a)]


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer_of(m) < 0] == []


def test_no_module_imports_one_that_imports_it_back():
    assert circles(graph()) == []


def test_imports_run_down_the_layers():
    assert against_layers(graph()) == []


def test_at_most_ten_modules_lie_directly_in_spark():
    flat = [p.name for p in (SRC / "spark").glob("*.py") if p.name != "__init__.py"]
    assert len(flat) <= 10, flat


# ---- the checker sees what it must


@pytest.mark.parametrize("spelling", [
    "from sparkcast.b import thing\n",
    "def f():\n    from sparkcast.b import thing\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sparkcast.b import Thing\n",
    "import sparkcast.b\n",
    "from . import b\n",
])
def test_a_circle_is_found_however_the_import_is_spelled(spelling):
    known = {"sparkcast.a", "sparkcast.b"}
    edges = {"sparkcast.a": imports_of("sparkcast.a", spelling, known),
             "sparkcast.b": imports_of("sparkcast.b", "from sparkcast.a import x\n", known)}
    assert circles(edges) == [["sparkcast.a", "sparkcast.b"]]


def test_an_import_up_the_layers_is_named():
    edges = {"sparkcast.core.engine": {"sparkcast.spark.plan"}, "sparkcast.spark.plan": set()}
    assert against_layers(edges) == [
        "sparkcast.core.engine (layer 2) imports sparkcast.spark.plan (layer 5)"]
