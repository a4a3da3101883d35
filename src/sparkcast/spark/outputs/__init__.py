"""Where a plan's outputs go (the tagged frame of each engine is built in
``planning/frames.py``).

- The one ``foreachBatch`` driver (``batch_driver.py``) and its consumers: ``file_writer.py``
  for ``write_stream(path)``, ``batch_outputs.py`` for ``foreach_batch`` and ``sinks=``, and
  ``sinks_in_tasks.py`` where the pattern's own tasks write Kafka and files (their side:
  ``task_sinks.py``; the driver's half of their files: ``task_files.py``).
- ``sinks=``: checked and started by ``targets.py``; each micro-batch written into every sink in
  the commit order by ``sink_writer.py``, which skips an output the batch's counts show empty.
  Each kind with its protocol: ``files.py`` (also ``write_stream(path)``'s layout, manifest and
  ``read_output``), ``jdbc.py``, ``tables.py`` (``table``, ``delta``, a user's own sink) and
  Kafka's: the driver side in ``kafka.py``, the part writers in ``kafka_transactions.py``, the
  markers read in ``kafka_marker_reads.py``, the client library in ``kafka_client.py``, the
  marker topics in ``kafka_markers.py``, the record values in ``kafka_values.py``, Protobuf's by
  ``protobuf_codec.py`` and ``protobuf_rows.py``, and a schema id registered after the query
  started read by the workers through ``avro_late.py`` and ``protobuf_late.py`` over
  ``registry_lookup.py``.
- The typed outputs (``typed.py``), ``write_stream(path)``'s start (``sinks.py``) and one
  checkpoint per output folder (``guarded.py``)."""
