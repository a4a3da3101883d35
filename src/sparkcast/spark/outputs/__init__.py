"""Where a plan's outputs go (the tagged frame of each engine is built in
``planning/frames.py``): the one ``foreachBatch`` driver (``batch_driver.py``) and its consumers
(``file_writer.py`` for ``write_stream(path)``, ``batch_outputs.py`` for ``foreach_batch`` and
the sinks of ``targets.py``, which skip an output the batch's counts show empty; Kafka's
transactions in ``kafka.py`` (the driver) and ``kafka_transactions.py`` (the part writers), its
markers read in ``kafka_marker_reads.py``, the client library in ``kafka_client.py``, its
marker topics in ``kafka_markers.py``, its record values in
``kafka_values.py``, Protobuf's by ``protobuf_codec.py`` and ``protobuf_rows.py``, and the
workers' reading of a schema id registered after the query started by ``avro_late.py`` and
``protobuf_late.py`` over ``registry_lookup.py``; the consumer
whose pattern tasks write Kafka and files themselves, ``sinks_in_tasks.py``, with its task
side, ``task_sinks.py``), the typed outputs (``typed.py``), ``write_stream(path)``'s start
(``sinks.py``) and its files (``files.py``)."""
