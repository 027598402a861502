"""A gateway's calls on behalf of its clients (docs/quotas.md, "Clients of a gateway"): what
the call metadata carries, and whom the call pipeline charges — the end client only when the
caller is signed and granted `cluster:forward-identity`, never an ordinary client's claim."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tidemq.common import errors
from tidemq.common.auth import signature
from tidemq.common.auth.acl import AclTable, Rule, User
from tidemq.common.auth.guard import AuthGuard, StaticAcl
from tidemq.common.pipeline import CallPipeline
from tidemq.common.quotas import (
    CALLER,
    CLIENT_ID_METADATA,
    END_CLIENT,
    ON_BEHALF_OF_METADATA,
    Caller,
    end_user_of,
    metadata_client_id,
    on_behalf_of,
)
from tidemq.v1 import broker_pb2

USERS = {"alice": User("alice", "alice-secret"), "gw": User("gw", "gw-secret", admin=True),
         "relay": User("relay", "relay-secret")}
RULES = (Rule.create("alice-orders", "alice", "topic:orders", ["PUB"]),
         Rule.create("relay-orders", "relay", "topic:orders", ["PUB"]),
         Rule.create("relay-forwards", "relay", "cluster:forward-identity", ["ADMIN"]))
SEND = broker_pb2.SendRequest(topic="orders", queue_id=0)
CONTEXT = SimpleNamespace(peer=lambda: "ipv4:127.0.0.1:5000")


def admitted(metadata, *, auth: bool = True) -> Caller:
    guard = AuthGuard("unit-test", StaticAcl(AclTable(USERS, RULES))) if auth else None
    CallPipeline(guard).admit("/tidemq.v1.BrokerService/Send", metadata, CONTEXT, SEND)
    return CALLER.get()


def signed(user: str, **extra: str) -> list[tuple[str, str]]:
    return [*signature.signed_metadata(signature.Credentials(user, f"{user}-secret")),
            *extra.items()]


def forwarded(client_id: str, user: str = "") -> list[tuple[str, str]]:
    with on_behalf_of(client_id, user) as end:
        return list(end.metadata.items())


def test_a_gateway_call_is_charged_to_the_end_client_it_names():
    assert admitted(signed("gw") + forwarded("kafka-app", "carol")) == Caller("carol",
                                                                              "kafka-app")
    assert admitted(signed("gw") + forwarded("kafka-app")) == Caller("", "kafka-app")
    # a user granted the one permission may forward too, without being an admin
    assert admitted(signed("relay") + forwarded("x", "carol")) == Caller("carol", "x")
    assert admitted(signed("gw", **{CLIENT_ID_METADATA: "own"})) == Caller("gw", "own")


def test_an_ordinary_client_cannot_charge_its_calls_to_another_user():
    with pytest.raises(errors.PermissionDenied) as refused:
        admitted(signed("alice") + forwarded("free-app", "bob"))
    assert "user 'alice' may not ADMIN on cluster 'forward-identity'" in refused.value.message
    assert ON_BEHALF_OF_METADATA in refused.value.message
    with pytest.raises(errors.PermissionDenied):   # nor drop its user as "anonymous"
        admitted(signed("alice") + forwarded("free-app"))
    # its own client id is its to choose, as in Kafka: its user's quota still applies first
    assert admitted(signed("alice", **{CLIENT_ID_METADATA: "free-app"})) == \
        Caller("alice", "free-app")


def test_unsigned_calls_name_no_user_whatever_they_claim():
    assert admitted(forwarded("x", "bob"), auth=False) == Caller("", "x")


def test_a_malformed_claim_is_refused_with_a_sentence():
    with pytest.raises(errors.InvalidArgument, match="user:<access key>"):
        admitted(signed("gw", **{ON_BEHALF_OF_METADATA: "bob"}))
    assert end_user_of("user:bob") == "bob" and end_user_of("anonymous") == ""
    for bad in ("user:", "client:x", ""):
        with pytest.raises(ValueError, match=ON_BEHALF_OF_METADATA):
            end_user_of(bad)


def test_any_kafka_client_id_becomes_metadata_a_call_can_carry():
    assert metadata_client_id("orders-svc") == "orders-svc"
    assert metadata_client_id("café 100%") == "caf%C3%A9 100%25"
    assert len(metadata_client_id("x" * 40_000)) == 255
    encoded = metadata_client_id("\u2603\n" * 300)
    assert encoded.isascii() and encoded.isprintable() and len(encoded) == 255


def test_the_end_client_is_seen_in_copied_contexts_and_gathers_the_longest_throttle():
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    with on_behalf_of("app", "carol") as end, ThreadPoolExecutor(4) as pool:
        def throttled(ms: int) -> str:
            END_CLIENT.get().note_throttle(ms)
            return END_CLIENT.get().client_id
        ran = [pool.submit(contextvars.copy_context().run, throttled, ms) for ms in (5, 70, 9)]
        assert [f.result() for f in ran] == ["app"] * 3
    assert end.throttle_ms == 70 and END_CLIENT.get() is None
