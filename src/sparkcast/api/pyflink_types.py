"""PyFlink's ``Types`` factory, so ported descriptors keep their type arguments.

sparkcast stores state with a self-describing codec, so a type is a check on ``put``, not a
serializer: each factory returns the Python type that values must be instances of (the check
itself is ``declared_types.accepts``).
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from sparkcast.api.row import Row


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
    def PRIMITIVE_ARRAY(element_type: Any = None) -> type:  # noqa: N802
        """``list``; the element type is not checked."""
        return list

    @staticmethod
    def BASIC_ARRAY(element_type: Any = None) -> type:  # noqa: N802
        """``list``; the element type is not checked."""
        return list

    @staticmethod
    def LIST(element_type: Any = None) -> type:  # noqa: N802
        """``list``; the element type is not checked."""
        return list

    @staticmethod
    def MAP(key_type: Any = None, value_type: Any = None) -> type:  # noqa: N802
        """``dict``; the key and value types are not checked."""
        return dict

    @staticmethod
    def TUPLE(field_types: Any = None) -> type:  # noqa: N802
        """``tuple``; the field types are not checked."""
        return tuple

    @staticmethod
    def ROW(field_types: Any = None) -> Any:  # noqa: N802
        """``Row | tuple``: a PyFlink ``Row``, an input row, or a plain tuple; the field types
        are not checked."""
        return Row | tuple

    @staticmethod
    def ROW_NAMED(field_names: Any = None, field_types: Any = None) -> Any:  # noqa: N802
        """``Row | tuple``, as ``ROW``; the field names and types are not checked."""
        return Row | tuple

