"""PrefixMirror: initial listing, live changes, and reconciliation after compaction."""

from __future__ import annotations

from tidemq.configclient.client import ConfigClient
from tidemq.configclient.mirror import PrefixMirror


def _recorder():
    seen: list[tuple[str, str, str | None]] = []

    def on_put(kv, previous):
        seen.append(("put", kv.key, previous.text if previous else None))

    def on_delete(key, previous):
        seen.append(("delete", key, previous.text))

    return seen, on_put, on_delete


def test_mirror_reports_existing_keys_then_changes(client):
    client.put("/tidemq/topics/a", {"name": "a", "queues": 4, "perm": 6, "order": False})
    seen, on_put, on_delete = _recorder()
    with PrefixMirror(client, "/tidemq/topics/", on_put=on_put, on_delete=on_delete) as mirror:
        assert seen == [("put", "/tidemq/topics/a", None)]
        client.put("/tidemq/topics/b", "b1")
        client.put("/tidemq/topics/b", "b2")
        client.put("/tidemq/groups/g", "not mirrored")
        last = client.delete("/tidemq/topics/a").revision
        assert mirror.wait_for_revision(last, 10)
        assert sorted(mirror.snapshot()) == ["/tidemq/topics/b"]
    assert seen[1:] == [("put", "/tidemq/topics/b", None), ("put", "/tidemq/topics/b", "b1"),
                        ("delete", "/tidemq/topics/a", '{"name":"a","queues":4,"perm":6,'
                                                       '"order":false}')]


def test_mirror_reconciles_when_its_watch_start_was_compacted(config_center, etcd_server):
    with ConfigClient(config_center.addr) as client:
        for name in "abc":
            client.put(f"/m/{name}", "1")
        seen, on_put, on_delete = _recorder()
        mirror = PrefixMirror(client, "/m/", on_put=on_put, on_delete=on_delete)
        mirror.sync()  # listed, not yet following
        client.delete("/m/a")
        client.put("/m/b", "2")
        for i in range(10):
            client.put("/m/d", str(i))  # pushes the mirror's resume point out of the log
        last = client.put("/other", "x").revision
        etcd_server.compact(last - 2)  # the mirror's resume point is gone from etcd's history
        with mirror:
            assert mirror.wait_for_revision(last, 10)
            assert {k: kv.text for k, kv in mirror.snapshot().items()} == {
                "/m/b": "2", "/m/c": "1", "/m/d": "9"}
    assert sorted(seen[3:]) == [("delete", "/m/a", "1"), ("put", "/m/b", "1"),
                                ("put", "/m/d", None)]
