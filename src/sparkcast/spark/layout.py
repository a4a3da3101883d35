"""The one output layout: the operator's tagged frame, dead letters, and ``write_stream``'s files.

The operator emits one tagged frame: ``_tag`` (null = main), ``_ts``, ``_payload`` (JSON of side
outputs and dead letters: few, with many schemas) and then the main fields in typed columns.
``write_stream`` replaces ``_tag`` by the partition column ``_output`` (``main``, a tag id or
``dead_letters``) and writes a manifest of the side-output schemas beside the data. Every module
that builds or reads these (plan, processor, rows, result, sink, corrupt) takes the names from
here, so a user field can never collide with one unnoticed.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from sparkcast.api.row import Row
from sparkcast.core.batch_metrics import METRICS_TAG
from sparkcast.core.records import DeadLetter
from sparkcast.errors import PipelineError
from sparkcast.monitoring.progress import PROGRESS_LOG
from sparkcast.spark import storage

TAG = "_tag"
TS = "_ts"
PAYLOAD = "_payload"
OUTPUT = "_output"
MAIN = "main"
#: the tag of the one row per subtask and call that carries its metrics (JSON in ``_payload``;
#: ``core/batch_metrics.py``); every accessor of ``ProcessResult`` filters it out, the
#: observation in ``observe.py`` reads it, ``write_stream`` writes it under ``_output=_metrics``
METRICS = METRICS_TAG
#: column names of the tagged frame and of ``write_stream``'s files: no output field may use them
RESERVED = (TAG, TS, PAYLOAD, OUTPUT)

DEAD_LETTER_SCHEMA = ("callback string, error string, key string, value string, "
                      "timestamp long, subtask int")

MANIFEST = "_sparkcast_outputs.json"


def check_reserved(names: Iterable[str], what: str = "output_schema") -> None:
    """Refuse output fields named like a column of the layout (they would be overwritten)."""
    clash = [n for n in names if n in RESERVED]
    if clash:
        raise PipelineError(f"{what} fields {clash} are reserved by sparkcast's output layout "
                            f"({', '.join(RESERVED)}); rename them, e.g. {clash[0].lstrip('_')!r}")


# --------------------------------------------------------------------------- JSON payloads


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


# --------------------------------------------------------------------------- the manifest


def write_manifest(path: str, main: str, side_outputs: dict[str, str | None]) -> None:
    """Beside ``write_stream``'s data: the main and side-output schemas (DDL; None = untyped),
    so ``read_output`` types each output. Any location ``storage`` understands (paths, URIs)."""
    document = {"main": main, "side_outputs": side_outputs}
    storage.write_bytes(storage.join(path, MANIFEST), json.dumps(document, indent=1).encode())


def progress_log_path(path: str) -> str | None:
    """Where a ``write_stream`` query's progress log goes (local paths only: it is appended
    to, which object stores cannot do)."""
    if not storage.is_local_path(path):
        return None
    local = urlsplit(path).path if storage.is_uri(path) else path
    os.makedirs(local, exist_ok=True)
    return os.path.join(local, PROGRESS_LOG)


def read_manifest(path: str) -> dict[str, Any] | None:
    data = storage.read_bytes(storage.join(path, MANIFEST))
    if data is None:
        return None
    found: dict[str, Any] = json.loads(data)
    return found
