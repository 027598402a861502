"""TopicManager against a real config-center process on a real etcd member."""

from __future__ import annotations

import json
import threading

import grpc
import pytest
from tidemq.broker.store import MetadataFile
from tidemq.broker.topic_manager import TopicManager
from tidemq.broker.topic_table import TopicTable
from tidemq.v1 import config_pb2, config_pb2_grpc

from tests.support.processes import wait_until


class Config:
    """Writes through a plain stub that waits for the (restarting) config-center to be up."""

    def __init__(self, addr: str) -> None:
        self.stub = config_pb2_grpc.ConfigServiceStub(grpc.insecure_channel(addr))

    def call(self, method: str, request):
        return getattr(self.stub, method)(request, timeout=20, wait_for_ready=True)

    def put(self, name: str, queues: int = 4, raw: bytes | None = None) -> None:
        value = raw if raw is not None else json.dumps(
            {"name": name, "queues": queues, "perm": 6, "order": False}).encode()
        self.call("Put", config_pb2.PutRequest(key=f"/tidemq/topics/{name}", value=value))

    def delete(self, name: str) -> None:
        self.call("Delete", config_pb2.DeleteRequest(key=f"/tidemq/topics/{name}"))


@pytest.fixture
def config_center(etcd_server, services):
    return services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])


class Changes:
    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.count += 1


def names(table: TopicTable) -> dict[str, int]:
    return {t.name: t.queues for t in table.snapshot()[1]}


def test_initial_range_then_watch(config_center, tmp_path):
    config = Config(config_center.addr)
    config.put("a", 2)
    config.put("b", 3)
    config.call("Put", config_pb2.PutRequest(key="/tidemq/other/x", value=b"{}"))
    table = TopicTable(MetadataFile(tmp_path / "topics.json"))
    changes = Changes()
    manager = TopicManager(table, config_center.addr, changes)
    try:
        assert manager.start(10)
        assert names(table) == {"a": 2, "b": 3} and changes.count == 1
        config.put("c", 1)
        config.put("a", 8)
        config.delete("b")
        config.put("bad", raw=b"{broken")  # ignored, logged
        wait_until(lambda: names(table) == {"a": 8, "c": 1}, 10, message="watched changes")
        version = table.data_version
        assert version.counter >= 2 and changes.count >= 2
    finally:
        manager.stop()
    reloaded = TopicTable(MetadataFile(tmp_path / "topics.json"))
    assert names(reloaded) == {"a": 8, "c": 1} and reloaded.revision == table.revision


def test_watch_resumes_after_config_center_restart(config_center, tmp_path):
    config = Config(config_center.addr)
    config.put("a", 1)
    table = TopicTable(MetadataFile(tmp_path / "topics.json"))
    manager = TopicManager(table, config_center.addr)
    try:
        assert manager.start(10)
        config_center.stop()
        config_center.start()  # same port, same etcd: the revision history is intact
        config.put("b", 2)
        wait_until(lambda: names(table) == {"a": 1, "b": 2}, 20, message="change after restart")
    finally:
        manager.stop()


def test_start_without_config_center_serves_persisted_table(config_center, tmp_path):
    config = Config(config_center.addr)
    config.put("a", 1)
    file = MetadataFile(tmp_path / "topics.json")
    first = TopicManager(TopicTable(file), config_center.addr)
    assert first.start(10)
    first.stop()
    config_center.stop()
    table = TopicTable(file)
    manager = TopicManager(table, config_center.addr)
    try:
        assert not manager.start(0.5)
        assert names(table) == {"a": 1}
        config_center.start()
        config.put("b", 2)  # missed while down: picked up by the resync that follows
        wait_until(lambda: names(table) == {"a": 1, "b": 2}, 20, message="resync")
        # set just after the resync applied the table (a reader can see the table first)
        wait_until(lambda: manager.synced, 5, message="synced after the resync")
    finally:
        manager.stop()


def test_a_deletion_event_calls_on_deleted_and_a_resync_never_does(config_center, tmp_path):
    """The broker drops a deleted topic's messages on an explicit deletion only: a topic that
    is just missing from a full resync (a config center that lost its data) keeps them."""
    config = Config(config_center.addr)
    config.put("a", 1)
    config.put("b", 1)
    file = MetadataFile(tmp_path / "topics.json")
    deleted: list[str] = []
    manager = TopicManager(TopicTable(file), config_center.addr, on_deleted=deleted.append)
    try:
        assert manager.start(10)
        config.delete("a")
        config.delete("never-served")  # no such topic here: nothing to drop
        config.put("c", 1)
        wait_until(lambda: "c" in names(manager.table), 10, message="events applied")
        assert deleted == ["a"]
    finally:
        manager.stop()

    config.delete("b")  # while no manager runs: the next start's resync drops it
    table = TopicTable(file)
    manager = TopicManager(table, config_center.addr, on_deleted=deleted.append)
    try:
        assert manager.start(10)
        assert names(table) == {"c": 1} and deleted == ["a"]
    finally:
        manager.stop()


def test_per_group_queue_counts(config_center, tmp_path):
    """A definition with group_queues is served with this group's count; a group it does not
    name does not serve the topic; an old definition is served everywhere."""
    config = Config(config_center.addr)
    config.put("even", 2)
    config.put("split", raw=json.dumps({"name": "split", "queues": 2, "perm": 6,
                                        "group_queues": {"broker-a": 2, "broker-b": 1}}).encode())
    tables = {}
    managers = []
    try:
        for group in ("broker-a", "broker-b", "broker-c"):
            tables[group] = TopicTable(MetadataFile(tmp_path / f"{group}.json"))
            managers.append(TopicManager(tables[group], config_center.addr, broker_name=group))
            assert managers[-1].start(10)
        assert names(tables["broker-a"]) == {"even": 2, "split": 2}
        assert names(tables["broker-b"]) == {"even": 2, "split": 1}
        assert names(tables["broker-c"]) == {"even": 2}
        # extended to broker-c by a watch event; a group dropped from the map stops serving
        config.put("split", raw=json.dumps({"name": "split", "queues": 3, "perm": 6,
                                            "group_queues": {"broker-a": 3, "broker-c": 1}
                                            }).encode())
        wait_until(lambda: names(tables["broker-c"]) == {"even": 2, "split": 1}, 10,
                   message="broker-c serving the extended topic")
        wait_until(lambda: names(tables["broker-b"]) == {"even": 2}, 10,
                   message="broker-b no longer named")
        assert names(tables["broker-a"]) == {"even": 2, "split": 3}
    finally:
        for manager in managers:
            manager.stop()
    reloaded = TopicTable(MetadataFile(tmp_path / "broker-a.json"))
    assert names(reloaded) == {"even": 2, "split": 3}
