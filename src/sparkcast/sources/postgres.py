"""``postgres_table``: a PostgreSQL table as a streaming DataFrame of its changed rows.

Each micro-batch reads the rows whose version column grew since the last one; Spark's
checkpoint keeps that offset, so a restarted query neither re-reads an applied change nor
misses one. Everything that can be checked is checked here, before the query starts: the
database is reachable, the table and columns exist, the version column is NOT NULL and of an
ordered type, and every field has a type this source reads. See docs/sources.md.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from sparkcast.errors import PipelineError
from sparkcast.sources.postgres_reader import (
    CORRUPT,
    SOURCE_NAME,
    PostgresTableSource,
    connect,
    parser,
    quote,
)

#: version column types whose order is the order of change (integers, numeric, time)
VERSION_TYPES = ("smallint", "integer", "bigint", "numeric", "date", "timestamp",
                 "timestamptz")
_SPARK_TYPES = {
    "smallint": "smallint", "integer": "int", "bigint": "bigint", "real": "float",
    "double precision": "double", "boolean": "boolean", "date": "date",
    "timestamp without time zone": "timestamp_ntz", "timestamp with time zone": "timestamp",
    "bytea": "binary",
}


#: the sessions that know the source: Spark warns on each registration after the first
_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()


def postgres_table(spark: Any, conninfo: str, table: str, *, version_column: str,
                   schema: Any = None, key_columns: list[str] | None = None,
                   max_rows_per_batch: int | None = None) -> Any:
    """The rows of ``table`` as a stream: every row once at the start, then each row again
    whenever its ``version_column`` grows (an UPDATE or INSERT that sets a new version, e.g.
    through ``version_trigger_sql``).

    ``conninfo`` is a libpq connection string (``"host=... port=... dbname=... user=..."``;
    a password is better kept in ``PGPASSWORD`` or ``~/.pgpass`` than in the plan).
    ``schema`` (a DDL string or StructType) picks and types the columns; by default every
    column with its PostgreSQL type. A row that does not fit the schema becomes a dead letter
    (callback ``"input"``, the row and the reason as value) instead of reaching the function.
    Within a micro-batch rows come ordered by the version, then ``key_columns`` (default: the
    primary key); pass ``order_by=version_column`` to ``broadcast(...)`` to keep that order.
    ``max_rows_per_batch`` caps a micro-batch (rows of one version are never split)."""
    from pyspark.sql.types import StringType, StructField, StructType

    columns = _table_columns(conninfo, table)
    version_type = _version_type(table, version_column, columns)
    fields = _fields(table, columns, schema)
    keys = key_columns if key_columns is not None else _primary_key(conninfo, table)
    for key in keys:
        if key not in columns:
            raise PipelineError(f"key column {key!r} is not a column of {table}")
    order = [version_column, *[k for k in keys or [f.name for f in fields] if
                               k != version_column]]
    if max_rows_per_batch is not None and max_rows_per_batch < 1:
        raise PipelineError(f"max_rows_per_batch must be at least 1, not {max_rows_per_batch}")
    _register(spark)
    full = StructType([*fields, StructField(CORRUPT, StringType(), True)])
    options = {"conninfo": conninfo, "table": table, "version_column": version_column,
               "version_type": version_type, "columns": json.dumps([f.name for f in fields]),
               "order": json.dumps(order), "max_rows_per_batch": str(max_rows_per_batch or 0)}
    return spark.readStream.format(SOURCE_NAME).schema(full).options(**options).load()


def _register(spark: Any) -> None:
    """Register the source once per session (a stopped session's successor is a new one)."""
    if spark not in _REGISTERED:
        spark.dataSource.register(PostgresTableSource)
        _REGISTERED.add(spark)


def version_trigger_sql(table: str, version_column: str = "version") -> str:
    """SQL that makes ``version_column`` (a NOT NULL bigint) grow on every INSERT and UPDATE of
    ``table``, from a sequence of its own, whatever the writer sets. The trigger takes a
    transaction-level lock on the table's sequence so two writers commit their versions in
    order: a reader never sees version 7 before a transaction holding version 6 commits."""
    name = table.replace(".", "_").replace('"', "")
    sequence, function = quote(f"{name}_{version_column}_seq"), quote(f"{name}_bump_version")
    return f"""
CREATE SEQUENCE IF NOT EXISTS {sequence};
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock('{sequence}'::regclass::oid::bigint);
  NEW.{quote(version_column)} := nextval('{sequence}');
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER {quote(name + "_version")} BEFORE INSERT OR UPDATE ON {quote(table)}
  FOR EACH ROW EXECUTE FUNCTION {function}();
"""


def _table_columns(conninfo: str, table: str) -> dict[str, tuple[str, bool]]:
    """``{column: (type, not null)}`` in the table's order; PipelineError if there is none."""
    sql = ("SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
           "FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 "
           "AND NOT a.attisdropped ORDER BY a.attnum")
    with connect(conninfo) as connection:
        rows = connection.execute(sql, [quote(table)]).fetchall()
    if not rows:
        raise PipelineError(f"table {table} does not exist in the database (or has no "
                            "columns); create it first, or check the name and search_path")
    return {name: (kind, not_null) for name, kind, not_null in rows}


def _version_type(table: str, column: str, columns: dict[str, tuple[str, bool]]) -> str:
    if column not in columns:
        raise PipelineError(f"version column {column!r} is not a column of {table} "
                            f"(it has {', '.join(columns)})")
    kind, not_null = columns[column]
    short = {"timestamp without time zone": "timestamp",
             "timestamp with time zone": "timestamptz"}.get(kind, kind.split("(")[0])
    if short not in VERSION_TYPES:
        raise PipelineError(f"version column {table}.{column} is {kind}; it must be one of "
                            f"{', '.join(VERSION_TYPES)} (a number or time that only grows)")
    if not not_null:
        raise PipelineError(f"version column {table}.{column} may be null, and a null version "
                            f"is never read: ALTER TABLE {table} ALTER COLUMN {column} SET NOT "
                            "NULL (with a default, e.g. from version_trigger_sql)")
    return short


def _fields(table: str, columns: dict[str, tuple[str, bool]], schema: Any) -> list[Any]:
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    if schema is None:
        fields = [StructField(name, _spark_type(kind), not not_null)
                  for name, (kind, not_null) in columns.items()]
    else:
        struct = _parse_datatype_string(schema) if isinstance(schema, str) else schema
        if not isinstance(struct, StructType):
            raise PipelineError(f"schema must be a struct (DDL or StructType), not {schema!r}")
        fields = list(struct.fields)
    for field in fields:
        if field.name == CORRUPT:
            continue
        if field.name not in columns:
            raise PipelineError(f"schema field {field.name!r} is not a column of {table} (it "
                                f"has {', '.join(columns)})")
        if parser(field.dataType) is None:
            raise PipelineError(f"schema field {field.name} is {field.dataType.simpleString()}, "
                                "which a PostgreSQL table source does not read; use a string "
                                "(the value's text) and parse it in the function")
    return [f for f in fields if f.name != CORRUPT]


def _spark_type(kind: str) -> Any:
    from pyspark.sql.types import DecimalType, StringType, _parse_datatype_string

    if kind.startswith("numeric(") and "," in kind:
        precision, scale = (int(p) for p in kind[8:-1].split(","))
        return DecimalType(min(precision, 38), min(scale, 38))
    spark = _SPARK_TYPES.get(kind)
    return _parse_datatype_string(spark) if spark else StringType()  # text, json, uuid, ...


def _primary_key(conninfo: str, table: str) -> list[str]:
    sql = ("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
           "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary "
           "ORDER BY array_position(i.indkey, a.attnum)")
    with connect(conninfo) as connection:
        return [row[0] for row in connection.execute(sql, [quote(table)]).fetchall()]
