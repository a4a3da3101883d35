"""PyFlink's ``Types`` factory: every ``Types.*`` of PyFlink 2.x, so ported descriptors and
output types keep their arguments.

A ``Types.*`` value describes a type; it is not a serializer (state is stored with a
self-describing codec) and it is not a Spark column. A basic factory returns the Python type
values must be instances of (``Types.STRING()`` is ``str``; ``PICKLED_BYTE_ARRAY()`` is
``object``: any value the codec stores, nothing pickled). A composite one (``ROW``,
``ROW_NAMED``, ``TUPLE``, ``LIST``, ``MAP``, the arrays) returns a ``TypeInformation`` that keeps
its arguments as written, nested to any depth, ``PICKLED_BYTE_ARRAY()`` among them; a state
descriptor takes its Python type (``python_type``). Whether a type can be a Spark column is
asked only where a column is needed (an output, an ``OutputTag``, ``process(output_schema=...)``):
``output_ddl`` answers there, or raises ``PipelineError`` naming the fix.

>>> items = Types.MAP(Types.STRING(), Types.LIST(Types.PICKLED_BYTE_ARRAY()))  # state: fine
>>> python_type(items)
<class 'dict'>
>>> output_ddl(Types.ROW_NAMED(["user", "tags"], [Types.STRING(), Types.LIST(Types.STRING())]))
('`user` string, `tags` array<string>', False)
>>> output_ddl(Types.PICKLED_BYTE_ARRAY())  # one column of the codec's text
('value string', True)
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparkcast.api.row import Row
from sparkcast.errors import PipelineError

#: the Spark column type of each basic Python type (Python has one int and one float)
_SPARK_TYPES: dict[Any, str] = {
    str: "string", int: "bigint", float: "double", bool: "boolean", bytes: "binary",
    decimal.Decimal: "decimal(38,18)", datetime.datetime: "timestamp", datetime.date: "date",
}
#: basic types that state holds but no output column does (Spark's TIME is not supported here)
_STATE_ONLY: frozenset[Any] = frozenset({datetime.time})


@dataclass(frozen=True)
class TypeInformation:
    """A composite PyFlink type with its arguments as written; Flink's ``TypeInformation``
    (``RowTypeInfo``, ``TupleTypeInfo``, ``ListTypeInfo``, ``MapTypeInfo``, the array infos).

    ``kind`` is ``"row"``, ``"array"`` or ``"map"``; ``args`` are the field, element or key and
    value types; ``names`` a row's field names. Two equal declarations compare equal, as
    PyFlink's do."""

    kind: str
    python: Any  # the Python type state checks values against
    args: tuple[Any, ...] = ()
    names: tuple[str, ...] = ()
    label: str = ""  # the declaration as written, for messages

    def get_field_names(self) -> list[str]:
        """A row's or tuple's field names (``f0``, ``f1``, ... unless named)."""
        return list(self.names)

    def get_field_types(self) -> list[Any]:
        """A row's or tuple's field types."""
        return list(self.args) if self.kind == "row" else []

    def __repr__(self) -> str:
        return self.label


def python_type(declared: Any) -> Any:
    """The Python type a state descriptor checks values against."""
    return declared.python if isinstance(declared, TypeInformation) else declared


def is_pyflink_type(declared: Any) -> bool:
    """Whether ``declared`` is a ``Types.*`` value (rather than a DDL string or Spark type)."""
    return isinstance(declared, TypeInformation) or declared is object or (
        isinstance(declared, type) and (declared in _SPARK_TYPES or declared in _STATE_ONLY))


def _label(declared: Any) -> str:
    """A ``Types.*`` value as messages name it."""
    if declared is object:
        return "Types.PICKLED_BYTE_ARRAY()"
    if isinstance(declared, TypeInformation):
        return declared.label
    if isinstance(declared, type):
        return declared.__name__ if declared.__module__ == "builtins" else (
            f"{declared.__module__}.{declared.__qualname__}")
    return repr(declared)


