from __future__ import annotations

import pyarrow as pa
import pytest

from sparkcast.core.ddl import parse_ddl
from sparkcast.errors import PipelineError


def test_nested_types():
    schema = parse_ddl("m map<string, array<decimal(5,2)>>, s struct<a:int>")
    assert schema.field("m").type == pa.map_(pa.string(), pa.list_(
        pa.field("element", pa.decimal128(5, 2))))
    assert schema.field("s").type == pa.struct([pa.field("a", pa.int32())])


@pytest.mark.parametrize("bad", ["", "a", "a strin", "a array<int", "a decimal(40,2)",
                                 "a int,", "1a int", "a map<int>", "a int b long"])
def test_invalid_ddl_is_a_pipeline_error(bad):
    with pytest.raises(PipelineError, match="not a valid DDL schema"):
        parse_ddl(bad)
