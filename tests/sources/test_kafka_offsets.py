"""The pure parts of ``commit_offsets`` (no JVM): which settings reach the committer, the end
offsets read from a progress report, the group's name, and a reason with no setting's value
in it. ``test_kafka_topic.py`` runs the commits on a real broker with Kafka's own tool."""

from __future__ import annotations

from sparkcast.sources import kafka_offsets as offsets


def test_only_login_settings_reach_the_committer_and_no_value_reaches_a_reason():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="app" password="pa55";')
    settings = offsets.client_settings({
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas, "kafka.ssl.ca.location": "/ca.pem",
        "kafka.fetch.max.wait.ms": "50", "maxOffsetsPerTrigger": "4"})
    assert settings == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": "app", "sasl.password": "pa55",
                        "ssl.ca.location": "/ca.pem"}
    reason = offsets.redacted_reason(ValueError('Invalid value "pa55" for "sasl.password"\nmore'),
                             settings)
    assert reason == 'Invalid value "***" for "sasl.password"'
    wanted = offsets.OffsetCommits("b:9092", settings)
    assert "pa55" not in repr(wanted)
    assert wanted.group({"name": None, "id": "q-1"}) == "sparkcast-q-1"
    assert offsets.OffsetCommits("b:9092", {}, "shop").group({"name": "fraud"}) == "shop"


def test_end_offsets_are_read_per_topic_and_partition_from_the_progress():
    progress = {"name": "fraud", "sources": [
        {"description": "KafkaV2[Subscribe[events]]", "endOffset": {"events": {"0": 7, "1": 3}}},
        {"description": "KafkaV2[Subscribe[rules]]", "endOffset": '{"rules": {"0": 2}}'},
        {"description": "FileStreamSource[/in]", "endOffset": {"logOffset": 4}},
        {"description": "postgres", "endOffset": "not json"}]}
    assert offsets.end_offsets(progress) == {"events": {0: 7, 1: 3}, "rules": {0: 2}}
