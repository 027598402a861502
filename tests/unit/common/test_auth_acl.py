"""ACL evaluation: default deny, deny beats allow, prefixes and IP ranges (properties), the
method → permission map, and the JSON the config center holds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.common.auth.acl import (
    RULES_PREFIX,
    USERS_PREFIX,
    AclError,
    AclTable,
    Action,
    Permission,
    Rule,
    User,
)
from tidemq.common.auth.permissions import required_permissions
from tidemq.v1 import broker_pb2

names = st.text(alphabet="abcdefgh-_", min_size=1, max_size=8)
actions = st.sampled_from(list(Action))
ips = st.tuples(*[st.integers(0, 255)] * 4).map(lambda p: ".".join(map(str, p)))
rules = st.builds(
    lambda i, user, kind, name, prefix, acts, deny, cidr: Rule.create(
        f"r{i}", user, f"{kind}:{name}*" if prefix else f"{kind}:{name or '*'}", acts,
        "deny" if deny else "allow", [cidr] if cidr else []),
    st.integers(0, 10**6), st.sampled_from(["alice", "bob", "*"]),
    st.sampled_from(["topic", "group"]), names | st.just(""), st.booleans(),
    st.sets(actions, min_size=1), st.booleans(),
    st.none() | st.sampled_from(["10.0.0.0/8", "127.0.0.1/32", "0.0.0.0/0"]))
permissions = st.builds(Permission, st.sampled_from(["topic", "group"]), names, actions)


def table(*rule_list: Rule) -> AclTable:
    return AclTable({"alice": User("alice", "s"), "root": User("root", "s", admin=True)},
                    tuple(rule_list))


@given(st.lists(rules, max_size=6), permissions, ips)
def test_decision_is_deny_unless_some_rule_allows_and_none_denies(rule_list, need, ip):
    matching = [r for r in rule_list if r.covers("alice", need, ip)]
    verdict = table(*rule_list).decide("alice", ip, [need])
    expected = bool(matching) and all(r.decision == "allow" for r in matching)
    assert verdict.allowed is expected
    if not verdict.allowed:
        assert verdict.permission == need


@given(st.lists(rules, max_size=6), st.lists(permissions, max_size=4), ips)
def test_admin_users_may_do_anything(rule_list, needs, ip):
    assert table(*rule_list).decide("root", ip, needs).allowed


@given(st.lists(rules, max_size=6), st.lists(permissions, min_size=1, max_size=4), ips)
def test_all_needs_must_be_allowed(rule_list, needs, ip):
    acl = table(*rule_list)
    together = acl.decide("alice", ip, needs).allowed
    assert together == all(acl.decide("alice", ip, [n]).allowed for n in needs)


@given(st.lists(rules, max_size=6), permissions, ips)
def test_adding_a_deny_never_grants(rule_list, need, ip):
    deny = Rule.create("deny-all", "*", f"{need.kind}:*", list(Action), "deny")
    assert not table(*rule_list, deny).decide("alice", ip, [need]).allowed


@given(rules)
def test_rule_json_round_trips(rule):
    assert Rule.from_json(rule.to_json()) == rule


def test_prefix_exact_and_ip_matching():
    allow = Rule.create("r1", "alice", "topic:orders-*", ["PUB"], source_ips=["10.0.0.0/8"])
    acl = table(allow)
    assert acl.decide("alice", "10.1.1.1", [Permission("topic", "orders-eu", Action.PUB)]).allowed
    assert not acl.decide("alice", "10.1.1.1", [Permission("topic", "order", Action.PUB)]).allowed
    assert not acl.decide("alice", "192.168.0.1",
                          [Permission("topic", "orders-eu", Action.PUB)]).allowed
    assert not acl.decide("alice", "10.1.1.1",
                          [Permission("topic", "orders-eu", Action.SUB)]).allowed
    assert not acl.decide("bob", "10.1.1.1", [Permission("topic", "orders-eu", Action.PUB)]).allowed


@pytest.mark.parametrize("doc", ['{"id":"x"}', '{"id":"x","user":"a","resource":"queue:q",'
                                 '"actions":["PUB"]}', '{"id":"x","user":"a","resource":'
                                 '"topic:t","actions":["FLY"]}', '{"id":"x","user":"a",'
                                 '"resource":"topic:t","actions":["PUB"],"source_ips":["nope"]}'])
def test_bad_rules_are_refused(doc):
    with pytest.raises(AclError):
        Rule.from_json(doc)


def test_a_bad_entry_is_skipped_not_fatal():
    acl, problems = AclTable.from_entries({
        USERS_PREFIX + "alice": User("alice", "s").to_json().encode(),
        USERS_PREFIX + "bad": b"{",
        RULES_PREFIX + "r1": Rule.create("r1", "alice", "topic:t", ["PUB"]).to_json().encode(),
    })
    assert set(acl.users) == {"alice"} and len(acl.rules) == 1 and len(problems) == 1


def test_rpc_permissions():
    send = broker_pb2.SendRequest(topic="orders")
    assert required_permissions("/tidemq.v1.BrokerService/Send", send) == [
        Permission("topic", "orders", Action.PUB)]
    pull = broker_pb2.PullRequest(consumer_group="g1", topic="orders")
    assert required_permissions("/tidemq.v1.BrokerService/Pull", pull) == [
        Permission("group", "g1", Action.SUB), Permission("topic", "orders", Action.SUB)]
    assert required_permissions("/tidemq.v1.NameServerService/GetRouteInfo", None) == []
    assert required_permissions("/tidemq.v1.ConfigService/DescribeStore", None) == []
    assert required_permissions("/tidemq.v1.NameServerService/RegisterBroker", None) == [
        Permission("cluster", "RegisterBroker", Action.ADMIN)]
    # RocketMQ 5 MessagingService requests (shape as apache.rocketmq.v2)
    rmq = SimpleNamespace(messages=[SimpleNamespace(topic=SimpleNamespace(name="t1"))])
    assert required_permissions("/apache.rocketmq.v2.MessagingService/SendMessage", rmq) == [
        Permission("topic", "t1", Action.PUB)]
    receive = SimpleNamespace(group=SimpleNamespace(name="g"), message_queue=SimpleNamespace(
        topic=SimpleNamespace(name="t1")))
    assert required_permissions("/apache.rocketmq.v2.MessagingService/ReceiveMessage",
                                receive) == [Permission("group", "g", Action.SUB),
                                             Permission("topic", "t1", Action.SUB)]


def test_config_reads_of_acl_keys_need_admin():
    from tidemq.v1 import config_pb2
    acl_read = required_permissions("/tidemq.v1.ConfigService/Range",
                                    config_pb2.RangeRequest(prefix="/tidemq/"))
    assert acl_read and acl_read[0].action == Action.ADMIN
    assert required_permissions("/tidemq.v1.ConfigService/Range",
                                config_pb2.RangeRequest(prefix="/tidemq/topics/")) == []
