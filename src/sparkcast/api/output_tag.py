"""Side outputs: ``yield tag, value`` or ``ctx.output(tag, value)``, as in PyFlink."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkcast.api.pyflink_types import output_ddl
from sparkcast.errors import PipelineError


@dataclass(frozen=True)
class OutputTag:
    """A named side output; Flink's ``OutputTag``.

    ``schema`` types the side output's DataFrame on Spark, and the harness checks values against
    it: a Spark DDL string such as ``"id string, reason string"``, or PyFlink's type argument
    (``Types.ROW_NAMED([...], [...])``, ``Types.ROW``, ``Types.LIST``, a basic ``Types.*``);
    ``Types.PICKLED_BYTE_ARRAY()`` gives one column ``value`` of each value's codec text
    (``codec`` is then True; ``sparkcast.spark.decode_output`` turns it back into objects).

    Examples:
        >>> REVIEW = OutputTag("review", "tx_id string, rule string")
        >>> OutputTag("review", Types.ROW_NAMED(["tx_id"], [Types.STRING()])).schema
        '`tx_id` string'
    """

    tag_id: str
    schema: str | None = None
    codec: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise PipelineError("OutputTag tag_id cannot be None or empty string")
        if self.schema is not None and not isinstance(self.schema, str):
            schema: Any = self.schema
            ddl, codec = output_ddl(schema, f"OutputTag({self.tag_id!r})")
            object.__setattr__(self, "schema", ddl)
            object.__setattr__(self, "codec", codec)

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"
