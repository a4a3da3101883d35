"""PyFlink's ``Types`` factory, so ported descriptors and output types keep their arguments.

sparkcast stores state with a self-describing codec, so a type is a check on ``put``, not a
serializer: a basic factory returns the Python type that values must be instances of (the check
itself is ``declared_types.accepts``). The composite ones (``ROW_NAMED``, ``ROW``, ``TUPLE``,
``LIST``, ``BASIC_ARRAY``, ``PRIMITIVE_ARRAY``, ``MAP``) return a ``TypeInformation`` that keeps
their arguments, so an ``OutputTag`` or ``process`` given one gets a Spark schema
(``output_ddl``); a state descriptor takes its Python type (``python_type``).

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

#: the Spark type of each basic Python type (Python has one int and one float: bigint, double)
_SPARK_TYPES: dict[Any, str] = {
    str: "string", int: "bigint", float: "double", bool: "boolean", bytes: "binary",
    decimal.Decimal: "decimal(38,18)", datetime.datetime: "timestamp", datetime.date: "date",
}


@dataclass(frozen=True)
class TypeInformation:
    """A composite PyFlink type with its arguments: its Python type (what state checks
    values against) and its Spark type (what an output column holds)."""

    python: Any
    spark: str
    fields: tuple[tuple[str, Any], ...] = ()  # a row's (name, type), for an output's columns


def python_type(declared: Any) -> Any:
    """The Python type a state descriptor checks values against."""
    return declared.python if isinstance(declared, TypeInformation) else declared


def is_pyflink_type(declared: Any) -> bool:
    """Whether ``declared`` is a ``Types.*`` value (rather than a DDL string or Spark type)."""
    return isinstance(declared, TypeInformation) or declared is object or (
        isinstance(declared, type) and declared in _SPARK_TYPES)


def spark_type(declared: Any, where: str = "the output type") -> str:
    """A PyFlink type (or a basic Python type) as a Spark DDL type."""
    if isinstance(declared, TypeInformation):
        return declared.spark
    found = _SPARK_TYPES.get(declared) if isinstance(declared, type) else None
    if found is None:
        raise PipelineError(
            f"{where}: {getattr(declared, '__name__', declared)!r} has no Spark column type: "
            "use Types.ROW_NAMED, ROW, LIST, MAP or a basic Types.* (or a DDL string), or "
            "Types.PICKLED_BYTE_ARRAY() for one column of the value's codec text")
    return found


def output_ddl(declared: Any, where: str = "the output type") -> tuple[str, bool]:
    """An output's schema (a DDL field list) for a PyFlink type, and whether values are stored
    as their codec text (``Types.PICKLED_BYTE_ARRAY()``: one column ``value``)."""
    if declared is object:
        return "value string", True
    if isinstance(declared, TypeInformation) and declared.fields:
        return ", ".join(f"{_quoted(n)} {spark_type(t, where)}" for n, t in declared.fields), False
    return f"value {spark_type(declared, where)}", False


def _quoted(name: str) -> str:
    return "`" + str(name).replace("`", "``") + "`"


def _row(names: Sequence[str], types: Sequence[Any]) -> TypeInformation:
    if len(names) != len(types):
        raise PipelineError(f"ROW_NAMED has {len(names)} names and {len(types)} types")
    fields = tuple((str(n), t) for n, t in zip(names, types, strict=True))
    body = ", ".join(f"{_quoted(n)}: {spark_type(t)}" for n, t in fields)
    return TypeInformation(Row | tuple, f"struct<{body}>", fields)


def _array(element_type: Any) -> TypeInformation:
    if element_type is None:
        return TypeInformation(list, "array<string>")
    return TypeInformation(list, f"array<{spark_type(element_type)}>")


class Types:
    """``Types.STRING()`` and friends, mapped to Python types."""

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
    def SQL_TIMESTAMP() -> type:  # noqa: N802
        """``datetime.datetime``."""
        return datetime.datetime

    @staticmethod
    def SQL_DATE() -> type:  # noqa: N802
        """``datetime.date``."""
        return datetime.date

    @staticmethod
    def PRIMITIVE_ARRAY_BYTE() -> type:  # noqa: N802
        """``bytes``."""
        return bytes

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> type:  # noqa: N802 - any value the codec can store; never pickled
        """Any value the codec can store (nothing is pickled)."""
        return object

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array(element_type)

    @staticmethod
    def LIST(element_type: Any = None) -> TypeInformation:  # noqa: N802
        """``list`` in state (the element type is not checked); an array column."""
        return _array(element_type)

    @staticmethod
    def MAP(key_type: Any = None, value_type: Any = None) -> TypeInformation:  # noqa: N802
        """``dict`` in state (key and value types not checked); a map column."""
        key = "string" if key_type is None else spark_type(key_type)
        value = "string" if value_type is None else spark_type(value_type)
        return TypeInformation(dict, f"map<{key},{value}>")

    @staticmethod
    def TUPLE(field_types: Any = None) -> TypeInformation:  # noqa: N802
        """``tuple`` in state (field types not checked); columns ``f0``, ``f1``, ... as
        PyFlink names a tuple's fields."""
        types = list(field_types or [])
        row = _row([f"f{i}" for i in range(len(types))], types)
        return TypeInformation(tuple, row.spark, row.fields)

    @staticmethod
    def ROW(field_types: Any = None) -> TypeInformation:  # noqa: N802
        """``Row | tuple`` in state: a PyFlink ``Row``, an input row, or a plain tuple (field
        types not checked); columns ``f0``, ``f1``, ... as PyFlink names them."""
        types = list(field_types or [])
        return _row([f"f{i}" for i in range(len(types))], types)

    @staticmethod
    def ROW_NAMED(field_names: Any = None, field_types: Any = None) -> TypeInformation:  # noqa: N802
        """``Row | tuple`` in state, as ``ROW``; on an output, one column per named field."""
        return _row(list(field_names or []), list(field_types or []))
