"""``Row``: main-side values on Spark, with attribute, key and index access like PySpark's.

sparkcast's API must import without pyspark, so it carries its own Row. Rows of one schema share
one generated class (built once, cached), which makes creating millions of them cheap.

Examples:
    >>> r = Row(color="red", shape="square")
    >>> r.color, r["shape"], r[0], r.asDict()
    ('red', 'square', 'red', {'color': 'red', 'shape': 'square'})
"""

from __future__ import annotations

from functools import lru_cache
from operator import itemgetter
from typing import Any

from sparkcast.errors import ArgumentTypeError, MissingKeyError, PipelineError

try:  # the C descriptor namedtuple uses: reads the tuple slot directly, ~3x a property
    from _collections import _tuplegetter  # type: ignore[import-not-found]  # no stubs
except ImportError:  # pragma: no cover - other Python implementations
    def _tuplegetter(index: int, doc: str | None) -> Any:
        return property(itemgetter(index), doc=doc)


class Row(tuple):
    """A tuple with field names; ``Row(a=1)`` as in PySpark, fields kept in the given order."""

    __slots__ = ()
    __fields__: tuple[str, ...] = ()
    _index: dict[str, int] = {}

    def __new__(cls, *args: Any, **kwargs: Any) -> Row:
        if kwargs and args:
            raise ArgumentTypeError("Row takes either positional or keyword arguments, not both")
        if cls is Row:
            if kwargs:
                return tuple.__new__(row_type(tuple(kwargs)), kwargs.values())
            return tuple.__new__(Row, args)
        return tuple.__new__(cls, args)

    @classmethod
    def _make(cls, values: Any) -> Row:
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

    def __repr__(self) -> str:
        if not self.__fields__:
            return "<Row(" + ", ".join(map(repr, self)) + ")>"
        body = ", ".join(f"{k}={v!r}" for k, v in zip(self.__fields__, self, strict=True))
        return f"Row({body})"

    def __reduce__(self) -> Any:
        return (_rebuild, (self.__fields__, tuple(self)))


def _as_plain(value: Any) -> Any:
    if isinstance(value, Row) and value.__fields__:
        return value.asDict(recursive=True)
    if isinstance(value, list):
        return [_as_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_plain(v) for k, v in value.items()}
    return value


def _rebuild(fields: tuple[str, ...], values: tuple[Any, ...]) -> Row:
    return row_type(fields)._make(values) if fields else Row(*values)


@lru_cache(maxsize=1024)
def row_type(fields: tuple[str, ...]) -> type[Row]:
    """The Row class of one schema; its fields are also properties, for fast attribute access."""
    if len(set(fields)) != len(fields):
        raise PipelineError(f"duplicate field names in {fields}")
    namespace: dict[str, Any] = {
        "__slots__": (),
        "__fields__": fields,
        "_index": {name: i for i, name in enumerate(fields)},
    }
    for i, name in enumerate(fields):
        if name.isidentifier() and not hasattr(Row, name):
            namespace[name] = _tuplegetter(i, None)
    return type("Row", (Row,), namespace)
