"""LiveSettings applies scoped changes without a restart and reports what changed."""

from __future__ import annotations

import queue

from tidemq.configclient.live import LiveSettings


def test_live_settings_follow_scoped_changes(client):
    client.put("/tidemq/config/cluster/c1/disk_max_used_ratio", "0.75")
    client.put("/tidemq/config/cluster/c1/retention_hours", "72")
    changes: queue.Queue = queue.Queue()
    with LiveSettings(client, cluster="c1", broker_group="g1", broker="b1",
                      on_change=changes.put) as live:
        assert live.get("disk_max_used_ratio") == "0.75"
        client.put("/tidemq/config/group/g1/disk_max_used_ratio", "0.9")
        [change] = changes.get(timeout=10)
        assert (change.name, change.old, change.new, change.source_key) == (
            "disk_max_used_ratio", "0.75", "0.9", "/tidemq/config/group/g1/disk_max_used_ratio")
        assert live.get("disk_max_used_ratio") == "0.9"
        client.put("/tidemq/config/broker/b2/retention_hours", "1")  # another broker: ignored
        client.delete("/tidemq/config/cluster/c1/retention_hours")
        [change] = changes.get(timeout=10)
        assert (change.name, change.old, change.new) == ("retention_hours", "72", None)
        assert live.get("retention_hours", "168") == "168"
