"""AuthGuard: authenticate a call's signature, then authorize what it needs against the ACL.

Transport-free: the call pipeline (tidemq.common.pipeline) and the HTTP gateway's
hook hand it the two credential values, the peer address and the permissions, and map its
errors.Unauthenticated / errors.PermissionDenied to a status. Failures are counted in
`tidemq_<service>_auth_failures_total{reason}` and logged with the access key only.

The process's own credentials (`access_key`/`secret_key` settings) are always accepted as a
super user: services reach each other, and the config center they read the ACL from, before
any user exists (RocketMQ's inner-client credentials).
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Protocol

import prometheus_client
from tidemq.common import errors
from tidemq.common.auth import bearer, signature
from tidemq.common.auth.acl import AclTable, Permission, User
from tidemq.common.logs import get_logger

log = get_logger(__name__)
DEFAULT_SKEW_S = 900.0  # RocketMQ's proxy allows 15 minutes

_failure_counters: dict[str, prometheus_client.Counter] = {}


def failure_counter(service: str) -> prometheus_client.Counter:
    metric = f"tidemq_{service.replace('-', '_')}_auth_failures_total"
    counter = _failure_counters.get(metric)
    if counter is None:
        counter = prometheus_client.Counter(
            metric[: -len("_total")], "Requests refused: failed authentication (reason) or "
            "authorization (reason=denied)", ["reason"])
        _failure_counters[metric] = counter
    return counter


class AclSource(Protocol):
    table: AclTable


class StaticAcl:
    def __init__(self, table: AclTable | None = None) -> None:
        self.table = table or AclTable()


def peer_ip(peer: str) -> str:
    """The IP of a gRPC peer string (`ipv4:1.2.3.4:5`, `ipv6:[::1]:5`) or a bare address."""
    kind, sep, rest = peer.partition(":")
    if not sep or kind not in ("ipv4", "ipv6"):
        return peer
    host = rest.rsplit(":", 1)[0]
    return host.strip("[]")


class AuthGuard:
    def __init__(self, service: str, acl: AclSource, *, skew_s: float = DEFAULT_SKEW_S,
                 trusted: signature.Credentials | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.acl = acl
        self.skew_s = skew_s
        self._trusted = trusted if trusted else None
        self._clock = clock
        self._failures = failure_counter(service)

    def authenticate(self, authorization: str | None, date_time: str | None) -> User:
        """The user who signed the request; raises errors.Unauthenticated."""
        try:
            claim = signature.parse(authorization, date_time)
            user = self._user(claim.access_key)
            if user is None:
                raise signature.SignatureError(
                    "unknown_key", f"access key {claim.access_key!r} is not a known user")
            signature.verify(claim, user.secret_key, self._clock(), self.skew_s)
        except signature.SignatureError as exc:
            self._failures.labels(reason=exc.reason).inc()
            log.warning("authentication failed", reason=exc.reason, detail=str(exc))
            raise errors.Unauthenticated(str(exc)) from None
        return user

    def authenticate_bearer(self, token: str) -> User:
        """The user a bearer token (tidemq.common.auth.bearer) names; errors.Unauthenticated."""
        try:
            access_key, _, _ = bearer.parse_token(token)
            user = self._user(access_key)
            if user is None:
                raise signature.SignatureError(
                    "unknown_key", f"access key {access_key!r} is not a known user")
            bearer.verify_token(token, user.secret_key, self._clock().timestamp())
        except signature.SignatureError as exc:
            self._failures.labels(reason=exc.reason).inc()
            log.warning("authentication failed", reason=exc.reason, detail=str(exc))
            raise errors.Unauthenticated(str(exc)) from None
        return user

    def authenticate_header(self, authorization: str, date_time: str | None, *,
                            basic: bool = False) -> User:
        """The user of an HTTP `Authorization` value: `Bearer <tmq1 token>`, RocketMQ's
        signature (with the `x-mq-date-time` value), or with `basic` `Basic <base64 of
        access_key:secret_key>` (pages a browser opens itself); errors.Unauthenticated."""
        scheme = authorization[:7].lower()
        if scheme == "bearer ":
            return self.authenticate_bearer(authorization[7:])
        if basic and scheme.startswith("basic "):
            return self.authenticate_secret(*_basic_pair(authorization[6:]))
        return self.authenticate(authorization or None, date_time)

    def authenticate_secret(self, access_key: str, secret_key: str) -> User:
        """The user whose access key and secret these are (HTTP Basic, for pages a browser
        opens itself: sent on every request, so only over TLS); errors.Unauthenticated."""
        user = self._user(access_key)
        if user is None or not hmac.compare_digest(user.secret_key.encode(),
                                                   secret_key.encode()):
            reason = "unknown_key" if user is None else "bad_secret"
            self._failures.labels(reason=reason).inc()
            log.warning("authentication failed", reason=reason, access_key=access_key)
            raise errors.Unauthenticated(
                f"access key {access_key!r} is not a known user" if user is None
                else f"wrong secret key for access key {access_key!r}")
        return user

    def authorize(self, user: User, ip: str, needs: Iterable[Permission]) -> None:
        """Raise errors.PermissionDenied naming the first resource and action refused."""
        if user.admin:
            return
        verdict = self.acl.table.decide(user.access_key, ip, needs)
        if verdict.allowed:
            return
        self._failures.labels(reason="denied").inc()
        why = (f"rule {verdict.rule_id!r} denies it" if verdict.rule_id
               else "no rule allows it")
        log.warning("permission denied", access_key=user.access_key, ip=ip,
                    permission=str(verdict.permission), rule=verdict.rule_id)
        raise errors.PermissionDenied(
            f"user {user.access_key!r} may not {verdict.permission} from {ip}: {why}")

    def check(self, authorization: str | None, date_time: str | None, ip: str,
              needs: Iterable[Permission]) -> User:
        user = self.authenticate(authorization, date_time)
        self.authorize(user, ip, needs)
        return user

    def user(self, access_key: str) -> User | None:
        """The user of an access key (the process's own as an admin), None if unknown: for a
        protocol that verifies the secret itself (SASL/SCRAM in gateway-kafka)."""
        return self._user(access_key)

    def count_failure(self, reason: str) -> None:
        """Count a refusal decided outside this class (a SCRAM proof that does not verify)."""
        self._failures.labels(reason=reason).inc()

    def _user(self, access_key: str) -> User | None:
        if self._trusted is not None and access_key == self._trusted.access_key:
            return User(self._trusted.access_key, self._trusted.secret_key, admin=True)
        return self.acl.table.users.get(access_key)


def _basic_pair(encoded: str) -> tuple[str, str]:
    try:
        access_key, sep, secret_key = base64.b64decode(encoded.strip(), validate=True) \
            .decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        sep = ""
    if not sep:
        raise errors.Unauthenticated("Basic credentials must be base64 of access_key:secret_key")
    return access_key, secret_key
