"""Side outputs and dead letters as the JSON text of the tagged frame's ``_payload`` column.

They are few and have many schemas, so they travel as JSON in one string column (``layout.py``)
and each accessor parses its own with ``from_json``. Main rows never come here: they stay typed
Arrow columns (``encoding.py``).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from sparkcast.api.row import Row
from sparkcast.core.records import DeadLetter


def to_jsonable(value: Any, field_names: Sequence[str] | None = None) -> Any:
    """A JSON-ready form of an output value; tuples map onto the tag's field names. NaN and
    infinities stay numbers (``json`` writes ``NaN``/``Infinity``, which Spark's ``from_json``
    reads back with its default ``allowNonNumericNumbers``)."""
    if isinstance(value, Row) and value.__fields__:
        return {k: to_jsonable(v) for k, v in zip(value.__fields__, value, strict=True)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        if field_names is not None and len(value) == len(field_names):
            return {k: to_jsonable(v) for k, v in zip(field_names, value, strict=True)}
        return [to_jsonable(v) for v in value]
    return _json_scalar(value)


def _json_scalar(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def payload(value: Any, field_names: Sequence[str] | None = None) -> str:
    """One output value as ``_payload`` text."""
    return json.dumps(to_jsonable(value, field_names), ensure_ascii=False)


def dead_letter_payload(letter: DeadLetter, subtask: int | None) -> str:
    """A dead letter as the JSON of ``DEAD_LETTER_SCHEMA``; key and value are JSON texts."""
    return json.dumps({
        "callback": letter.callback,
        "error": letter.error,
        "key": None if letter.key is None else payload(letter.key),
        "value": payload(letter.value),
        "timestamp": letter.timestamp,
        "subtask": subtask,
    }, ensure_ascii=False)
