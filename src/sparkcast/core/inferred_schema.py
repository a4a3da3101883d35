"""An output schema inferred from one output value, for a harness given none.

Spark needs ``process(function, output_schema)`` and turns every output that does not fit it
into a dead letter. A harness test without a schema would pass where Spark dead-letters, so the
harness infers one from the first output (and says so) and checks every output against it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sparkcast.api.row import Row
from sparkcast.core.output_values import object_fields


def infer_ddl(value: Any) -> str:
    """A DDL field list that ``value`` (a tuple, Row, dict, object or single value) fits."""
    fields = object_fields(value)
    if fields is not None:  # a dataclass, NamedTuple or plain object: its fields by name
        names, items = list(fields), list(fields.values())
    elif isinstance(value, dict):
        names, items = [str(k) for k in value], list(value.values())
    elif isinstance(value, Row) and value.__fields__:
        names, items = list(value.__fields__), list(value)
    elif isinstance(value, (tuple, list, Row)):
        items = list(value)
        names = [f"_{i + 1}" for i in range(len(items))]
    else:
        names, items = ["value"], [value]
    return ", ".join(f"`{n}` {_ddl_type(_arrow_type(v))}" for n, v in zip(names, items,
                                                                           strict=True))


def _arrow_type(value: Any) -> pa.DataType:
    try:
        return pa.array([value]).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.string()


def _ddl_type(kind: pa.DataType) -> str:
    if pa.types.is_null(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_integer(kind):
        return "bigint"
    if pa.types.is_floating(kind):
        return "double"
    if pa.types.is_binary(kind):
        return "binary"
    if pa.types.is_timestamp(kind):
        return "timestamp" if kind.tz else "timestamp_ntz"
    if pa.types.is_date(kind):
        return "date"
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"array<{_ddl_type(kind.value_type)}>"
    if pa.types.is_map(kind):
        return f"map<{_ddl_type(kind.key_type)},{_ddl_type(kind.item_type)}>"
    if pa.types.is_struct(kind):
        fields = ",".join(f"`{f.name}`:{_ddl_type(f.type)}" for f in kind)
        return f"struct<{fields}>"
    return "string"
