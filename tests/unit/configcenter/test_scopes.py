"""Scope resolution: the most specific scope wins, and the source is reported."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument
from tidemq.configcenter.model import KeyValue
from tidemq.configcenter.scopes import resolve, scope_prefixes


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key, value.encode(), 1, 1, 1)


def test_most_specific_scope_wins():
    layers = scope_prefixes("c1", "g1", "b1")
    assert [prefix for _, prefix in layers] == [
        "/tidemq/config/cluster/c1/", "/tidemq/config/group/g1/", "/tidemq/config/broker/b1/"]
    kvs = {
        "cluster": [_kv("/tidemq/config/cluster/c1/disk_max_used_ratio", "0.75"),
                    _kv("/tidemq/config/cluster/c1/retention_h", "72")],
        "broker_group": [_kv("/tidemq/config/group/g1/disk_max_used_ratio", "0.9")],
        "broker": [_kv("/tidemq/config/broker/b1/retention_h", "24")],
    }
    settings = resolve([(scope, prefix, kvs[scope]) for scope, prefix in layers])
    assert [(s.name, s.value, s.scope, s.source_key) for s in settings] == [
        ("disk_max_used_ratio", "0.9", "broker_group",
         "/tidemq/config/group/g1/disk_max_used_ratio"),
        ("retention_h", "24", "broker", "/tidemq/config/broker/b1/retention_h"),
    ]


def test_unnamed_scopes_are_skipped_and_at_least_one_is_needed():
    assert [scope for scope, _ in scope_prefixes("c1", "", "b1")] == ["cluster", "broker"]
    with pytest.raises(InvalidArgument, match="at least one"):
        scope_prefixes("", "", "")
    with pytest.raises(InvalidArgument, match="must not contain"):
        scope_prefixes("a/b", "", "")
