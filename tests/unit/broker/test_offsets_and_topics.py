"""ConsumerOffsetManager and TopicTable persistence; topic definition validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.broker.offsets import MAX_METADATA_LENGTH, ConsumerOffsetManager
from tidemq.broker.store import MetadataFile
from tidemq.broker.topic_table import TopicConfig, TopicTable
from tidemq.common.errors import InvalidArgument
from tidemq.common.system_topics import DELETED_TOPICS_TOPIC
from tidemq.configclient.topics import (
    TopicDefinitionError,
    TopicDefinitions,
    parse_topic_definition,
)


def test_offsets_survive_restart_only_after_persist(tmp_path):
    file = MetadataFile(tmp_path / "offsets.json")
    offsets = ConsumerOffsetManager(file)
    offsets.commit("g", [("t", 0, 5), ("t", 1, 7), ("u", 0, 1)])
    offsets.commit("g", [("t", 0, 6)])
    assert offsets.query("g", "t") == [("t", 0, 6), ("t", 1, 7)]
    assert ConsumerOffsetManager(file).query("g") == []  # not yet persisted
    assert offsets.persist() and not offsets.persist()  # second write skipped: not dirty
    reloaded = ConsumerOffsetManager(file)
    assert reloaded.query("g") == [("t", 0, 6), ("t", 1, 7), ("u", 0, 1)]
    assert reloaded.groups() == ["g"]


def test_deleting_a_topics_offsets_forgets_them_for_every_group_or_one(tmp_path):
    file = MetadataFile(tmp_path / "offsets.json")
    offsets = ConsumerOffsetManager(file)
    offsets.commit("g", [("gone", 0, 5), ("kept", 0, 7)])
    offsets.commit("h", [("gone", 1, 2)])
    offsets.commit("i", [("gone", 0, 9)])
    assert offsets.delete_topic("gone", "i") == ["i"]
    assert offsets.groups() == ["g", "h"]  # a group left with no offsets is gone too
    offsets.persist()
    assert offsets.delete_topic("gone") == ["g", "h"]
    assert offsets.delete_topic("gone") == []
    assert offsets.persist()  # the deletion is written like a commit
    reloaded = ConsumerOffsetManager(file)
    assert reloaded.query("g") == [("kept", 0, 7)] and reloaded.groups() == ["g"]


def test_commit_metadata_is_kept_replaced_persisted_and_bounded(tmp_path):
    file = MetadataFile(tmp_path / "offsets.json")
    offsets = ConsumerOffsetManager(file)
    offsets.commit("g", [("t", 0, 5), ("t", 1, 7), ("u", 0, 1)],
                   {("t", 0): "gen-3 \u00e9", ("u", 0): "x"})
    assert offsets.metadata("g") == {("t", 0): "gen-3 \u00e9", ("u", 0): "x"}
    assert offsets.metadata("g", "t") == {("t", 0): "gen-3 \u00e9"}
    offsets.commit("g", [("u", 0, 2)])                    # a commit without one clears it
    assert offsets.metadata("g") == {("t", 0): "gen-3 \u00e9"}
    # counted as Kafka counts (UTF-16 units): 4096 "é" are taken, 4095 and one emoji are not
    largest = "\u00e9" * MAX_METADATA_LENGTH
    offsets.commit("g", [("t", 1, 8)], {("t", 1): largest})
    with pytest.raises(InvalidArgument) as refused:
        offsets.commit("g", [("t", 1, 9)], {("t", 1): largest[1:] + "\U0001f600"})
    assert refused.value.code == "OFFSET_METADATA_TOO_LARGE"
    assert "4097 characters" in refused.value.message
    assert offsets.query("g", "t")[1] == ("t", 1, 8)      # nothing of the refused commit
    assert offsets.persist()
    reloaded = ConsumerOffsetManager(file)
    assert reloaded.metadata("g") == {("t", 0): "gen-3 \u00e9", ("t", 1): largest}
    assert reloaded.delete_topic("t") == ["g"]
    assert reloaded.metadata("g") == {}
    # a slave's copy takes the master's strings with its offsets, and drops its own
    assert reloaded.replace_all(offsets.snapshot(), offsets.metadata_snapshot())
    assert reloaded.metadata_snapshot() == offsets.metadata_snapshot()
    assert not reloaded.replace_all(offsets.snapshot(), offsets.metadata_snapshot())
    assert reloaded.replace_all(offsets.snapshot(), {})
    assert reloaded.metadata("g") == {}


def test_offsets_flusher_persists_on_stop(tmp_path):
    file = MetadataFile(tmp_path / "offsets.json")
    offsets = ConsumerOffsetManager(file)
    offsets.start(interval_s=3600)
    offsets.commit("g", [("t", 0, 1)])
    offsets.stop()
    assert ConsumerOffsetManager(file).query("g") == [("t", 0, 1)]


@pytest.mark.parametrize("group,entry", [("", ("t", 0, 1)), ("g", ("t", -1, 1)),
                                         ("g", ("t", 0, -5))])
def test_bad_commits_rejected(tmp_path, group, entry):
    offsets = ConsumerOffsetManager(MetadataFile(tmp_path / "o.json"))
    with pytest.raises(InvalidArgument):
        offsets.commit(group, [entry])
    assert offsets.query("g") == []


def test_topic_table_versions_and_persistence(tmp_path):
    file = MetadataFile(tmp_path / "topics.json")
    table = TopicTable(file)
    start = table.data_version
    assert table.apply([TopicConfig("a", 4)], [], revision=3)
    assert table.data_version.counter == start.counter + 1
    assert not table.apply([TopicConfig("a", 4)], [], revision=4)  # no change, no new version
    assert table.data_version.counter == start.counter + 1
    assert table.apply([TopicConfig("b", 1)], ["a"], revision=5)
    reloaded = TopicTable(file)
    assert [t.name for t in reloaded.snapshot()[1]] == ["b"] and reloaded.revision == 5
    assert reloaded.apply([TopicConfig("c", 2)], [], revision=9, replace_all=True)
    assert [t.name for t in reloaded.snapshot()[1]] == ["c"]


@pytest.mark.parametrize("raw,why", [
    (b"{not json", "not JSON"), (b"[1]", "JSON object"), (b'{"name": "other"}', "must equal"),
    (b'{"queues": 0}', "queues"), (b'{"queues": "4"}', "queues"), (b'{"perm": 9}', "perm"),
])
def test_bad_topic_definitions(raw, why):
    with pytest.raises(TopicDefinitionError, match=why):
        parse_topic_definition("orders", raw)


def test_the_deletion_log_topic_cannot_be_defined():
    """Only brokers append deletion markers: a definition would let producers append them."""
    with pytest.raises(TopicDefinitionError, match="reserved"):
        parse_topic_definition(DELETED_TOPICS_TOPIC, b"{}")
    with pytest.raises(InvalidArgument, match="reserved") as refused:
        TopicDefinitions(config=None).create(DELETED_TOPICS_TOPIC, 1)  # refused before a call
    assert refused.value.code == "INVALID_TOPIC"


def test_topic_definition_defaults():
    topic = parse_topic_definition("orders", b'{"name": "orders", "queues": 8}')
    assert topic == TopicConfig("orders", 8, 6, False)
    assert topic.readable and topic.writable
    assert not parse_topic_definition("ro", b'{"perm": 2}').writable


@given(st.binary(max_size=64))
def test_any_bytes_parse_or_fail_cleanly(raw):
    try:
        topic = parse_topic_definition("t", raw)
    except TopicDefinitionError:
        return
    assert topic.name == "t" and 1 <= topic.queues <= 1024
