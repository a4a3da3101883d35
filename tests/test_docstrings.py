"""Every public class, method and property of the exported API has its own docstring: the API
reference (``make docs``) is generated from them, and an IDE shows them. "Exported" is what a
user imports: ``sparkcast``, ``sparkcast.api``, ``sparkcast.spark`` (its lazy ``_EXPORTS``),
``sparkcast.testing`` and ``sparkcast.errors``, with the classes they derive from and nest,
and the classes their methods hand back (``ConnectedKeyedStreams``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import sparkcast
import sparkcast.api
import sparkcast.errors
import sparkcast.spark
import sparkcast.testing

# returned by an exported method, not importable from a package's top level
REACHABLE = ["sparkcast.spark.datastream:ConnectedKeyedStreams"]


def exported_objects() -> dict[str, Any]:
    """Every exported object by a name it is exported under (the first one)."""
    modules: dict[str, list[str]] = {
        "sparkcast": [*sparkcast.__all__, *sparkcast._SPARK_NAMES],
        "sparkcast.api": list(sparkcast.api.__all__),
        "sparkcast.spark": list(sparkcast.spark._EXPORTS),
        "sparkcast.testing": list(sparkcast.testing.__all__),
        "sparkcast.errors": [name for name, value in vars(sparkcast.errors).items()
                             if not name.startswith("_") and _defined_in(value, "sparkcast")],
    }
    found: dict[str, Any] = {}
    for module_name, names in modules.items():
        module = importlib.import_module(module_name)
        for name in names:
            found.setdefault(f"{module_name}.{name}", getattr(module, name))
    for path in REACHABLE:
        module_name, name = path.split(":")
        found[f"{module_name}.{name}"] = getattr(importlib.import_module(module_name), name)
    return found


def _defined_in(value: Any, package: str) -> bool:
    return (inspect.isclass(value) or inspect.isfunction(value)) and \
        getattr(value, "__module__", "").startswith(package)


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public callables and properties a class has, from itself and its sparkcast bases,
    each named by the class that defines it; nested classes recursively."""
    for owner in cls.__mro__:
        if not owner.__module__.startswith("sparkcast."):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_"):
                continue
            if isinstance(value, type):
                if value.__qualname__.startswith(owner.__qualname__ + "."):  # nested, not alias
                    yield f"{owner.__module__}.{value.__qualname__}", value
                    yield from _members(value)
                continue
            if isinstance(value, property):
                yield f"{owner.__module__}.{owner.__qualname__}.{name}", value.fget
            elif isinstance(value, (staticmethod, classmethod)):
                yield f"{owner.__module__}.{owner.__qualname__}.{name}", value.__func__
            elif inspect.isfunction(value):
                yield f"{owner.__module__}.{owner.__qualname__}.{name}", value


def _missing(exported: str, value: Any) -> set[str]:
    missing: set[str] = set()
    if inspect.isclass(value):
        if not value.__dict__.get("__doc__"):
            missing.add(f"{value.__module__}.{value.__qualname__}")
        for where, member in _members(value):
            doc = member.__dict__.get("__doc__") if isinstance(member, type) else \
                getattr(member, "__doc__", None)
            if not (doc or "").strip():
                missing.add(where)
    elif inspect.isfunction(value) and not (value.__doc__ or "").strip():
        missing.add(exported)
    return missing


def undocumented() -> list[str]:
    return sorted({name for exported, value in exported_objects().items()
                   for name in _missing(exported, value)})


def test_every_public_class_method_and_property_has_a_docstring():
    assert undocumented() == []


def test_the_check_sees_exported_classes_their_bases_and_nested_classes():
    names = dict(_members(sparkcast.StateTtlConfig))
    assert "sparkcast.api.ttl.StateTtlConfig.Builder.build" in names  # nested class, its methods
    assert "sparkcast.api.ttl.StateTtlConfig.new_builder" in names  # staticmethod
    assert "sparkcast.api.ttl.StateTtlConfig.refresh_on_read" in names  # property
    assert "sparkcast.api.state.ReadableMap.get" in dict(_members(sparkcast.MapState))  # a base
    exported = exported_objects()
    assert exported["sparkcast.spark.ProcessResult"].__name__ == "ProcessResult"  # lazy names
    assert "sparkcast.errors.PipelineError" in exported
    assert len(exported) > 60


class _Base:
    """Documented."""

    def inherited(self) -> None:
        pass


class _Undocumented(_Base):
    class Inner:
        def method(self) -> None: ...

    @property
    def size(self) -> int:
        return 0

    @staticmethod
    def make() -> None:
        """Documented."""


def test_the_check_reports_each_missing_docstring():
    for cls in (_Base, _Undocumented, _Undocumented.Inner):
        cls.__module__ = "sparkcast.example"
    assert sorted(_missing("x", _Undocumented)) == [
        "sparkcast.example._Base.inherited", "sparkcast.example._Undocumented",
        "sparkcast.example._Undocumented.Inner", "sparkcast.example._Undocumented.Inner.method",
        "sparkcast.example._Undocumented.size"]
