"""Classes registered explicitly for state: ``sparkcast.register_types(Rule, Model)``.

State holds objects by their class's qualified name, and decoding resolves that name only against
classes the job knows (``core/type_registry.py``). Most are found on their own (the function's
module, the descriptors' types); a class that is not, say one only made inside a helper module,
is registered here. The registrations are captured into ``ProcessOptions`` when a pipeline is
built, so they travel to Spark's workers with the job's code.
"""

from __future__ import annotations

from sparkcast.errors import ArgumentTypeError

_REGISTERED: dict[str, type] = {}


def register_types(*classes: type) -> None:
    """Let state, broadcast and main values of these classes come back as their class."""
    for cls in classes:
        if not isinstance(cls, type):
            raise ArgumentTypeError(f"register_types takes classes, not {cls!r}")
        _REGISTERED[f"{cls.__module__}:{cls.__qualname__}"] = cls


def registered_types() -> tuple[type, ...]:
    """The classes registered so far (a snapshot, as the pipeline being built sees them)."""
    return tuple(_REGISTERED.values())
