"""A throwaway Apache Kafka broker for tests and demos: KRaft, loopback only, a temporary folder.

>>> with KafkaBroker() as broker:
...     broker.create_topic("rules", partitions=1, config={"cleanup.policy": "compact"})
...     spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)

One JVM runs Kafka's own broker (``kafka.Kafka``, the jars ``make install`` resolved from
``jvm/kafka-broker/pom.xml`` into ``.jars/kafka-broker``) as a combined broker and controller, so
no ZooKeeper. Its storage is formatted in the folder with a fresh cluster id. Single-node
settings let transactions work (the transaction log and the offsets topic with one replica).
The log cleaner runs every 100 ms, so a compaction test need not wait long.

``committed(group)`` gives a consumer group's offsets; ``consumer_groups(...)`` runs Kafka's own
``kafka-consumer-groups`` tool against it, from the same jars. ``stop()`` and ``start()`` keep
the folder and the ports: the same broker comes back with its topics (the broker-restart tests).
Leaving the ``with`` block stops it and removes the folder.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from sparkcast.errors import BrokerError, MissingDependencyError
from sparkcast.jvm import jars_folder
from sparkcast.testing.ports import free_port

#: ``kafka-consumer-groups``' class in Kafka 4 (``kafka-tools``, in jvm/kafka-broker/pom.xml)
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
#: seconds a broker gets to open its port (a cold JVM on a loaded 2-core machine: ~10 s)
START_TIMEOUT = 90.0
_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "100",
    "log.retention.check.interval.ms": "1000",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def broker_classpath() -> str:
    """The broker's jars, or the error that names ``make install``."""
    return str(jars_folder("kafka-broker") / "*")


