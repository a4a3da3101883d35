"""How ``kafka_topic`` reads Protobuf values (``sparkcast.Protobuf``): Google's protobuf runtime
parses each body in the Python workers with the reader's message (``protobuf_codec.decoded``, a
pandas UDF), after Confluent's header when framed; the header and the indexes are checked in the
JVM. A body that does not parse is a dead letter whose reason ends with the runtime's error.
Protobuf's wire format has no length or checksum: bytes that happen to parse are read as a
message, as every Protobuf decoder reads them.

Framed, the header's id says which message indexes the record must carry (the message's place
in the version the id names, gathered once when the query is planned: ``ProtobufPlan``); the
body starts after them, and every body is parsed with the reader's message. Spark fixes a
streaming query's expressions when it starts, so with a registry the UDF is also handed the
whole value of each record whose id the plan did not know (null for the others): the worker
looks the id up, once per process, finds the message's indexes in that version and parses the
body after them (``spark/outputs/protobuf_late.py``), or gives the reason there is none (an id
the registry lacks, a version without the message, indexes naming another message). Without a
registry an unexpected id is a dead letter saying so, as is an id of the plan whose version
lacks the message.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast.api.formats import HEADER_SIZE
from sparkcast.api.protobuf import Protobuf
from sparkcast.api.protobuf_descriptors import shown_indexes
from sparkcast.api.registry import SchemaRegistry
from sparkcast.sources.confluent_header import header_reasons, other_id, schema_id, unknown_id
from sparkcast.sources.confluent_header import late as late_values
from sparkcast.spark.outputs.protobuf_codec import ERROR, LATE, decoded
from sparkcast.spark.outputs.protobuf_late import LateProtobuf

#: where the message indexes start (1-based, as Spark's ``substring``)
_INDEXES_AT = HEADER_SIZE + 1


class ProtobufValues:
    """A Protobuf body per value (after Confluent's header and message indexes when
    ``proto.confluent``), parsed by the protobuf runtime with the reader's message; a body
    that does not parse, or a header or indexes that do not fit, are refused."""

    def __init__(self, proto: Protobuf, topic: str) -> None:
        self._proto = proto
        self._plan = proto.planned(topic)
        self._descriptors = self._plan.reader.data
        self._late = (LateProtobuf(proto.registry, proto.message)
                      if isinstance(proto.registry, SchemaRegistry) else None)

    def value(self, raw: Column) -> Column:
        return raw

    def prepared(self, frame: DataFrame) -> DataFrame:
        return frame

    def parsed(self) -> Column:
        value = F.col("_v")
        if not self._proto.confluent:
            return self._decoded(value)
        start = F.lit(_INDEXES_AT) + F.length(self._by_id(self._plan.expected, self._plan.indexes))
        return self._decoded(value.substr(start, F.length(value)))

    def _decoded(self, body: Column) -> Column:
        late = None
        if self._late is not None:  # the whole value where the plan did not know the id
            late = (late_values(self._known_ids()), self._late)
        return decoded(body, self._proto.message, self._descriptors, self._proto.emit_defaults,
                       self._proto.enums_as_ints, late)

    def _known_ids(self) -> list[int]:
        """The ids the plan knows, with or without the message."""
        return sorted([*(self._plan.expected or {}), *self._plan.refused])

    def struct(self, frame: DataFrame) -> StructType:
        parsed = frame.schema["_p"].dataType
        assert isinstance(parsed, StructType)
        return StructType([f for f in parsed.fields if f.name not in (ERROR, LATE)])

    def reasons(self) -> list[tuple[Column, Column]]:
        message = self._proto.message
        error = F.col("_p").getField(ERROR)
        if not self._proto.confluent:
            return [(error.isNotNull(), F.concat(F.lit(f"the value does not parse as the "
                                                       f"Protobuf message {message}: "), error))]
        found = header_reasons()
        plan = self._plan
        if self._proto.schema_id is not None:
            found.append(other_id(self._proto.schema_id))
        if plan.expected is not None:
            found += [(schema_id() == F.lit(i), F.lit(why)) for i, why in plan.refused.items()]
            if self._late is not None:  # the worker's lookup says why
                late = F.col("_p").getField(LATE)
                found.append((late.isNotNull(), late))
            else:
                found.append(unknown_id([*plan.expected, *plan.refused],
                                        f"schemas of {plan.source}"))
        expected = self._by_id(plan.expected, plan.indexes)
        shown = self._by_id({i: shown_indexes(b) for i, b in (plan.expected or {}).items()},
                            shown_indexes(plan.indexes))
        wrong = F.col("_v").substr(F.lit(_INDEXES_AT), F.length(expected)) != expected
        if self._late is not None:  # a late id's indexes are checked by its lookup
            wrong = F.when(schema_id().isin(self._known_ids()), wrong)
        found.append((wrong,
                      F.concat(F.lit("the message indexes "), _record_indexes(),
                               F.lit(f" are not message {message}'s ("), shown, F.lit(")"))))
        found.append((error.isNotNull(), F.concat(
            F.lit(f"the body does not parse as the Protobuf message {message} (schema id "),
            schema_id().cast("string"), F.lit("): "), error)))
        return found

    def raw_value(self) -> Column:
        return F.base64(F.col("_v")).alias("value_base64")

    @staticmethod
    def _by_id(values: Mapping[int, bytes | str] | None, otherwise: bytes | str) -> Column:
        """``values[id]`` for the record's id, ``otherwise`` for any other id."""
        if not values:
            return F.lit(otherwise)
        items = list(values.items())
        chain = F.when(schema_id() == F.lit(items[0][0]), F.lit(items[0][1]))
        for known, value in items[1:]:
            chain = chain.when(schema_id() == F.lit(known), F.lit(value))
        return chain.otherwise(F.lit(otherwise))


def _record_indexes() -> Column:
    """The record's message indexes as a list where each is one byte (indexes below 64, as
    good as every schema's), else the bytes after the header in hex."""
    value = F.col("_v")

    def byte(at: Column) -> Column:
        return F.conv(F.hex(value.substr(at, F.lit(1))), 16, 10).cast("int")

    count = byte(F.lit(_INDEXES_AT))
    items = F.transform(F.sequence(F.lit(1), F.greatest(F.lit(1), (count / 2).cast("int"))),
                        lambda k: byte(k + _INDEXES_AT))
    simple = ((count % 2 == 0) & (count < 0x80)
              & (F.length(value) >= F.lit(_INDEXES_AT) + (count / 2).cast("int"))
              & F.forall(items, lambda b: (b % 2 == 0) & (b < 0x80)))
    listed = F.concat(F.lit("["), F.array_join(
        F.transform(items, lambda b: (b / 2).cast("int").cast("string")), ", "), F.lit("]"))
    return (F.when(F.length(value) < _INDEXES_AT, F.lit("(none: the value ends after the header)"))
            .when(count == 0, F.lit("[0]")).when(simple, listed)
            .otherwise(F.concat(F.lit("0x"), F.hex(value.substr(F.lit(_INDEXES_AT), F.lit(8))))))
