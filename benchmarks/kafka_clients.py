"""The Kafka latency run's producer of events and reader of decisions, each its own process.

``python kafka_clients.py feed BOOTSTRAP TOPIC RATE KEYS`` appends ``{"key": k}`` records to
``TOPIC`` at ``RATE`` a second until its stdin closes, then answers with one JSON line (records
sent, seconds). ``python kafka_clients.py watch BOOTSTRAP TOPIC`` reads the decisions topic
``read_committed`` from its start; it prints ``{"seen": v, "ms": t}`` the first time a decision
reflects version ``v`` (a decision carrying version ``w`` reflects every version up to ``w``),
and, once a line ``{"from": ms, "to": ms, "produced": n}`` arrives on its stdin, answers with the
window's figures (``summary``) and ends.

Both run apart from the Spark driver's process: at 20,000 events/s a producer or a reader that
decodes every decision costs a good part of a core, and in the driver it would share the GIL with
the driver's own Python work (sparkcast's micro-batch engine plans and commits there). Times are
the wall clock (``time.time``) in epoch milliseconds, which the broker's ``LogAppendTime``
stamps use too (one machine, one clock).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from array import array


def feed(bootstrap: str, topic: str, rate: int, keys: int) -> dict:
    from confluent_kafka import Producer

    stop = _stop_on_eof()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent, began = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while sent < due:
            try:
                producer.produce(topic, b'{"key": %d}' % (sent % keys))
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.005)
    seconds = time.monotonic() - began
    producer.flush(30)
    return {"sent": sent, "seconds": seconds}


class Decisions:
    """What a reader of the decisions topic saw: when each version was first reflected, how
    many decisions it read in each 100 ms, and each decision's event latency (the time it was
    read minus its event's ``event_ms``), with that ``event_ms``."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.top = -1
        self.read_per_tick: dict[int, int] = {}
        self.event_ms, self.latency_ms = array("d"), array("d")

    def note(self, decisions: list[dict], now_ms: float) -> list[int]:
        """Record decisions read at ``now_ms``; the versions they reflect for the first time."""
        tick = int(now_ms // 100)
        self.read_per_tick[tick] = self.read_per_tick.get(tick, 0) + len(decisions)
        new: list[int] = []
        for decision in decisions:
            version, event = decision["version"], decision["event_ms"]
            if version > self.top:
                new += range(self.top + 1, version + 1)
                self.top = version
            self.event_ms.append(event)
            self.latency_ms.append(now_ms - event)
        for version in new:
            self.seen[version] = now_ms
        return new

    def summary(self, start_ms: float, end_ms: float, produced: int) -> dict:
        """The window ``[start_ms, end_ms)``: decisions read in it, and the event latency of the
        events appended in it (``produced`` of them; one never read counts as slower than any
        read, so a percentile that falls among them is None)."""
        ticks = range(int(start_ms // 100), int(end_ms // 100))
        latencies = sorted(lat for ev, lat in zip(self.event_ms, self.latency_ms, strict=True)
                           if start_ms <= ev < end_ms)
        total = max(produced, len(latencies))
        return {"read": sum(self.read_per_tick.get(t, 0) for t in ticks),
                "events_decided": len(latencies), "events_produced": produced,
                "event_p50_ms": rank(latencies, total, 50),
                "event_p99_ms": rank(latencies, total, 99)}


def rank(ordered: list[float], total: int, q: float) -> float | None:
    """The ``q``-th percentile of ``total`` values of which ``ordered`` are the smallest (the
    rest unknown and larger); None when it falls among the unknown."""
    if total == 0:
        return None
    index = min(total - 1, max(0, round(q / 100 * (total - 1))))
    return ordered[index] if index < len(ordered) else None


def watch(bootstrap: str, topic: str) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    window: dict = {}
    done = threading.Event()

    def read_window() -> None:
        line = sys.stdin.readline()
        window.update(json.loads(line) if line.strip() else {})
        done.set()

    threading.Thread(target=read_window, daemon=True).start()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency-watch",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    decisions = Decisions()
    while not done.is_set():
        messages = consumer.consume(1000, 0.05)
        now = time.time() * 1000
        read = [json.loads(m.value()) for m in messages if m.error() is None]
        for version in decisions.note(read, now):
            print(json.dumps({"seen": version, "ms": decisions.seen[version]}), flush=True)
    consumer.close()
    if not window:
        return {}
    return decisions.summary(window["from"], window["to"], window["produced"])


def _stop_on_eof() -> threading.Event:
    stop = threading.Event()

    def wait() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait, daemon=True).start()
    return stop


def main(argv: list[str]) -> None:
    command, bootstrap, topic, *rest = argv
    if command == "feed":
        result = feed(bootstrap, topic, int(rest[0]), int(rest[1]))
    elif command == "watch":
        result = watch(bootstrap, topic)
    else:
        raise SystemExit(f"unknown command {command!r}: feed or watch")
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
