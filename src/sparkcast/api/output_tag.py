"""Side outputs: ``yield tag, value`` or ``ctx.output(tag, value)``, as in PyFlink."""

from __future__ import annotations

from dataclasses import dataclass

from sparkcast.errors import ArgumentTypeError, PipelineError


@dataclass(frozen=True)
class OutputTag:
    """A named side output; Flink's ``OutputTag``.

    ``schema`` (a Spark DDL string such as ``"id string, reason string"``) types the side
    output's DataFrame on Spark; the harness ignores it.

    Examples:
        >>> REVIEW = OutputTag("review", "tx_id string, rule string")
    """

    tag_id: str
    schema: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise PipelineError("OutputTag tag_id cannot be None or empty string")
        if self.schema is not None and not isinstance(self.schema, str):
            raise ArgumentTypeError(
                f"OutputTag schema is a Spark DDL string such as 'id string, n long', not "
                f"{self.schema!r}: PyFlink's type argument (Types.STRING()) has no use here"
            )

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"
