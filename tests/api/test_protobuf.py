"""``Protobuf``, the value object of Protobuf values, without Spark: refused early with the fix;
the header it writes is the one Confluent's own serializer writes (magic byte, id, message
indexes); its plan of a registry's versions (references included, a version without the
message refused) and its registration of a file with its imports, on the loopback registry;
the password shown nowhere."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sparkcast import Protobuf, SchemaRegistry
from sparkcast.api.protobuf_descriptors import (
    DescriptorSet,
    message_indexes,
    serialized,
    shown_indexes,
)
from sparkcast.errors import PipelineError
from sparkcast.testing.schema_registry import LocalSchemaRegistry
from tests.protobuf_schemas import descriptor_set, message_class, money, rules, write_set

SET = descriptor_set(money(), rules())
PASSWORD = "pw-never-shown"


def test_the_header_is_the_one_confluents_serializer_writes():
    rule = message_class("shop.Rule", money(), rules())
    with LocalSchemaRegistry() as server:
        client = SchemaRegistryClient({"url": server.url})
        value = ProtobufSerializer(rule, client)(
            rule(name="r"), SerializationContext("rules", MessageField.VALUE))
        schema_id = int.from_bytes(value[1:5], "big")
        ours = Protobuf("shop.Rule", SET, confluent=True, schema_id=schema_id).header()
    assert value[:len(ours)] == ours == b"\x00" + schema_id.to_bytes(4, "big") + b"\x02\x02"
    assert rule.FromString(value[len(ours):]).name == "r"
    assert [message_indexes(i) for i in (0, 1, 63, 64)] == [
        b"\x00", b"\x02\x02", b"\x02\x7e", b"\x02\x80\x01"]
    assert [shown_indexes(message_indexes(i)) for i in (0, 1, 64)] == ["[0]", "[1]", "[64]"]


def test_descriptors_come_from_a_file_or_bytes_and_the_message_must_be_top_level(tmp_path):
    path = write_set(tmp_path / "rules.desc", money(), rules())
    assert Protobuf("shop.Rule", path).descriptors == Protobuf("shop.Rule", SET).descriptors
    assert Protobuf("shop.Rule", SET).describe() == "Protobuf message shop.Rule"
    assert Protobuf("shop.Rule", SET, confluent=True).describe() == (
        "Confluent-framed Protobuf message shop.Rule (any schema id)")
    completed = Protobuf("shop.Rule", descriptor_set(rules(), money())).descriptor_set()
    assert "shop.Money" in completed.messages()
    ints = Protobuf("shop.Rule", SET, options={"enums.as.ints": "TRUE"})
    assert (ints.enums_as_ints, ints.emit_defaults) == (True, True)
    zeros_as_nulls = Protobuf("shop.Rule", SET, options={"emit.default.values": "false"})
    assert (zeros_as_nulls.enums_as_ints, zeros_as_nulls.emit_defaults) == (False, False)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (("Rule", SET), {}, r"not a top-level message .* shop\.Note, shop\.Rule"),
    (("shop.Rule", b"\xff\xff"), {}, "not a Protobuf FileDescriptorSet"),
    (("shop.Rule", "/nowhere.desc"), {}, "cannot be read"),
    (("shop.Rule", descriptor_set(rules())), {}, "imports shop/money.proto without"),
    (("shop.Rule",), {}, "needs the message's descriptors"),
    (("shop.Rule", SET), {"schema_id": 3}, "pass confluent=True"),
    (("shop.Rule", SET), {"options": {"mode": "FAILFAST"}},
     r"options \['mode'\]: Protobuf values take emit.default.values and enums.as.ints"),
    (("shop.Rule", SET), {"options": {"enums.as.ints": "yes"}}, "give 'true' or 'false'"),
    (("shop.Rule", SET), {"confluent": True, "schema_id": 1, "registry": "http://r:1"},
     "give one or the other"),
])
def test_mistakes_are_refused_with_the_fix(args, kwargs, message):
    with pytest.raises(PipelineError, match=message):
        Protobuf(*args, **kwargs).descriptor_set()


def test_a_registrys_versions_are_planned_with_their_references_and_credentials_hidden():
    with LocalSchemaRegistry("app", PASSWORD) as server:
        registry = SchemaRegistry(server.url, "app", PASSWORD)
        sink = Protobuf("shop.Rule", SET, confluent=True, registry=registry).written("rules")
        assert (sink.schema_id, sink.registry) == (2, None)  # shop/money.proto first: id 1
        assert server.register("shop/money.proto", serialized(money()), "PROTOBUF") == 1
        imports = [{"name": "shop/money.proto", "subject": "shop/money.proto", "version": 1}]
        server.register("rules-value", serialized(rules(with_rule=False)), "PROTOBUF", imports)
        server.register("rules-value", serialized(rules(2)), "PROTOBUF")  # no references
        reader = Protobuf("shop.Rule", confluent=True, registry=registry)
        with pytest.warns(UserWarning, match="schema id 3 has no message shop.Rule"):
            plan = reader.planned("rules")
        assert (plan.expected, plan.refused) == ({2: b"\x02\x02"}, {
            3: "schema id 3 has no message shop.Rule",
            4: "schema id 4: the descriptor set imports shop/money.proto without holding them: "
               "write it with protoc --include_imports"})
        assert plan.reader.messages()[-2:] == ["shop.Note", "shop.Rule"]  # id 2: the latest
        assert plan.source == f"subject 'rules-value' of the registry at {server.url}"
        latest = reader.written("rules")
        assert latest.schema_id == 2 and DescriptorSet(latest.descriptors).messages()
        for wrong, message in [(SchemaRegistry(server.url, "app", PASSWORD + "x"),
                                "Unauthorized"),
                               (registry, "Subject 'nope' not found")]:
            with pytest.raises(PipelineError, match=message) as refused:
                Protobuf("shop.Rule", confluent=True, registry=wrong, subject="nope"
                         ).planned("rules")
            assert PASSWORD not in str(refused.value)
        assert PASSWORD not in repr(reader) + reader.describe()
