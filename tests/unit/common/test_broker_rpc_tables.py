"""Every BrokerService RPC is in the tables a new RPC must join (docs/wire-protocol.md, "A new
broker RPC"): a permission entry (tidemq.common.auth.permissions), a row in the broker
channel's table (tidemq.common.channel.table), and, for a hot one, a wire number with the
RPC's own message types (tidemq.common.wire.methods). The RPCs are read from the generated
service descriptor, so a new `rpc` line in broker.proto fails here until it is mapped."""

from __future__ import annotations

import pytest
from tidemq.common.auth import permissions
from tidemq.common.channel import table
from tidemq.common.wire import methods
from tidemq.v1 import broker_pb2

SERVICE = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"]
PREFIX = "/tidemq.v1.BrokerService/"


def unlisted_permissions(rpcs) -> list[str]:
    listed = set(permissions.RULES) | permissions.AUTHENTICATED_ONLY | permissions.ADMIN_ONLY
    return [rpc.name for rpc in rpcs if PREFIX + rpc.name not in listed]


def channel_gaps(rpcs) -> list[str]:
    """RPCs without a channel row, and hot rows without a matching wire method."""
    gaps = []
    for rpc in rpcs:
        row = table.BROKER_CALLS.get(rpc.name)
        if row is None:
            gaps.append(f"{rpc.name}: no row in tidemq.common.channel.table")
            continue
        wired = methods.BROKER_METHODS.get(rpc.name)
        if row.hot and wired is None:
            gaps.append(f"{rpc.name}: hot, but no number in tidemq.common.wire.methods")
        elif wired is not None and (rpc.input_type, rpc.output_type) != (
                wired.request.DESCRIPTOR, wired.response.DESCRIPTOR):
            gaps.append(f"{rpc.name}: its wire entry names other message types")
        if row.bulk and rpc.input_type.fields_by_name.get(row.bulk) is None:
            gaps.append(f"{rpc.name}: bulk field {row.bulk!r} is not in its request")
    return gaps


def test_every_broker_rpc_has_a_permission_entry():
    unlisted = unlisted_permissions(SERVICE.methods)
    assert not unlisted, (f"{unlisted}: add to RULES, AUTHENTICATED_ONLY or ADMIN_ONLY in "
                          "tidemq/common/auth/permissions.py")


def test_every_broker_rpc_has_a_channel_row_and_every_hot_one_a_wire_number():
    gaps = channel_gaps(SERVICE.methods)
    assert not gaps, "\n".join(gaps)


def test_the_tables_name_only_real_rpcs():
    names = {rpc.name for rpc in SERVICE.methods}
    assert set(table.BROKER_CALLS) <= names
    assert set(methods.BROKER_METHODS) <= names
    assert len({m.number for m in methods.BROKER_METHODS.values()}) == len(methods.BROKER_METHODS)
    assert {name for name, row in table.BROKER_CALLS.items() if row.hot} == \
        set(methods.BROKER_METHODS)  # a wire number for a cold call would never be used


class NewRpc:
    """An RPC added to broker.proto and listed nowhere yet (as the descriptor would show it)."""

    def __init__(self, name: str, like: str) -> None:
        self.name = name
        existing = SERVICE.methods_by_name[like]
        self.input_type, self.output_type = existing.input_type, existing.output_type


@pytest.fixture
def a_new_hot_rpc(monkeypatch):
    """`PopBatch` given a channel row marked hot, and nothing else."""
    monkeypatch.setitem(table.BROKER_CALLS, "PopBatch", table.BrokerCall("PopBatch", hot=True))
    return [*SERVICE.methods, NewRpc("PopBatch", like="Pop")]


def test_an_unlisted_rpc_fails_both_checks(a_new_hot_rpc):
    assert unlisted_permissions(a_new_hot_rpc) == ["PopBatch"]
    assert channel_gaps(a_new_hot_rpc) == [
        "PopBatch: hot, but no number in tidemq.common.wire.methods"]
    assert channel_gaps([NewRpc("Unrowed", like="Ack")]) == [
        "Unrowed: no row in tidemq.common.channel.table"]


def test_an_rpc_in_every_table_passes(a_new_hot_rpc, monkeypatch):
    monkeypatch.setitem(methods.BROKER_METHODS, "PopBatch", methods.Method(
        99, "PopBatch", broker_pb2.PopRequest, broker_pb2.PopResponse))
    monkeypatch.setattr(permissions, "AUTHENTICATED_ONLY",
                        permissions.AUTHENTICATED_ONLY | {PREFIX + "PopBatch"})
    assert unlisted_permissions(a_new_hot_rpc) == []
    assert channel_gaps(a_new_hot_rpc) == []
