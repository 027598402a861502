"""Per-topic settings (tidemq.configclient.topic_settings): validation names the setting, the
definition keeps only what was set, and `effective` shows every value with its source."""

from __future__ import annotations

import json

import pytest
from tidemq.common import errors
from tidemq.configclient import topic_settings
from tidemq.configclient.topics import (
    TopicConfig,
    TopicDefinitionError,
    parse_topic_definition,
)


def test_values_from_strings_and_json_are_normalised():
    parsed = topic_settings.parse_settings({
        "retention.ms": "60000", "retention.bytes": -1, "cleanup.policy": "delete, compact",
        "min.compaction.lag.ms": 0, "delete.retention.ms": "1000", "max.message.bytes": 1024})
    assert parsed == {"retention.ms": 60000, "retention.bytes": -1,
                      "cleanup.policy": "compact,delete", "min.compaction.lag.ms": 0,
                      "delete.retention.ms": 1000, "max.message.bytes": 1024}


@pytest.mark.parametrize(("changes", "named"), [
    ({"retention.mss": "1"}, "unknown topic setting 'retention.mss'"),
    ({"retention.ms": "soon"}, "'retention.ms' must be an integer"),
    ({"retention.ms": 0}, "'retention.ms' must be an integer 1.."),
    ({"retention.bytes": True}, "'retention.bytes' must be an integer"),
    ({"cleanup.policy": "compress"}, "'cleanup.policy' must be one of delete, compact"),
    ({"cleanup.policy": "compact,compact"}, "'cleanup.policy' must be one of"),
    ({"min.compaction.lag.ms": -1}, "'min.compaction.lag.ms' must be an integer 0.."),
    ({"max.message.bytes": 1 << 40}, "'max.message.bytes' must be an integer 1.."),
])
def test_a_bad_setting_is_refused_naming_it(changes, named):
    with pytest.raises(errors.InvalidArgument) as raised:
        topic_settings.parse_settings(changes)
    assert raised.value.code == "INVALID_TOPIC_CONFIG" and named in raised.value.message


def test_null_means_default_only_where_allowed():
    assert topic_settings.parse_settings({"retention.ms": None}, allow_null=True) == {
        "retention.ms": None}
    with pytest.raises(errors.InvalidArgument, match="'retention.ms'"):
        topic_settings.parse_settings({"retention.ms": None})


def test_effective_lists_every_setting_with_its_source():
    shown = topic_settings.effective({"cleanup.policy": "compact"})
    assert list(shown) == list(topic_settings.SETTINGS)
    assert shown["cleanup.policy"] == {"value": "compact", "source": "topic"}
    assert shown["retention.bytes"] == {"value": -1, "source": "default"}


def test_definition_round_trips_its_config():
    raw = json.dumps({"name": "t", "queues": 2, "config": {"retention.ms": 5000}}).encode()
    topic = parse_topic_definition("t", raw)
    assert topic.config == (("retention.ms", 5000),) and topic.setting("retention.ms") == 5000
    assert topic.setting("cleanup.policy") == "delete"
    assert topic.for_group("broker-a").config == topic.config
    assert TopicConfig.from_json(topic.to_json()) == topic
    assert "config" not in TopicConfig("u", 1).to_json()   # nothing set: nothing written


def test_a_definition_with_a_bad_setting_does_not_parse():
    raw = json.dumps({"name": "t", "queues": 2, "config": {"retention.ms": "x"}}).encode()
    with pytest.raises(TopicDefinitionError, match="topic 't'.*'retention.ms'"):
        parse_topic_definition("t", raw)
