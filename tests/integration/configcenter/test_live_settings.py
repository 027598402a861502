"""LiveSettings applies scoped changes without a restart and reports what changed."""

from __future__ import annotations

import queue

from tidemq.client.config_dynamic import LiveSettings


def test_live_settings_follow_scoped_changes(client):
    client.put("/tidemq/config/cluster/c1/flush_policy", "async")
    client.put("/tidemq/config/cluster/c1/retention_hours", "72")
    changes: queue.Queue = queue.Queue()
    with LiveSettings(client, cluster="c1", broker_group="g1", broker="b1",
                      on_change=changes.put) as live:
        assert live.get("flush_policy") == "async"
        client.put("/tidemq/config/group/g1/flush_policy", "sync")
        [change] = changes.get(timeout=10)
        assert (change.name, change.old, change.new, change.source_key) == (
            "flush_policy", "async", "sync", "/tidemq/config/group/g1/flush_policy")
        assert live.get("flush_policy") == "sync"
        client.put("/tidemq/config/broker/b2/retention_hours", "1")  # another broker: ignored
        client.delete("/tidemq/config/cluster/c1/retention_hours")
        [change] = changes.get(timeout=10)
        assert (change.name, change.old, change.new) == ("retention_hours", "72", None)
        assert live.get("retention_hours", "168") == "168"
