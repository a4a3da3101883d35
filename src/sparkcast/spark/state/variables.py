"""The operator's Spark state variables (the layout is ``backend.py``'s), in a module that
imports nothing heavy: Spark declares them in a Python process of their own on the driver at
every query start (``execution/processor.py``), which loads no more than this."""

from __future__ import annotations

import hashlib
import re
from typing import Any


def state_name(prefix: str, name: str) -> str:
    """A Spark-safe state variable name, unique per descriptor name."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return f"{prefix}_{safe}_{hashlib.blake2b(name.encode(), digest_size=3).hexdigest()}"


class SparkStates:
    """The operator's Spark state variables; declared once in the processor's ``init``."""

    def __init__(self, handle: Any, broadcast_names: list[str]) -> None:
        self.meta = handle.getMapState("meta", "name string", "blob binary")
        self.broadcast = {
            n: handle.getMapState(state_name("b", n), "bucket int", "blob binary")
            for n in broadcast_names
        }
        self.keyed = handle.getMapState("keyed", "state string, bucket int", "blob binary")
