r"""``Row`` as PyFlink has it (mutable); ``TupleRow``, the read-only rows Spark's inputs are.

A ``Row`` the user makes is PyFlink's: mutable by index, name and attribute (``current[1] += 1``
on a Row kept in state, as the Flink docs' count-with-timeout example does), named arguments
sorted by name, equal only to a Row with the same field names and values. Rows read from state
are ``Row``\ s too.

Input rows (Spark's columns, per element) are ``TupleRow``\ s: tuples with field names, one
generated class per schema (cheap to make by the million), read-only like PySpark's Row, and
``isinstance(value, Row)`` holds for them. Broadcast values handed to the main side are frozen
into ``TupleRow``\ s.

Examples:
    >>> r = Row(shape="square", color="red")
    >>> r.color, r["shape"], r[0], r.as_dict()
    ('red', 'square', 'red', {'color': 'red', 'shape': 'square'})
    >>> r[1] = "circle"
    >>> r
    Row(color='red', shape='circle')
"""

from __future__ import annotations

import enum
from functools import lru_cache
from operator import itemgetter
from typing import Any

from sparkcast.errors import (
    ArgumentTypeError,
    MissingAttributeError,
    MissingKeyError,
    PipelineError,
)

try:  # the C descriptor namedtuple uses: reads the tuple slot directly, ~3x a property
    from _collections import _tuplegetter  # type: ignore[import-not-found]  # no stubs
except ImportError:  # pragma: no cover - other Python implementations
    def _tuplegetter(index: int, doc: str | None) -> Any:
        return property(itemgetter(index), doc=doc)


class TupleRow(tuple):
    """A read-only tuple with field names: an input row; ``TupleRow(a=1)`` keeps the order."""

    __slots__ = ()
    __fields__: tuple[str, ...] = ()
    _index: dict[str, int] = {}

    def __new__(cls, *args: Any, **kwargs: Any) -> TupleRow:
        if kwargs and args:
            raise ArgumentTypeError("Row takes either positional or keyword arguments, not both")
        if cls is TupleRow:
            if kwargs:
                return tuple.__new__(row_type(tuple(kwargs)), kwargs.values())
            return tuple.__new__(TupleRow, args)
        return tuple.__new__(cls, args)

    @classmethod
    def _make(cls, values: Any) -> TupleRow:
        return tuple.__new__(cls, values)

    @property
    def _fields(self) -> tuple[str, ...]:
        return self.__fields__

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, str):
            try:
                return tuple.__getitem__(self, self._index[item])
            except KeyError:
                raise MissingKeyError(item) from None
        return tuple.__getitem__(self, item)

    def __contains__(self, item: object) -> bool:
        return item in self._index if self.__fields__ else tuple.__contains__(self, item)

    def get(self, name: str, default: Any = None) -> Any:
        """The field ``name``, or ``default`` when the row has no such field."""
        index = self._index.get(name)
        return default if index is None else tuple.__getitem__(self, index)

    def asDict(self, recursive: bool = False) -> dict[str, Any]:  # noqa: N802 - PySpark's name
        """The fields as a dict, as PySpark's ``Row.asDict``; ``recursive`` converts nested
        rows too. A row without field names raises ``ArgumentTypeError``."""
        if not self.__fields__:
            raise ArgumentTypeError("Cannot convert a Row without field names into a dict")
        if not recursive:
            return dict(zip(self.__fields__, self, strict=True))
        return {k: _as_plain(v) for k, v in zip(self.__fields__, self, strict=True)}

    as_dict = asDict  # PyFlink's name

    def __repr__(self) -> str:
        if not self.__fields__:
            return "<Row(" + ", ".join(map(repr, self)) + ")>"
        body = ", ".join(f"{k}={v!r}" for k, v in zip(self.__fields__, self, strict=True))
        return f"Row({body})"

    def __reduce__(self) -> Any:
        return (_rebuild, (self.__fields__, tuple(self)))


def _as_plain(value: Any) -> Any:
    if isinstance(value, (TupleRow, Row)) and value.__fields__:
        return value.asDict(recursive=True)
    if isinstance(value, list):
        return [_as_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_plain(v) for k, v in value.items()}
    return value


def _rebuild(fields: tuple[str, ...], values: tuple[Any, ...]) -> TupleRow:
    return row_type(fields)._make(values) if fields else TupleRow(*values)


@lru_cache(maxsize=1024)
def row_type(fields: tuple[str, ...]) -> type[TupleRow]:
    """The Row class of one schema; its fields are also properties, for fast attribute access."""
    if len(set(fields)) != len(fields):
        raise PipelineError(f"duplicate field names in {fields}")
    namespace: dict[str, Any] = {
        "__slots__": (),
        "__fields__": fields,
        "_index": {name: i for i, name in enumerate(fields)},
    }
    for i, name in enumerate(fields):
        if name.isidentifier() and not hasattr(TupleRow, name):
            namespace[name] = _tuplegetter(i, None)
    return type("Row", (TupleRow,), namespace)


