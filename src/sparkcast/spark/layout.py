"""Every column and file name of sparkcast's Spark layout, in one place (pure: no pyspark).

The inputs travel tagged (``SIDE``, ``TS``, ``SEQ``, ``ORDER`` and the user's fields renamed
``m_0 …`` / ``s_0 …`` / ``b_0 …``, so user names never clash); the operator emits one tagged frame:
``_tag`` (null = main), ``_ts``, ``_payload`` (JSON of side outputs, dead letters and the
``_metrics`` rows: few, with many schemas) and then the main fields in typed columns.
``write_stream`` replaces ``_tag`` by the partition column ``_output`` (``main``, a tag id or
``dead_letters``) and writes a manifest of the side-output schemas and a progress log beside the
data. The Spark runtime and ``monitoring`` (which reads written outputs without pyspark) take
these names from here; ``check_reserved`` keeps user fields off them.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparkcast.errors import PipelineError

# ---- the tagged inputs
SUBTASK = "_subtask"  #: the operator's grouping key (a virtual subtask's group value)
SIDE = "_side"  #: which input a row comes from (``MAIN_SIDE``, ``BROADCAST_SIDE``, ...)
SEQ = "_seq"  #: a main row's source position, the order its subtask runs it in (``ordering.py``)
BLOB = "_blob"  #: packed main rows (``execution/packing.py``)
ORDER = "_order"  #: the broadcast side's ``order_by`` column
RAW = "_raw"  #: a malformed input line's text
ERROR = "_error"  #: why it is malformed
MAIN_SIDE, BROADCAST_SIDE = 0, 1
SECOND_SIDE = 2  #: a ``KeyedCoProcessFunction``'s second keyed input
TICK_SIDE = 3  #: by subtask: one row per subtask and micro-batch, so every one runs
#: by subtask with timers: the rows of the query's clock (``tagging.clock``)
CLOCK_SIDE = 4
CORRUPT_SIDE = 5  #: the micro-batch engine: malformed rows of any input


def main_column(index: int) -> str:
    """The tagged input's name of the main stream's field ``index``."""
    return f"m_{index}"


def second_column(index: int) -> str:
    """The micro-batch engine's name of a co-function's second input's field ``index``."""
    return f"s_{index}"


def broadcast_column(index: int) -> str:
    """The tagged input's name of the broadcast stream's field ``index``."""
    return f"b_{index}"


# ---- the tagged output
TAG = "_tag"
TS = "_ts"  #: epoch milliseconds (also the inputs' event-time column)
PAYLOAD = "_payload"
OUTPUT = "_output"
MAIN = "main"
#: the tag of the one row per subtask and call that carries its metrics (JSON in ``_payload``;
#: ``core/batch_metrics.py``); every accessor of ``ProcessResult`` filters it out, the
#: observation reads it, ``write_stream`` writes it under ``_output=_metrics``
METRICS = "_metrics"
#: column names of the tagged frame and of ``write_stream``'s files: no output field may use them
RESERVED = (TAG, TS, PAYLOAD, OUTPUT)

DEAD_LETTER_SCHEMA = ("callback string, error string, key string, value string, "
                      "timestamp long, subtask int")
"""The dead letters' columns as a DDL string: ``ProcessResult.dead_letters``, and the
``dead_letters`` output that ``write_stream`` writes."""

# Spark's escaping of a partition value in a folder name (``ExternalCatalogUtils``): these
# characters become ``%XX``; a reader unescapes them
_ESCAPED = frozenset([*map(chr, range(1, 32)), *'"#%\'*/:=?\\\x7f{[]^'])


def output_folder(name: str) -> str:
    """The folder of output ``name`` under ``write_stream``'s path, as Spark's
    ``partitionBy(OUTPUT)`` names it (``_output=main``, ``_output=late%2Fevents``)."""
    return OUTPUT + "=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)


# ---- files beside ``write_stream``'s data
MANIFEST = "_sparkcast_outputs.json"  #: the outputs' schemas (``outputs/files.py``)
PROGRESS_LOG = "_sparkcast_progress.jsonl"  #: one merged record per micro-batch


def check_reserved(names: Iterable[str], what: str = "output_schema") -> None:
    """Refuse output fields named like a column of the layout (they would be overwritten)."""
    clash = [n for n in names if n in RESERVED]
    if clash:
        raise PipelineError(f"{what} fields {clash} are reserved by sparkcast's output layout "
                            f"({', '.join(RESERVED)}); rename them, e.g. {clash[0].lstrip('_')!r}")
