"""The classes a job knows, which stored type names resolve against: objects keep their class.

PyFlink keeps objects in ``Types.PICKLED_BYTE_ARRAY()`` state by pickling them; sparkcast never
pickles (nothing read from a checkpoint or a stream may run code it names). The codec stores an
object as its class's qualified name and its fields; decoding resolves the name here, against:

- the classes reachable from the user's function: the globals of its class's module (and of its
  base classes' modules), the annotations of its methods, the classes and descriptors it holds;
- the descriptors' declared types, and the field types of those, recursively;
- classes registered with ``sparkcast.register_types`` (captured in ``ProcessOptions.types``,
  so the registrations travel to Spark's workers with the job).

A name found nowhere raises ``UnknownTypeError`` naming the class and the fix: never a silent
dict, never an import. Dataclasses and NamedTuples are rebuilt by the declared types' converters
(``core/converters.py``), so schema evolution follows their rule (a new field needs a default, a
lost field is ignored); an enum member by its value; a plain object by setting its stored
attributes on a new instance (``object.__new__``: neither ``__init__`` nor ``__reduce__`` runs).
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from collections.abc import Iterable
from typing import Any

from sparkcast.api.declared_types import is_record_type, record_fields
from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.core import codec
from sparkcast.core.converters import Convert, converter
from sparkcast.errors import UnknownTypeError

_AMBIGUOUS = object()


def _own(cls: type) -> bool:
    """A class a job's data may name: not Python's builtins, not sparkcast's machinery."""
    module = cls.__module__ or ""
    return module != "builtins" and (not module.startswith("sparkcast")
                                     or module.startswith("sparkcast.apps"))


class TypeRegistry:
    """Qualified name -> class, for one job; ``codec.decode``'s resolver."""

    def __init__(self, classes: Iterable[type] = ()) -> None:
        self._names: dict[str, tuple[int, Any]] = {}
        self._seen: set[tuple[type, bool]] = set()
        self._makers: dict[type, Convert] = {}
        for cls in classes:
            self.add(cls)

    # ------------------------------------------------------------------ what the job knows

    def add(self, cls: Any, declared: bool = True) -> None:
        """Know ``cls`` (and the classes its fields declare). A declared or registered class
        takes its name from a class merely reachable; of two declared ones the later wins (a
        descriptor made in ``open`` after the broadcast ones); two reachable classes of one
        name make it ambiguous."""
        if not isinstance(cls, type) or not _own(cls) or (cls, declared) in self._seen:
            return
        self._seen.add((cls, declared))
        rank = int(declared)
        for name in {cls.__qualname__, cls.__name__}:
            known = self._names.get(name)
            if known is None or known[0] < rank or (rank and known[1] is not cls):
                self._names[name] = (rank, cls)
            elif known[1] is not cls and known[0] == rank and name == cls.__qualname__:
                self._names[name] = (rank, _AMBIGUOUS)
        if is_record_type(cls):
            for _, hint, _ in record_fields(cls):
                self.add_declared(hint, declared)

    def add_declared(self, declared: Any, rank: bool = True) -> None:
        """Know the classes in a declared type (``list[Rule]``, ``dict[str, Model | None]``)."""
        if isinstance(declared, type):
            self.add(declared, rank)
        for arg in typing.get_args(declared):
            self.add_declared(arg, rank)

    def add_descriptor(self, descriptor: StateDescriptor) -> None:
        if isinstance(descriptor, MapStateDescriptor):
            self.add_declared(descriptor.key_type_info)
            self.add_declared(descriptor.value_type_info)
        else:
            self.add_declared(getattr(descriptor, "type_info", None))

    def add_function(self, function: Any) -> None:
        """The classes reachable from the user's function object."""
        for cls in type(function).__mro__:
            if not _own(cls):
                continue
            module = sys.modules.get(cls.__module__)
            for value in vars(module).values() if module is not None else ():
                self.add(value, declared=False)
            for member in vars(cls).values():
                if isinstance(member, types.FunctionType):
                    for hint in member.__annotations__.values():
                        self.add_declared(hint, False)
        for value in getattr(function, "__dict__", {}).values():
            if isinstance(value, StateDescriptor):
                self.add_descriptor(value)
            else:
                self.add(value, declared=False)

    # ------------------------------------------------------------------ resolution (the codec's)

    def resolve(self, name: str) -> type:
        cls = self._names.get(name, (0, None))[1]
        if cls is None and "<locals>." in name:
            # a class made inside a function: Spark's workers get it from cloudpickle, which
            # names it by its bare name, so state the driver wrote reads by that name there
            cls = self._names.get(name.rsplit(".", 1)[-1], (0, None))[1]
        if cls is None:
            raise UnknownTypeError(
                f"state holds a {name}, a class this job does not know: register it "
                f"(sparkcast.register_types({name.rsplit('.', 1)[-1]})) or declare it as a "
                "descriptor's type; sparkcast never imports a module named by stored data")
        if cls is _AMBIGUOUS:
            raise UnknownTypeError(
                f"state holds a {name}, and the job knows more than one class of that name: "
                "register the one meant (sparkcast.register_types) and rename the other")
        return typing.cast(type, cls)

    def record(self, name: str, fields: dict[str, Any]) -> Any:
        cls = self.resolve(name)
        if not is_record_type(cls):
            return self._plain(cls, name, fields)
        maker = self._makers.get(cls)
        if maker is None:
            maker = self._makers[cls] = typing.cast(Convert, converter(cls))
        return maker(codec.Record(cls.__name__, fields))

    def plain(self, name: str, attributes: dict[str, Any]) -> Any:
        cls = self.resolve(name)
        if is_record_type(cls):  # the class became a dataclass: its fields' rule applies
            return self.record(name, attributes)
        return self._plain(cls, name, attributes)

    def enum(self, name: str, value: Any) -> Any:
        cls = self.resolve(name)
        if not issubclass(cls, enum.Enum):
            raise UnknownTypeError(f"state holds a member of the enum {name}, and {name} is not "
                                   "an Enum in this job any more: migrate the state")
        return typing.cast(Convert, converter(cls))(value)

    def _plain(self, cls: type, name: str, attributes: dict[str, Any]) -> Any:
        if issubclass(cls, enum.Enum):
            raise UnknownTypeError(f"state holds an object of class {name}, and {name} is an "
                                   "Enum in this job: migrate the state")
        value = object.__new__(cls)
        for attribute, item in attributes.items():
            object.__setattr__(value, attribute, item)
        return value

    def roundtrip(self, value: Any) -> Any:
        """``value`` as it reads back from state (a copy; its classes resolved here)."""
        return codec.roundtrip(value, self)


def job_types(function: Any, descriptors: Iterable[StateDescriptor],
              registered: Iterable[type] = ()) -> TypeRegistry:
    """The registry of one job: its function, its broadcast descriptors, the registered classes
    (keyed descriptors join as ``open`` creates them)."""
    registry = TypeRegistry(registered)
    registry.add_function(function)
    for descriptor in descriptors:
        registry.add_descriptor(descriptor)
    return registry
