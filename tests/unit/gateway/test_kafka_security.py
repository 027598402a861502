"""gateway-kafka's SASL server (security.py) driven by scramp's SCRAM client, and the live
set's deterministic spread (nodes.py): no sockets, the real ACL guard."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from scramp import ScramClient
from tidemq.common.auth.acl import AclTable, Rule, User
from tidemq.common.auth.guard import AuthGuard, StaticAcl
from tidemq.gatewaykafka import codec
from tidemq.gatewaykafka.handlers import Connection
from tidemq.gatewaykafka.nodes import GatewayNodes, Node
from tidemq.gatewaykafka.security import KafkaSecurity

ALICE = User("alice", "alice-secret")


def _security(users=(ALICE,), rules=()) -> tuple[KafkaSecurity, StaticAcl]:
    acl = StaticAcl(AclTable({u.access_key: u for u in users}, tuple(rules)))
    return KafkaSecurity(AuthGuard("gateway-kafka-test", acl)), acl


def _step(security: KafkaSecurity, conn: Connection, token: bytes) -> dict:
    request = SimpleNamespace(auth_bytes=token)
    return asyncio.run(security.sasl_authenticate(request, 2, conn))


def _handshake(security: KafkaSecurity, conn: Connection, mechanism: str) -> dict:
    return asyncio.run(security.sasl_handshake(SimpleNamespace(mechanism=mechanism), 1, conn))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("password,ok", [("alice-secret", True), ("guessed", False)])
def test_scram_exchange(mechanism, password, ok):
    security, _ = _security()
    conn = Connection(peer_host="127.0.0.1")
    assert _handshake(security, conn, mechanism)["error_code"] == 0
    client = ScramClient([mechanism], "alice", password)
    first = _step(security, conn, client.get_client_first().encode())
    assert first["error_code"] == 0
    client.set_server_first(first["auth_bytes"].decode())
    final = _step(security, conn, client.get_client_final().encode())
    if ok:
        assert final["error_code"] == 0
        client.set_server_final(final["auth_bytes"].decode())   # the server proved itself too
        assert conn.sasl.user == ALICE and security.admits(0, conn)
    else:
        assert final["error_code"] == codec.ERRORS["SASL_AUTHENTICATION_FAILED"]
        assert "wrong secret key for access key 'alice'" in final["error_message"]
        assert conn.close_after and conn.sasl.user is None and not security.admits(0, conn)


def test_scram_verifiers_are_salted_per_user_and_follow_a_changed_secret():
    security, _ = _security()
    first = security.verifiers.get("SCRAM-SHA-256", ALICE)
    assert security.verifiers.get("SCRAM-SHA-256", ALICE) == first   # cached
    changed = security.verifiers.get("SCRAM-SHA-256", User("alice", "new-secret"))
    assert changed[0] != first[0] and changed[1:3] != first[1:3]
    assert ALICE.secret_key.encode() not in repr(first).encode()


def test_unknown_user_and_bad_plain_tokens_are_refused():
    security, _ = _security()
    for token in (b"\x00bob\x00x", b"no-separators", b"carol\x00alice\x00alice-secret"):
        conn = Connection(peer_host="127.0.0.1")
        _handshake(security, conn, "PLAIN")
        answer = _step(security, conn, token)
        assert answer["error_code"] == codec.ERRORS["SASL_AUTHENTICATION_FAILED"], token
    conn = Connection(peer_host="127.0.0.1")
    _handshake(security, conn, "PLAIN")
    assert _step(security, conn, b"alice\x00alice\x00alice-secret")["error_code"] == 0


def test_unknown_mechanism_and_sasl_before_handshake():
    security, _ = _security()
    conn = Connection(peer_host="127.0.0.1")
    answer = _handshake(security, conn, "GSSAPI")
    assert answer["error_code"] == codec.ERRORS["UNSUPPORTED_SASL_MECHANISM"]
    assert answer["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    answer = _step(security, Connection(peer_host="127.0.0.1"), b"\x00alice\x00alice-secret")
    assert answer["error_code"] == codec.ERRORS["ILLEGAL_SASL_STATE"]


def test_only_apiversions_and_sasl_before_authentication():
    security, _ = _security()
    conn = Connection(peer_host="127.0.0.1")
    assert [k for k in (0, 1, 3, 17, 18, 36) if security.admits(k, conn)] == [17, 18, 36]
    assert KafkaSecurity(None).admits(0, conn)   # PLAINTEXT: no SASL asked


def test_group_refusal_names_group_authorization_failed():
    security, acl = _security(rules=[Rule.create("a", "alice", "group:allowed", ["SUB"])])
    conn = Connection(peer_host="127.0.0.1")
    conn.sasl.user = ALICE
    served = []

    async def handler(request, version, conn):
        served.append(request.group_id)
        return {"throttle_time_ms": 0, "error_code": 0}

    for group in ("allowed", "other"):
        answer = asyncio.run(security.call(12, SimpleNamespace(group_id=group), 0, conn,
                                           handler))
        assert answer["error_code"] == (0 if group == "allowed" else
                                        codec.ERRORS["GROUP_AUTHORIZATION_FAILED"])
    assert served == ["allowed"]


def test_leaders_and_coordinators_spread_deterministically():
    nodes = [Node(n, "127.0.0.1", 9000 + n) for n in (7, 3, 11)]
    views = []
    for me in nodes:
        view = GatewayNodes.single(me)
        view._live = tuple(sorted(nodes))
        views.append(view)
    leaders = [[v.leader("orders", i).node_id for i in range(6)] for v in views]
    assert leaders[0] == leaders[1] == leaders[2]
    assert set(leaders[0]) == {3, 7, 11}      # six partitions go round three instances
    assert len({v.coordinator("billing").node_id for v in views}) == 1


def test_metadata_creates_topics_only_for_a_user_with_admin_on_them():
    security, _ = _security(users=(ALICE, User("root", "root-secret", admin=True)),
                            rules=[Rule.create("a", "alice", "topic:alice-*", ["ADMIN"])])
    seen = []

    async def handler(request, version, conn):
        seen.append(request.allow_auto_topic_creation)
        return {}

    for user, topic in ((ALICE, "alice-new"), (ALICE, "other"), (User("root", "x", True), "any")):
        conn = Connection(peer_host="127.0.0.1")
        conn.sasl.user = user
        request = SimpleNamespace(allow_auto_topic_creation=True,
                                  topics=[SimpleNamespace(name=topic)])
        asyncio.run(security.call(3, request, 8, conn, handler))
    assert seen == [True, False, True]


def test_a_listener_without_sasl_under_auth_is_anonymous_to_the_acl():
    acl = StaticAcl(AclTable({ALICE.access_key: ALICE}, (
        Rule.create("anon", "ANONYMOUS", "topic:public", ["PUB"]),)))
    security = KafkaSecurity(AuthGuard("gateway-kafka-test", acl), sasl=False)
    conn = Connection(peer_host="127.0.0.1")
    security.accepted(conn)
    assert conn.sasl.user.access_key == "ANONYMOUS" and security.admits(0, conn)
    assert _handshake(security, conn, "PLAIN")["error_code"] == codec.ERRORS["ILLEGAL_SASL_STATE"]
    served = []

    async def handler(request, version, conn):
        served.append([t.name for t in request.topic_data])
        return {"throttle_time_ms": 0, "responses": []}

    request = SimpleNamespace(acks=-1, topic_data=[
        SimpleNamespace(name=name, partition_data=[SimpleNamespace(index=0)])
        for name in ("public", "private")])
    answer = asyncio.run(security.call(0, request, 9, conn, handler))
    assert served == [["public"]]
    (refused,) = answer["responses"]
    assert refused["name"] == "private"
    partition = refused["partition_responses"][0]
    assert partition["error_code"] == codec.ERRORS["TOPIC_AUTHORIZATION_FAILED"]
    assert "user 'ANONYMOUS' may not PUB on topic 'private'" in partition["error_message"]