def _column_type(declared: Any) -> str | None:
    """The Spark DDL type of a type, or None if it (or a part of it) has no column type."""
    if not isinstance(declared, TypeInformation):
        return _SPARK_TYPES.get(declared) if isinstance(declared, type) else None
    parts = [_column_type(a) for a in declared.args]
    if any(p is None for p in parts):
        return None
    if declared.kind == "array":
        return f"array<{parts[0]}>"
    if declared.kind == "map":
        return f"map<{parts[0]},{parts[1]}>"
    return "struct<" + ", ".join(f"{_quoted(n)}: {p}"
                                 for n, p in zip(declared.names, parts, strict=True)) + ">"


def _no_column(declared: Any, where: str) -> PipelineError:
    offender = declared if not isinstance(declared, TypeInformation) else next(
        (a for a in _leaves(declared) if _column_type(a) is None), declared)
    inside = "" if offender is declared else f" ({_label(offender)} inside it)"
    fix = ("declare Types.STRING() there and yield the time's isoformat()"
           if isinstance(offender, type) and offender in _STATE_ONLY else
           "declare it with basic Types.* (STRING, LONG, DOUBLE, ...) in ROW_NAMED, ROW, TUPLE, "
           "LIST or MAP, or a DDL string, or Types.PICKLED_BYTE_ARRAY() for the whole value as "
           "one column of its codec text")
    return PipelineError(f"{where}: {_label(declared)} has no Spark column type{inside}: {fix}")


def _leaves(declared: TypeInformation) -> list[Any]:
    found: list[Any] = []
    for arg in declared.args:
        found.extend(_leaves(arg) if isinstance(arg, TypeInformation) else [arg])
    return found


def spark_type(declared: Any, where: str = "the output type") -> str:
    """A PyFlink type (or a basic Python type) as a Spark DDL type; ``PipelineError`` naming
    the fix when it has none (``PICKLED_BYTE_ARRAY()`` or ``SQL_TIME()`` inside a column)."""
    found = _column_type(declared)
    if found is None:
        raise _no_column(declared, where)
    return found


def output_ddl(declared: Any, where: str = "the output type") -> tuple[str, bool]:
    """An output's schema (a DDL field list) for a PyFlink type, and whether values are stored
    as their codec text (``Types.PICKLED_BYTE_ARRAY()``: one column ``value``)."""
    if declared is object:
        return "value string", True
    if isinstance(declared, TypeInformation) and declared.kind == "row" and declared.names:
        if _column_type(declared) is None:
            raise _no_column(declared, where)
        return ", ".join(f"{_quoted(n)} {spark_type(t, where)}"
                         for n, t in zip(declared.names, declared.args, strict=True)), False
    return f"value {spark_type(declared, where)}", False


def _quoted(name: str) -> str:
    return "`" + str(name).replace("`", "``") + "`"


def _row(label: str, python: Any, names: Sequence[Any], types: Sequence[Any]) -> TypeInformation:
    if len(names) != len(types):
        raise PipelineError(f"{label} has {len(names)} names and {len(types)} types")
    return TypeInformation("row", python, tuple(types), tuple(str(n) for n in names), label)


def _positional(types: Sequence[Any]) -> list[str]:
    return [f"f{i}" for i in range(len(types))]


def _array(name: str, element_type: Any) -> TypeInformation:
    element = str if element_type is None else element_type
    return TypeInformation("array", list, (element,),
                           label=f"Types.{name}({_arg_label(element_type)})")


def _arg_label(declared: Any) -> str:
    return "" if declared is None else _label(declared)


