"""The Spark wiring of an application: two file-source folders in, one query out.

The module of ``sparkcast.apps`` that builds the query through ``sparkcast.spark`` (the runner
only asks it for a session)::

    events/     JSON lines ─ readStream ─ Stream(...).key_by(...) ─┐
    broadcast/  JSON lines ─ readStream ─ .broadcast(descriptors) ─┴ connect ─ process(app fn)
                                                    → write_stream(output/_output=<name>/)

Both folders are read with a ``_corrupt_record`` column, so a malformed line is a dead letter
(callback ``input``) rather than a row of nulls the function would take for data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkcast.apps.base import App
from sparkcast.spark.planning.corrupt import CORRUPT_COLUMN


def read_folder(spark: Any, schema: str, folder: str | Path, max_files: int | None) -> Any:
    """A folder of JSON lines as a stream of ``schema``'s columns, plus the corrupt-record
    column: a malformed line becomes a dead letter that names its file, never a row of nulls
    (and the pipeline is built without the warning a source lacking the column gets)."""
    reader = spark.readStream.schema(f"{schema}, {CORRUPT_COLUMN} string")
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    return reader.json(str(folder))


def build(app: App, spark: Any, events: str | Path, broadcast: str | Path, *,
          artifacts: str | Path | None = None, parallelism: int = 2,
          max_files_per_trigger: int | None = 1, rules_df: Any = None,
          events_df: Any = None) -> Any:
    """The ``ProcessResult`` of an application over two folders of JSON lines (``rules_df``,
    ``events_df``: a side of the app's schema from elsewhere, e.g. a table or a topic)."""
    from sparkcast.spark import Stream

    main_df = events_df
    if main_df is None:
        main_df = read_folder(spark, app.events_schema, events, max_files_per_trigger)
    if rules_df is None:
        rules_df = read_folder(spark, app.broadcast_schema, broadcast, max_files_per_trigger)
    main = Stream(main_df).key_by(*app.key_by) if app.key_by else Stream(main_df)
    root = Path(artifacts) if artifacts else Path(broadcast).parent / "artifacts"
    rules = Stream(rules_df).broadcast(*app.descriptors, order_by=app.order_by)
    return main.connect(rules).process(
        app.make_function(),
        output_schema=app.output_schema,
        side_outputs=app.side_outputs,
        parallelism=parallelism,
        hold_until_ready=app.hold_until_ready or None,
        job_parameters={"artifact_root": str(root.resolve())},
    )


def start(app: App, spark: Any, events: str | Path, broadcast: str | Path, output: str | Path,
          checkpoint: str | Path, *, artifacts: str | Path | None = None, parallelism: int = 2,
          max_files_per_trigger: int | None = 1, trigger: dict[str, Any] | None = None) -> Any:
    """Start the application's query; it resumes from ``checkpoint`` when one exists."""
    result = build(app, spark, events, broadcast, artifacts=artifacts, parallelism=parallelism,
                   max_files_per_trigger=max_files_per_trigger)
    return result.write_stream(str(output), str(checkpoint), trigger=trigger,
                               query_name=f"sparkcast_{app.name}")
