"""The controller's view of /tidemq/replication/: keys parsed as the contract shapes them, and
a bad value written by a broker ignored (logged) rather than stopping the controller."""

from __future__ import annotations

import json

from tidemq.common.kv import KeyValue
from tidemq.configclient.replication import group_key, live_key
from tidemq.nameserver.controller.state import GroupState
from tidemq.nameserver.controller.store import LiveReplica, ReplicationView, settings_key


def kv(key: str, value, revision: int) -> KeyValue:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return KeyValue(key, raw, revision, revision, 1)


def test_live_group_and_settings_keys_fold_into_the_view():
    view = ReplicationView()
    live = {"addr": "h:1", "ha_addr": "h:2", "epoch": 3, "log_end": 4096}
    assert view.apply(kv(live_key("broker-a", 2), live, 5), deleted=False) == "broker-a"
    assert view.live["broker-a"][2] == LiveReplica("broker-a", 2, "h:1", "h:2", 3, 4096)
    assert view.log_ends("broker-a") == {2: 4096}

    state = GroupState(2, 3, frozenset({2}), "h:1", "h:2")
    view.apply(kv(group_key("broker-a"), state.to_json(), 6), deleted=False)
    assert view.groups["broker-a"].state == state and view.groups["broker-a"].mod_revision == 6
    view.apply(kv(group_key("broker-a"), GroupState(0, 1, frozenset({0})).to_json(), 4),
               deleted=False)  # an older revision never overwrites a newer one
    assert view.groups["broker-a"].state == state

    view.apply(kv(settings_key("broker-a"), {"unclean_election": True}, 7), deleted=False)
    assert view.unclean == {"broker-a": True}
    view.apply(kv(settings_key("broker-a"), b"", 8), deleted=True)
    assert view.unclean == {}

    view.apply(kv(live_key("broker-a", 2), b"", 9), deleted=True)
    assert "broker-a" not in view.live and view.names() == {"broker-a"}
    assert view.revision == 9


def test_unreadable_keys_are_ignored():
    view = ReplicationView()
    assert view.apply(kv(live_key("broker-a", 0), b"{not json", 1), deleted=False) is None
    assert view.apply(kv("/tidemq/replication/live/broker-a/x", {}, 2), deleted=False) is None
    assert view.apply(kv(group_key("broker-b"), {"epoch": 1}, 3), deleted=False) is None
    assert view.apply(kv("/tidemq/replication/other", {}, 4), deleted=False) is None
    assert not view.live and not view.groups and view.revision == 4