def java_command() -> str:
    """``java`` of a supported JDK (Kafka 4 needs 17+), or the error that names the fix."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else shutil.which("java")
    if java is None or not os.access(str(java), os.X_OK):
        raise MissingDependencyError(
            "Kafka's broker needs Java 17 or newer: apt-get install openjdk-17-jre-headless, "
            "or point JAVA_HOME at one")
    return str(java)


class KafkaBroker:
    """One Kafka broker on 127.0.0.1 in a temporary folder; ``bootstrap`` is its address."""

    def __init__(self, heap: str = "512m") -> None:
        self.java = java_command()
        self.classpath = broker_classpath()
        self.heap = heap
        self.folder = Path(tempfile.mkdtemp(prefix="sparkcast-kafka-"))
        self.port, self.controller_port = free_port(), free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._write_config()
        self._format()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.folder / "broker.log"

    def _write_config(self) -> None:
        settings = {**_SETTINGS,
                    "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                                 f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
                    "log.dirs": str(self.folder / "data")}
        lines = [f"{key}={value}" for key, value in settings.items()]
        (self.folder / "server.properties").write_text("\n".join(lines) + "\n")

    def _java(self, main: str, *args: str) -> list[str]:
        return [self.java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC",
                "-Djava.awt.headless=true", "-cp", self.classpath, main, *args]

    def _format(self) -> None:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        done = subprocess.run(  # "=": an id may start with "-"
            self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster}", "-c",
                       str(self.folder / "server.properties")),
            capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise MissingDependencyError(
                f"formatting the Kafka broker's storage failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-800:]}")

    def start(self) -> KafkaBroker:
        """Start the broker (again, after ``stop``) and wait until it accepts connections."""
        if self.process is not None and self.process.poll() is None:
            return self
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(self.folder / "server.properties")),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise MissingDependencyError(
                    f"the Kafka broker exited ({self.process.returncode}) while starting: "
                    f"{self._log_tail()}")
            if self._accepts_connections():
                return
            time.sleep(0.2)
        self.stop()
        raise BrokerError(f"the Kafka broker did not start in {START_TIMEOUT:.0f} s: "
                           f"{self._log_tail()}")

    def _accepts_connections(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        return self._serves_metadata()

    def _serves_metadata(self) -> bool:
        try:
            metadata = self.admin().list_topics(timeout=5)
        except Exception:
            return False
        return bool(metadata.brokers)

    def admin(self) -> Any:
        """A confluent-kafka ``AdminClient`` of this broker."""
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError as error:
            raise MissingDependencyError(
                "the Kafka helpers need confluent-kafka: pip install 'sparkcast[kafka]'"
            ) from error
        return AdminClient(self.client_config())

    def _log_tail(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-1500:]
        except OSError:
            return "(no log)"

    def stop(self, kill: bool = False) -> None:
        """Stop the broker (``kill``: SIGKILL, as a crash), keeping its folder and ports."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self.process = None

    def close(self) -> None:
        """Stop the broker and remove its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        """Create ``name`` (one replica) and wait until the broker serves it."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
        futures[name].result(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                return
            time.sleep(0.1)
        raise BrokerError(f"topic {name!r} was created but is not served after 60 s")

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The offsets consumer group ``group`` has committed, ``(topic, partition) → offset``
        (empty for a group that committed none)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self.admin()  # kept while the answer comes: a client gone never answers
        groups = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
        if group not in {listed.group_id for listed in groups.valid}:
            return {}  # asking the offsets of a group that does not exist crashed librdkafka
        asked = [ConsumerGroupTopicPartitions(group)]
        found = admin.list_consumer_group_offsets(asked)[group].result(timeout=30)
        return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions or []
                if tp.offset >= 0}

    def consumer_groups(self, *args: str) -> str:
        """What Kafka's own ``kafka-consumer-groups`` prints for ``args`` (``--list``,
        ``--describe --group g``) against this broker: its class, in the broker's jars."""
        done = subprocess.run(
            self._java(CONSUMER_GROUPS, "--bootstrap-server", self.bootstrap, *args),
            capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"kafka-consumer-groups {' '.join(args)} failed "
                              f"({done.returncode}): {done.stderr.strip()[-800:]}")
        return done.stdout

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """Settings for a confluent-kafka client of this broker."""
        return {"bootstrap.servers": self.bootstrap, **extra}

    def produce(self, topic: str, records: Iterable[tuple[Any, ...]]) -> int:
        """Append ``(key, value)`` or ``(key, value, headers)`` records to ``topic`` in order and
        wait until the broker has them all (idempotent, ``acks=all``). A dict value is written
        as JSON, a str as is (a malformed record), None as a tombstone; ``headers`` as
        confluent-kafka takes them (``(name, value)`` pairs or a dict). Returns how many were
        written."""
        from confluent_kafka import Producer

        producer = Producer(self.client_config(**{"enable.idempotence": True,
                                                  "linger.ms": 5}))
        failures: list[str] = []
        count = 0
        for key, value, *headers in records:
            text = json.dumps(value) if isinstance(value, dict) else value
            producer.produce(topic, key=key, value=text, headers=headers[0] if headers else None,
                             on_delivery=lambda error, _: (
                                 failures.append(error.str()) if error is not None else None))
            producer.poll(0)
            count += 1
        left = producer.flush(60)
        if failures or left:
            raise BrokerError(f"producing to {topic!r}: {left} records not delivered, "
                               f"errors {failures[:3]}")
        return count

    def read(self, topic: str, committed: bool = True, timeout: float = 60.0
             ) -> list[KafkaRecord]:
        """Every record of ``topic`` from the start to its end, in each partition's order, as a
        ``read_committed`` consumer sees them (``committed=False``: aborted ones too)."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        consumer = Consumer(self.client_config(
            **{"group.id": f"sparkcast-read-{uuid.uuid4()}", "enable.auto.commit": False,
               "enable.partition.eof": True, "fetch.wait.max.ms": 10,  # the end, at once
               "isolation.level": "read_committed" if committed else "read_uncommitted"}))
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            pending, records = set(partitions), []
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                message: Any = consumer.poll(0.5)
                if message is None:
                    continue
                error: Any = message.error()
                if error is None:
                    records.append(KafkaRecord.of(message))
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise BrokerError(f"reading {topic!r}: {error.str()}")
            if pending:
                raise BrokerError(f"{topic!r} was not read to its end in {timeout:.0f} s")
            return records
        finally:
            consumer.close()


@dataclass(frozen=True)
class KafkaRecord:
    """One record as ``KafkaBroker.read`` returns it (key and value decoded as UTF-8, the
    headers as the broker holds them: ``(name, bytes)`` pairs in order)."""

    key: str | None
    value: str | None
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @classmethod
    def of(cls, message: Any) -> KafkaRecord:
        key, value = message.key(), message.value()
        return cls(None if key is None else key.decode(), None if value is None else
                   value.decode(), message.partition(), message.offset(),
                   tuple(message.headers() or ()))
