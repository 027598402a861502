"""RocketMQ 5 request signatures: ours match the official client's byte for byte, and the
guard refuses each kind of bad credential with UNAUTHENTICATED and a counted reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from rocketmq.v5.util.signature import Signature  # the official client's signing code
from tidemq.common import errors
from tidemq.common.auth import signature
from tidemq.common.auth.acl import AclTable, User
from tidemq.common.auth.guard import AuthGuard, StaticAcl, peer_ip

NOW = datetime(2026, 11, 24, 1, 0, 0, tzinfo=UTC)
ALICE = User("alice", "alice-secret")


def official_metadata(access_key: str, secret_key: str) -> dict[str, str]:
    config = SimpleNamespace(credentials=SimpleNamespace(ak=access_key, sk=secret_key),
                             namespace="")
    return dict(Signature.metadata(config, "client-1"))


def guard(clock: datetime = NOW, skew_s: float = 900) -> AuthGuard:
    return AuthGuard("unit-test", StaticAcl(AclTable({"alice": ALICE})), skew_s=skew_s,
                     clock=lambda: clock)


def failures(reason: str) -> float:
    return REGISTRY.get_sample_value("tidemq_unit_test_auth_failures_total",
                                     {"reason": reason}) or 0.0


@given(st.text(min_size=1, max_size=40), st.datetimes(min_value=datetime(2000, 1, 1),
                                                      max_value=datetime(2099, 1, 1)))
def test_our_signature_is_the_official_clients(secret: str, moment: datetime) -> None:
    date_time = moment.strftime(signature.DATE_TIME_FORMAT)
    assert signature.sign(secret, date_time) == Signature.sign(secret, date_time)


def test_official_client_metadata_authenticates() -> None:
    metadata = official_metadata("alice", "alice-secret")
    # the official client stamps local time with a 'Z'; the check uses its own claim's time
    signed_at = signature.parse_date_time(metadata["x-mq-date-time"])
    user = guard(clock=signed_at).authenticate(metadata["authorization"],
                                               metadata["x-mq-date-time"])
    assert user.access_key == "alice"


def test_our_metadata_has_the_official_shape() -> None:
    ours = dict(signature.signed_metadata(signature.Credentials("alice", "alice-secret"), NOW))
    theirs = official_metadata("alice", "alice-secret")
    assert ours["authorization"].split("Signature=")[0] == \
        theirs["authorization"].split("Signature=")[0]
    assert ours["x-mq-date-time"] == "20261124T010000Z"


@pytest.mark.parametrize(("metadata", "reason", "sentence"), [
    ({}, "missing", "no credentials"),
    ({"authorization": "Basic abc", "x-mq-date-time": "20261124T010000Z"}, "malformed",
     "unsupported authorization scheme"),
    (dict(signature.signed_metadata(signature.Credentials("mallory", "x"), NOW)),
     "unknown_key", "'mallory' is not a known user"),
    (dict(signature.signed_metadata(signature.Credentials("alice", "wrong"), NOW)),
     "bad_signature", "does not match"),
    (dict(signature.signed_metadata(signature.Credentials("alice", "alice-secret"),
                                    NOW - timedelta(minutes=16))), "expired",
     "allowed skew 900 s"),
    (dict(signature.signed_metadata(signature.Credentials("alice", "alice-secret"),
                                    NOW + timedelta(minutes=16))), "expired", "server's clock"),
])
def test_bad_credentials_are_refused_and_counted(metadata: dict, reason: str,
                                                 sentence: str) -> None:
    before = failures(reason)
    with pytest.raises(errors.Unauthenticated, match=sentence) as caught:
        guard().authenticate(metadata.get("authorization"), metadata.get("x-mq-date-time"))
    assert caught.value.code == "UNAUTHENTICATED"
    assert "alice-secret" not in str(caught.value)
    assert failures(reason) == before + 1


def test_within_skew_is_accepted() -> None:
    metadata = dict(signature.signed_metadata(signature.Credentials("alice", "alice-secret"),
                                              NOW - timedelta(minutes=14)))
    assert guard().authenticate(metadata["authorization"], metadata["x-mq-date-time"]) == ALICE


def test_trusted_process_credentials_are_a_super_user() -> None:
    own = signature.Credentials("svc", "svc-secret")
    g = AuthGuard("unit-test", StaticAcl(), trusted=own, clock=lambda: NOW)
    metadata = dict(signature.signed_metadata(own, NOW))
    assert g.authenticate(metadata["authorization"], metadata["x-mq-date-time"]).admin


def test_credentials_never_print_the_secret() -> None:
    assert "s3cr3t" not in repr(signature.Credentials("ak", "s3cr3t"))
    assert "s3cr3t" not in repr(User("ak", "s3cr3t"))


@pytest.mark.parametrize(("peer", "ip"), [("ipv4:10.1.2.3:5555", "10.1.2.3"),
                                          ("ipv6:[::1]:5555", "::1"), ("10.0.0.1", "10.0.0.1")])
def test_peer_ip(peer: str, ip: str) -> None:
    assert peer_ip(peer) == ip


def test_bearer_tokens_verify_expire_and_resist_tampering() -> None:
    from tidemq.common.auth.bearer import make_token

    g = guard()
    alice = signature.Credentials("alice", "alice-secret")
    assert g.authenticate_bearer(make_token(alice, 60, now=NOW.timestamp())) == ALICE
    with pytest.raises(errors.Unauthenticated, match="expired"):
        g.authenticate_bearer(make_token(alice, 60, now=NOW.timestamp() - 120))
    forged = make_token(signature.Credentials("alice", "guess"), 60, now=NOW.timestamp())
    with pytest.raises(errors.Unauthenticated, match="does not match"):
        g.authenticate_bearer(forged)
    stretched = make_token(alice, 60, now=NOW.timestamp()).split(".")
    stretched[2] = str(int(stretched[2]) + 10**6)  # a later expiry, same signature
    with pytest.raises(errors.Unauthenticated, match="does not match"):
        g.authenticate_bearer(".".join(stretched))
    with pytest.raises(errors.Unauthenticated, match="not tmq1"):
        g.authenticate_bearer("abc")
