"""The layering rules, checked on the source: no module imports another module's private name,
and no code reads another object's private field outside the module that defines it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sparkcast

SRC = Path(sparkcast.__file__).parent
MODULES = sorted(SRC.rglob("*.py"))
# namedtuple's public API is spelled with a leading underscore
NAMEDTUPLE_API = frozenset({"_make", "_fields", "_asdict", "_replace", "_field_defaults"})
# PySpark's handles on the JVM objects behind a DataFrame and a StreamingQuery (the way PySpark
# itself and its users reach the Spark internals it does not wrap; spark/batch_sides.py), and
# PySpark 4.2+'s only door to Spark's offline state repartition (spark/tools/rescale.py), and
# the session's JVM gateway (the driver's JDBC connections, spark/outputs/jdbc.py) and its
# JavaSparkContext (a JVM job over chosen partitions, spark/execution/values.py), and its JVM
# session (Delta's DeltaTable.isDeltaTable takes it, spark/outputs/tables.py)
PYSPARK_JVM_HANDLES = frozenset({"_jdf", "_jsc", "_jsq", "_streamingCheckpointManager", "_jvm",
                                 "_jsparkSession"})
# confluent-kafka's documented error codes for librdkafka's local errors carry a leading
# underscore (KafkaError._PARTITION_EOF: a partition read to its end; _FENCED: a fenced producer)
KAFKA_ERROR_CODES = frozenset({"_PARTITION_EOF", "_FENCED", "_FATAL", "_STATE", "_QUEUE_FULL"})
KNOWN_APIS = NAMEDTUPLE_API | PYSPARK_JVM_HANDLES | KAFKA_ERROR_CODES


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_here(tree: ast.AST) -> set[str]:
    """Private names this module defines: functions, classes, assigned names and attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)  # ``other._x = ...`` defines nothing: it reaches in
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    slots = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in n.targets)]
    for node in slots:
        names.update(c.value for c in ast.walk(node.value)
                     if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return {n for n in names if _private(n)}


def _ours(node: ast.ImportFrom) -> bool:
    """An import from sparkcast (a private name of the standard library is another matter)."""
    return node.level > 0 or (node.module or "").split(".")[0] == "sparkcast"


def violations(source: str, module: str) -> list[str]:
    tree = ast.parse(source)
    own = _defined_here(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _ours(node):
            found += [f"{module}:{node.lineno} imports {node.module}.{a.name}"
                      for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if node.attr in own or node.attr in KNOWN_APIS:
                continue
            found.append(f"{module}:{node.lineno} reads {ast.unparse(owner)}.{node.attr}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_reaches_into_another_modules_privates(path: Path) -> None:
    assert violations(path.read_text(), str(path.relative_to(SRC))) == []


def test_the_checker_sees_both_kinds_of_reach():
    source = ("from sparkcast.core.engine import _time_key\n"
              "def f(engine, ctx):\n    ctx._valid = False\n"
              "    return engine._dead_letter, self._ok, row._fields\n")
    assert violations(source, "m.py") == ["m.py:1 imports sparkcast.core.engine._time_key",
                                          "m.py:3 reads ctx._valid",
                                          "m.py:4 reads engine._dead_letter"]


def test_a_private_name_of_the_same_module_may_be_shared():
    source = ("class A:\n    def __init__(self):\n        self._x = 1\n"
              "def peek(a):\n    return a._x\n")
    assert violations(source, "m.py") == []