class Types:
    """``Types.STRING()`` and friends, as PyFlink's ``pyflink.common.typeinfo.Types``: a basic
    one is the Python type of its values, a composite one a ``TypeInformation``."""

    @staticmethod
    def STRING() -> type:  # noqa: N802 - PyFlink's names
        """``str``."""
        return str

    @staticmethod
    def CHAR() -> type:  # noqa: N802
        """``str`` (a one-character string in Flink)."""
        return str

    @staticmethod
    def BOOLEAN() -> type:  # noqa: N802
        """``bool``."""
        return bool

    @staticmethod
    def BYTE() -> type:  # noqa: N802
        """``int`` (Python has one integer type)."""
        return int

    @staticmethod
    def SHORT() -> type:  # noqa: N802
        """``int``."""
        return int

    @staticmethod
    def INT() -> type:  # noqa: N802
        """``int``."""
        return int

    @staticmethod
    def LONG() -> type:  # noqa: N802
        """``int``."""
        return int

    @staticmethod
    def BIG_INT() -> type:  # noqa: N802
        """``int``."""
        return int

    @staticmethod
    def FLOAT() -> type:  # noqa: N802
        """``float``."""
        return float

    @staticmethod
    def DOUBLE() -> type:  # noqa: N802
        """``float``."""
        return float

    @staticmethod
    def BIG_DEC() -> type:  # noqa: N802
        """``decimal.Decimal``."""
        return decimal.Decimal

    @staticmethod
    def INSTANT() -> type:  # noqa: N802
        """``datetime.datetime`` (PyFlink's ``Instant``: a point in time)."""
        return datetime.datetime

    @staticmethod
    def SQL_TIMESTAMP() -> type:  # noqa: N802
        """``datetime.datetime``."""
        return datetime.datetime

    @staticmethod
    def SQL_DATE() -> type:  # noqa: N802
        """``datetime.date``."""
        return datetime.date

    @staticmethod
    def SQL_TIME() -> type:  # noqa: N802
        """``datetime.time``: state holds it; an output column does not (use a string)."""
        return datetime.time

    @staticmethod
    def LOCAL_DATE() -> type:  # noqa: N802
        """``datetime.date``."""
        return datetime.date

    @staticmethod
    def LOCAL_TIME() -> type:  # noqa: N802
        """``datetime.time``, as ``SQL_TIME``."""
        return datetime.time

    @staticmethod
    def LOCAL_DATE_TIME() -> type:  # noqa: N802
        """``datetime.datetime``."""
        return datetime.datetime

    @staticmethod
    def PRIMITIVE_ARRAY_BYTE() -> type:  # noqa: N802
        """``bytes``."""
        return bytes

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> type:  # noqa: N802 - any value the codec can store; never pickled
        """Any value the codec can store (nothing is pickled): ``object``."""
        return object

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array("PRIMITIVE_ARRAY", element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array("BASIC_ARRAY", element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array("OBJECT_ARRAY", element_type)

    @staticmethod
    def LIST(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array("LIST", element_type)

    @staticmethod
    def MAP(key_type: Any = None, value_type: Any = None) -> TypeInformation:  # noqa: N802
        """``dict`` in state (key and value types not checked); a map column."""
        key = str if key_type is None else key_type
        value = str if value_type is None else value_type
        return TypeInformation("map", dict, (key, value), label=(
            f"Types.MAP({_arg_label(key_type)}, {_arg_label(value_type)})"))

    @staticmethod
    def TUPLE(field_types: Any = None) -> TypeInformation:  # noqa: N802
        """``tuple`` in state (field types not checked); columns ``f0``, ``f1``, ... as
        PyFlink names a tuple's fields."""
        types = list(field_types or [])
        return _row(f"Types.TUPLE([{', '.join(map(_label, types))}])", tuple,
                    _positional(types), types)

    @staticmethod
    def ROW(field_types: Any = None) -> TypeInformation:  # noqa: N802
        """``Row | tuple`` in state: a PyFlink ``Row``, an input row, or a plain tuple (field
        types not checked); columns ``f0``, ``f1``, ... as PyFlink names them."""
        types = list(field_types or [])
        return _row(f"Types.ROW([{', '.join(map(_label, types))}])", Row | tuple,
                    _positional(types), types)

    @staticmethod
    def ROW_NAMED(field_names: Any = None, field_types: Any = None) -> TypeInformation:  # noqa: N802
        """``Row | tuple`` in state, as ``ROW``; on an output, one column per named field."""
        names, types = list(field_names or []), list(field_types or [])
        return _row(f"Types.ROW_NAMED({names!r}, [{', '.join(map(_label, types))}])",
                    Row | tuple, names, types)
