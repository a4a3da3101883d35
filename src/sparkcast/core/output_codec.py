"""Values of a ``Types.PICKLED_BYTE_ARRAY()`` output: the state codec's text, never pickle.

PyFlink pickles such values; sparkcast writes each as the codec's JSON text (``core/codec.py``:
a class's qualified name and its fields), one string column ``value``, so any reader can parse
it and only the classes a reader names come back as objects:

>>> text = encode_output({"user": "u1", "amount": 2.5})
>>> decode_output(text)
{'user': 'u1', 'amount': 2.5}
"""

from __future__ import annotations

from typing import Any

from sparkcast.core import codec
from sparkcast.core.type_registry import TypeRegistry


def encode_output(value: Any) -> str:
    """The codec text of one output value (``StateSerializationError`` if it has none)."""
    return codec.encode(value).decode("utf-8")


def decode_output(text: str, *classes: type) -> Any:
    """One ``value`` of a ``Types.PICKLED_BYTE_ARRAY()`` output back as Python: objects of the
    given classes (dataclasses, NamedTuples, enums, plain classes) as instances of them, an
    object of any other class as an ``UnknownTypeError`` naming it; nothing is imported."""
    return codec.decode(text, TypeRegistry(classes) if classes else None)
