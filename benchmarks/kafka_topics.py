"""The Kafka benchmark's way in and out of topics, for every system alike: records appended by
a confluent-kafka producer, a topic read as a stream of its JSON values by Spark's own Kafka
source."""

from __future__ import annotations

import json

from sparkcast.testing.kafka import KafkaBroker


def produce(broker: KafkaBroker, topic: str, rows: list[dict], key: str | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer(broker.client_config(**{"linger.ms": 20}))
    for row in rows:
        while True:
            try:
                producer.produce(topic, json.dumps(row),
                                 None if key is None else str(row[key]))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def parsed(spark, broker: KafkaBroker, topic: str, schema: str, extra: dict | None = None):
    """A topic as a stream of its JSON values' columns (Spark's own Kafka source)."""
    from pyspark.sql import functions as F

    # the fetch wait sparkcast.sources.kafka_topic sets by default, for every system alike
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.fetch.max.wait.ms", "50"))
    for name, value in (extra or {}).items():
        reader = reader.option(name, value)
    frame = reader.load()
    return frame.select(F.from_json(F.col("value").cast("string"), schema).alias("v"),
                        F.col("timestamp")).select("v.*", "timestamp")
