"""Topic definitions with per-broker-group queue counts and the partition map (pure logic)."""

from __future__ import annotations

import json

import pytest
from tidemq.common.errors import InvalidArgument
from tidemq.configclient.topics import (
    TopicConfig,
    TopicDefinitionError,
    TopicDefinitions,
    parse_partition_map,
    parse_topic_definition,
    spread,
)


def test_an_old_definition_is_the_same_count_on_every_group():
    topic = parse_topic_definition("t", b'{"name": "t", "queues": 3}')
    assert topic.group_queues == () and topic.queues_on("any-group") == 3
    assert topic.for_group("broker-z") == TopicConfig("t", 3)
    assert topic.to_json() == {"name": "t", "queues": 3, "perm": 6, "order": False}


def test_group_queues_name_each_groups_count():
    raw = json.dumps({"name": "t", "queues": 2, "group_queues": {"broker-b": 1, "broker-a": 2}})
    topic = parse_topic_definition("t", raw.encode())
    assert topic.queues_on("broker-a") == 2 and topic.queues_on("broker-b") == 1
    assert topic.queues_on("broker-c") == 0 and topic.for_group("broker-c") is None
    assert topic.for_group("broker-b") == TopicConfig("t", 1)
    assert topic.to_json()["group_queues"] == {"broker-a": 2, "broker-b": 1}
    assert parse_topic_definition("t", json.dumps(topic.to_json()).encode()) == topic


@pytest.mark.parametrize("group_queues", [{}, {"a": 0}, {"a": 1025}, {"": 1}, {"a": True},
                                          [["a", 1]], {"a": "1"}])
def test_bad_group_queues(group_queues):
    raw = json.dumps({"name": "t", "queues": 1, "group_queues": group_queues}).encode()
    with pytest.raises(TopicDefinitionError, match="group_queues"):
        parse_topic_definition("t", raw)


def test_partition_maps_name_queues_the_topic_has():
    topic = TopicConfig("t", 2, group_queues=(("broker-a", 2), ("broker-b", 1)))
    assert parse_partition_map(topic, None) is None
    assert parse_partition_map(topic, [["broker-a", 0], ["broker-b", 0], ["broker-a", 1]]) == \
        [("broker-a", 0), ("broker-b", 0), ("broker-a", 1)]
    for bad in ([["broker-b", 1]], [["broker-c", 0]], [["broker-a", 0], ["broker-a", 0]],
                [["broker-a"]], {"broker-a": 0}, [["broker-a", -1]]):
        with pytest.raises(TopicDefinitionError):
            parse_partition_map(topic, bad)


def test_spread_gives_each_partition_to_the_group_with_fewest():
    assert spread(["a", "b"], 3) == [("a", 0), ("b", 0), ("a", 1)]
    assert spread(["a", "b"], 1) == [("a", 0)]
    assert spread(["a", "b"], 3, {"a": 2, "b": 1}) == [("b", 1), ("a", 2), ("b", 2)]
    assert spread(["a", "b", "c"], 2, {"a": 1, "b": 1}) == [("c", 0), ("a", 1)]


class FakeConfig:
    """The config client's get/put with revisions, in memory."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[bytes, int]] = {}
        self.revision = 0

    def get(self, key):
        if key not in self.docs:
            return None
        value, revision = self.docs[key]
        return type("KV", (), {"value": value, "mod_revision": revision})()

    def put(self, key, value, expected_revision=None):
        current = self.docs.get(key, (b"", 0))[1]
        ok = expected_revision is None or expected_revision == current
        if ok:
            self.revision += 1
            self.docs[key] = (json.dumps(value).encode(), self.revision)
        return type("Put", (), {"succeeded": ok, "revision": self.revision})()


def test_create_with_a_map_then_extend_it_only_at_the_end():
    config = FakeConfig()
    topics = TopicDefinitions(config)
    topics.create("t", partitions=spread(["a", "b"], 3))
    topic, pmap = topics.partition_map("t")
    assert dict(topic.group_queues) == {"a": 2, "b": 1} and topic.queues == 2
    assert pmap == [("a", 0), ("b", 0), ("a", 1)]
    grown = topics.extend_partitions("t", lambda d, cur: spread(
        ["a", "b", "c"], 2, {g: d.queues_on(g) for g in ("a", "b", "c")}))
    assert grown == pmap + [("c", 0), ("b", 1)]
    topic, _ = topics.partition_map("t")
    assert dict(topic.group_queues) == {"a": 2, "b": 2, "c": 1}
    assert topics.extend_partitions("t", lambda d, cur: []) == grown
    with pytest.raises(InvalidArgument, match="twice"):
        topics.extend_partitions("t", lambda d, cur: [("a", 0)])


def test_an_old_topic_gets_a_map_without_changing_its_counts():
    config = FakeConfig()
    topics = TopicDefinitions(config)
    topics.create("old", 2)
    assert topics.partition_map("old")[1] is None
    routed = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert topics.extend_partitions("old", lambda d, cur: routed) == routed
    topic, pmap = topics.partition_map("old")
    assert topic.group_queues == () and topic.queues == 2 and pmap == routed
    # a new group's queues are appended; the old ones keep their partitions
    assert topics.extend_partitions("old", lambda d, cur: [("c", 0), ("c", 1)])[:4] == routed
    assert topics.partition_map("old")[0].group_queues == ()