class RowKind(enum.Enum):
    """PyFlink's change kinds of a row; part of a ``Row``'s equality, as in PyFlink."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3


class _RowClass(type):
    """``isinstance(value, Row)`` holds for input rows (``TupleRow``) too: where sparkcast
    takes a Row it takes both."""

    def __instancecheck__(cls, value: Any) -> bool:
        return type.__instancecheck__(cls, value) or (cls is Row and isinstance(value, TupleRow))


_INTERNAL = frozenset({"_values", "_fields", "_row_kind"})


class Row(metaclass=_RowClass):
    """PyFlink's Row: ``Row(1, 2)`` or ``Row(name=..., age=...)`` (named fields sorted by name);
    mutable by index, by name and by attribute; equal to a Row with the same field names, kind
    and values; ``Row("name", "age")("Alice", 11)`` makes a named row."""

    __slots__ = ("_values", "_fields", "_row_kind")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ArgumentTypeError("Row takes either positional or keyword arguments, not both")
        if kwargs:
            names = sorted(kwargs)
            object.__setattr__(self, "_fields", tuple(names))
            object.__setattr__(self, "_values", [kwargs[n] for n in names])
        else:
            object.__setattr__(self, "_fields", None)
            object.__setattr__(self, "_values", list(args))
        object.__setattr__(self, "_row_kind", RowKind.INSERT)

    @property
    def __fields__(self) -> tuple[str, ...]:
        return self._fields or ()

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        """The fields as a dict (PyFlink's ``as_dict``; ``asDict`` is PySpark's name);
        ``recursive`` converts nested Rows too. A Row without field names has none."""
        if not self._fields:
            raise ArgumentTypeError("Cannot convert a Row without field names into a dict")
        if recursive:
            return {k: _as_plain(v) for k, v in zip(self._fields, self._values, strict=True)}
        return dict(zip(self._fields, self._values, strict=True))

    asDict = as_dict  # noqa: N815 - PySpark's name

    def get(self, name: str, default: Any = None) -> Any:
        """The field ``name``, or ``default`` when the Row has no such field."""
        fields = self._fields or ()
        return self._values[fields.index(name)] if name in fields else default

    def get_row_kind(self) -> RowKind:
        """The change kind (PyFlink's ``RowKind``; ``INSERT`` unless set), part of equality."""
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        """Set the change kind, as PyFlink's ``Row.set_row_kind``."""
        object.__setattr__(self, "_row_kind", row_kind)

    def set_field_names(self, field_names: Any) -> None:
        """Name the fields (in order), as PyFlink's ``Row.set_field_names``."""
        object.__setattr__(self, "_fields", tuple(field_names))

    def __call__(self, *args: Any) -> Row:
        """A named row, this Row's values being the field names (PyFlink's ``Row("a", "b")``)."""
        if len(args) > len(self):
            raise ArgumentTypeError(f"Row({', '.join(map(str, self._values))}) takes at most "
                                    f"{len(self)} values, not {len(args)}")
        return new_row(tuple(self._values), args)

    def _index_of(self, name: str) -> int:
        try:
            return (self._fields or ()).index(name)
        except ValueError:
            raise MissingKeyError(name) from None

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, slice)):
            return self._values[item]
        return self._values[self._index_of(item)]

    def __setitem__(self, item: Any, value: Any) -> None:
        if isinstance(item, (int, slice)):
            self._values[item] = value
        else:
            self._values[self._index_of(item)] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in (self._fields or ()):
            raise MissingAttributeError(name)
        return self._values[self._fields.index(name)]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _INTERNAL:
            object.__setattr__(self, name, value)
        elif name in (self._fields or ()):
            self._values[self._fields.index(name)] = value
        else:
            raise MissingAttributeError(f"Row has no field {name!r}")

    def __contains__(self, item: object) -> bool:
        return item in self._fields if self._fields else item in self._values

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TupleRow):
            return (self._fields or ()) == other.__fields__ and self._values == list(other)
        if type(other) is not Row:
            return False
        return (self._fields == other._fields and self._row_kind == other._row_kind
                and self._values == other._values)

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        if self._fields:
            body = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values, strict=True))
            return f"Row({body})"
        return "<Row(" + ", ".join(map(repr, self._values)) + ")>"

    def __reduce__(self) -> Any:
        return (new_row, (self._fields, tuple(self._values), self._row_kind))


def new_row(fields: tuple[str, ...] | None, values: Any, kind: RowKind = RowKind.INSERT) -> Row:
    """A ``Row`` of these field names (None: positional) and values, in that order."""
    row = Row(*values)
    if fields:
        row.set_field_names(fields)
    if kind is not RowKind.INSERT:
        row.set_row_kind(kind)
    return row
