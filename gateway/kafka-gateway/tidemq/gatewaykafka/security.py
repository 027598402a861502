"""SASL authentication and TideMQ's ACLs on the Kafka listener (docs/kafka.md#security).

With `auth_enabled` a connection must authenticate before anything but ApiVersions,
SaslHandshake and SaslAuthenticate (any other request first closes it, as Kafka's broker
does). Mechanisms: PLAIN and SCRAM-SHA-256/512 (KIP-84), the user an ACL user's access key and
the password its secret key. The ACL store keeps the secret itself (RocketMQ's signatures need
it), so SCRAM's salted verifiers (salt, StoredKey, ServerKey; 4096 iterations) are derived
here from it, a random salt per user and process, cached until the secret changes; nothing
more is stored. SaslHandshake v1 with SaslAuthenticate only (no unframed v0 tokens).

Every request is then authorized against the ACL table the follower keeps current, so a
rule added or removed applies to open connections at their next request:

| Kafka API | needs |
|---|---|
| Produce | PUB on each topic |
| Fetch, ListOffsets | SUB on each topic |
| JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetFetch, DescribeGroups | SUB on the group |
| OffsetCommit | SUB on the group and on each topic |
| CreateTopics, DeleteTopics, CreatePartitions | ADMIN on each topic |
| IncrementalAlterConfigs | ADMIN on each topic resource; any other resource ADMIN on `cluster:kafka/IncrementalAlterConfigs` |
| ApiVersions, Metadata, FindCoordinator, InitProducerId, DescribeConfigs, ListGroups | an authenticated user |
| Metadata creating an unknown topic (`auto_create_topics`) | ADMIN on the topic |
| any other API | ADMIN on `cluster:kafka/<API name>` |

A refused topic answers TOPIC_AUTHORIZATION_FAILED for its partitions (or its resource) while the request's
other topics are served; a refused group answers GROUP_AUTHORIZATION_FAILED; another refusal
CLUSTER_AUTHORIZATION_FAILED. Each carries, where the response has a message field, the same
sentence as the other gateways (`user 'bob' may not PUB on topic 'orders' from 127.0.0.1: no
rule allows it`). Nothing of a refused topic reaches the brokers.

Each listener has its own security protocol (docs/kafka.md#listeners), so its own
KafkaSecurity: with `sasl` False under auth (a PLAINTEXT or SSL listener beside a SASL one) a
connection does not authenticate and is the user ANONYMOUS, as in Kafka: the ACL decides for
it like for any user (rules naming `ANONYMOUS`, or `*`), so with no such rule everything that
needs a permission is refused with the errors above. A SaslHandshake there answers
ILLEGAL_SASL_STATE, as Kafka's broker does on a listener without SASL.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scramp import ScramException, ScramMechanism
from tidemq.common import errors
from tidemq.common.auth.acl import Action, Permission, User
from tidemq.common.auth.guard import AuthGuard
from tidemq.common.logs import get_logger
from tidemq.gatewaykafka import codec

log = get_logger(__name__)

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
SCRAM_ITERATIONS = 4096   # Kafka's default (and its minimum)
PRE_AUTH_APIS = frozenset({18, 17, 36})   # ApiVersions, SaslHandshake, SaslAuthenticate
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
AUTHENTICATED_ONLY = frozenset({3, 10, 16, 18, 22, 32})
FAILED = "SASL_AUTHENTICATION_FAILED"
ANONYMOUS = User("ANONYMOUS", "")   # the user of a listener without SASL under auth (Kafka's)

Handler = Callable[[Any, int, Any], Awaitable[dict | None]]


@dataclass(slots=True)
class SaslState:
    mechanism: str = ""
    scram: Any = None          # the scramp server of a SCRAM exchange in progress
    candidate: User | None = None   # the user a SCRAM exchange names, until it is proven
    user: User | None = None   # once authenticated


class ScramVerifiers:
    """(salt, StoredKey, ServerKey, iterations) per user and mechanism, derived from the stored
    secret once (a random salt) and again only when the secret changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[bytes, tuple]] = {}

    def get(self, mechanism: str, user: User) -> tuple:
        digest = hashlib.sha256(user.secret_key.encode()).digest()
        key = (mechanism, user.access_key)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and secrets.compare_digest(cached[0], digest):
            return cached[1]
        info = ScramMechanism(mechanism).make_auth_info(
            user.secret_key, iteration_count=SCRAM_ITERATIONS, salt=secrets.token_bytes(16))
        with self._lock:
            self._cache[key] = (digest, info)
        return info


class KafkaSecurity:
    """SASL on a listener and the ACL check of every request; `guard` None: neither (the
    PLAINTEXT profile: every request is served as before); `sasl` False with a guard: no SASL,
    every connection is ANONYMOUS to the ACL."""

    def __init__(self, guard: AuthGuard | None, mechanisms: tuple[str, ...] = MECHANISMS, *,
                 sasl: bool = True) -> None:
        unknown = set(mechanisms) - set(MECHANISMS)
        if unknown:
            raise errors.InvalidArgument(f"SASL mechanisms {sorted(unknown)} are not served: "
                                         f"choose among {', '.join(MECHANISMS)}")
        self.guard = guard
        self.sasl = sasl and guard is not None
        self.mechanisms = tuple(mechanisms)
        self.verifiers = ScramVerifiers()

    @property
    def enabled(self) -> bool:
        return self.guard is not None

    def accepted(self, conn) -> None:
        """A new connection: on a listener without SASL under auth it is ANONYMOUS."""
        if self.guard is not None and not self.sasl:
            conn.sasl.user = ANONYMOUS

    def admits(self, api_key: int, conn) -> bool:
        """May this request be answered at all? (False: close the connection.)"""
        return (self.guard is None or conn.sasl.user is not None
                or api_key in PRE_AUTH_APIS)

    # -- SASL ----------------------------------------------------------------------------------

    async def sasl_handshake(self, request, version: int, conn) -> dict:
        if not self.sasl:
            return {"error_code": codec.ERRORS["ILLEGAL_SASL_STATE"], "mechanisms": []}
        if conn.sasl.user is not None or conn.sasl.mechanism:
            conn.close_after = True   # a second handshake: Kafka closes the connection too
            return {"error_code": codec.ERRORS["ILLEGAL_SASL_STATE"],
                    "mechanisms": list(self.mechanisms)}
        if request.mechanism not in self.mechanisms:
            return {"error_code": codec.ERRORS["UNSUPPORTED_SASL_MECHANISM"],
                    "mechanisms": list(self.mechanisms)}
        conn.sasl.mechanism = request.mechanism
        return {"error_code": 0, "mechanisms": list(self.mechanisms)}

    async def sasl_authenticate(self, request, version: int, conn) -> dict:
        answer = {"error_code": 0, "error_message": None, "auth_bytes": b"",
                  "session_lifetime_ms": 0}
        state = conn.sasl
        if not self.sasl or not state.mechanism or state.user is not None:
            conn.close_after = True
            answer.update(error_code=codec.ERRORS["ILLEGAL_SASL_STATE"],
                          error_message="SaslAuthenticate needs a SaslHandshake first"
                          if self.sasl else "SASL is not enabled on this listener")
            return answer
        token = bytes(request.auth_bytes or b"")
        try:
            if state.mechanism == PLAIN:
                state.user = self._plain(token)
            else:
                reply = self._scram_step(state, token)
                answer["auth_bytes"] = reply.encode()
        except errors.Unauthenticated as exc:
            conn.close_after = True
            log.warning("kafka_sasl_failed", mechanism=state.mechanism, peer=conn.peer_host,
                        detail=str(exc))
            answer.update(error_code=codec.ERRORS[FAILED],
                          error_message=f"authentication failed ({state.mechanism}): {exc.message}")
            return answer
        if state.user is not None:
            log.info("kafka_sasl_authenticated", mechanism=state.mechanism,
                     access_key=state.user.access_key, peer=conn.peer_host)
        return answer

    def _plain(self, token: bytes) -> User:
        """RFC 4616: [authzid] NUL authcid NUL passwd."""
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise errors.Unauthenticated("a PLAIN token is authzid NUL user NUL password")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise errors.Unauthenticated(f"user {user!r} may not act as {authzid!r}")
        return self.guard.authenticate_secret(user, password)

    def _scram_step(self, state: SaslState, token: bytes) -> str:
        """client-first -> server-first (salt, iterations); client-final -> server-final."""
        text = token.decode("utf-8", "replace")
        try:
            if state.scram is None:
                def auth_fn(username: str) -> tuple:
                    user = self.guard.user(username)
                    if user is None:
                        self.guard.count_failure("unknown_key")
                        raise errors.Unauthenticated(
                            f"access key {username!r} is not a known user")
                    state.candidate = user
                    return self.verifiers.get(state.mechanism, user)

                state.scram = ScramMechanism(state.mechanism).make_server(auth_fn)
                state.scram.set_client_first(text)
                return state.scram.get_server_first()
            server, state.scram = state.scram, None
            server.set_client_final(text)
            state.user = state.candidate
            return server.get_server_final()
        except ScramException as exc:
            self.guard.count_failure("bad_secret")
            who = state.candidate.access_key if state.candidate else "?"
            raise errors.Unauthenticated(
                f"wrong secret key for access key {who!r} ({exc})") from None

    # -- authorization -------------------------------------------------------------------------

    async def call(self, api_key: int, request, version: int, conn,
                   handler: Handler) -> dict | None:
        """The handler's answer, with what the user may not do refused (the handler never sees
        a refused topic or group)."""
        if self.guard is None or api_key in PRE_AUTH_APIS:
            return await handler(request, version, conn)
        # Metadata before v4 has no allow_auto_topic_creation: such a client always allowed it
        if api_key == METADATA and getattr(request, "allow_auto_topic_creation", True):
            # creating a topic is ADMIN on it: without that, unknown topics stay unknown
            # (decided quietly: a client asks this on every Metadata, it is no refusal)
            needs = [Permission("topic", t.name, Action.ADMIN) for t in request.topics or []]
            user = conn.sasl.user
            if not needs or not (user.admin or self.guard.acl.table.decide(
                    user.access_key, conn.peer_host, needs).allowed):
                request.allow_auto_topic_creation = False
        if api_key in AUTHENTICATED_ONLY:
            return await handler(request, version, conn)
        rule = _RULES.get(api_key)
        user, ip = conn.sasl.user, conn.peer_host
        if rule is None:
            refusal = self._refused(user, ip, [Permission(
                "cluster", f"kafka/{codec.API_NAMES.get(api_key, api_key)}", Action.ADMIN)])
            if refusal is None:
                return await handler(request, version, conn)
            return {"error_code": codec.ERRORS["CLUSTER_AUTHORIZATION_FAILED"],
                    "error_message": refusal}
        return await rule(self, request, version, conn, handler)

    def _refused(self, user: User, ip: str, needs: list[Permission]) -> str | None:
        """None if allowed, else the sentence of the refusal."""
        try:
            self.guard.authorize(user, ip, needs)
        except errors.PermissionDenied as exc:
            return exc.message
        return None


# -- per-API rules -----------------------------------------------------------------------------
# Each splits the request into what the user may and may not do, runs the handler on the first
# part (if any) and appends refusals for the second, in the response's own shape.

TOPIC_DENIED, GROUP_DENIED = "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"


async def _split_topics(security: KafkaSecurity, request, version: int, conn, handler: Handler,
                        *, items: str, name: str, action: Action, answers: str,
                        refuse: Callable[[Any, int, str], dict], empty: dict) -> dict | None:
    wanted = list(getattr(request, items) or [])
    allowed, denied = [], []
    for item in wanted:
        topic = item if name == "" else getattr(item, name)
        sentence = security._refused(conn.sasl.user, conn.peer_host,
                                     [Permission("topic", topic, action)])
        (allowed if sentence is None else denied).append((item, sentence))
    if not denied:
        return await handler(request, version, conn)
    code = codec.ERRORS[TOPIC_DENIED]
    refusals = [refuse(item, code, sentence) for item, sentence in denied]
    if allowed:
        setattr(request, items, [item for item, _ in allowed])
        answer = await handler(request, version, conn)
        if answer is None:
            return None
    else:
        answer = dict(empty)
        if getattr(request, "acks", None) == 0:
            return None
    answer[answers] = list(answer.get(answers) or []) + refusals
    return answer


def _produce(security, request, version, conn, handler):
    return _split_topics(
        security, request, version, conn, handler, items="topic_data", name="name",
        action=Action.PUB, answers="responses", empty={"throttle_time_ms": 0, "responses": []},
        refuse=lambda t, code, why: {"name": t.name, "partition_responses": [
            {"index": p.index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
             "log_start_offset": -1, "record_errors": [], "error_message": why}
            for p in t.partition_data]})


def _fetch(security, request, version, conn, handler):
    return _split_topics(
        security, request, version, conn, handler, items="topics", name="topic",
        action=Action.SUB, answers="responses",
        empty={"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []},
        refuse=lambda t, code, why: {"topic": t.topic, "partitions": [
            {"partition_index": p.partition, "error_code": code, "high_watermark": -1,
             "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": b""} for p in t.partitions]})


def _list_offsets(security, request, version, conn, handler):
    return _split_topics(
        security, request, version, conn, handler, items="topics", name="name",
        action=Action.SUB, answers="topics", empty={"throttle_time_ms": 0, "topics": []},
        refuse=lambda t, code, why: {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code, "timestamp": -1,
             "offset": -1, "leader_epoch": -1} for p in t.partitions]})


def _create_topics(security, request, version, conn, handler):
    return _split_topics(
        security, request, version, conn, handler, items="topics", name="name",
        action=Action.ADMIN, answers="topics", empty={"throttle_time_ms": 0, "topics": []},
        refuse=lambda t, code, why: {"name": t.name, "error_code": code, "error_message": why,
                                     "num_partitions": -1, "replication_factor": -1,
                                     "configs": []})


def _delete_topics(security, request, version, conn, handler):
    return _split_topics(
        security, request, version, conn, handler, items="topic_names", name="",
        action=Action.ADMIN, answers="responses", empty={"throttle_time_ms": 0, "responses": []},
        refuse=lambda t, code, why: {"name": t, "error_code": code, "error_message": why})


def _create_partitions(security, request, version, conn, handler):
    return _split_topics(
        security, request, version, conn, handler, items="topics", name="name",
        action=Action.ADMIN, answers="results", empty={"throttle_time_ms": 0, "results": []},
        refuse=lambda t, code, why: {"name": t.name, "error_code": code, "error_message": why})


def _group_refusal(security, request, conn) -> str | None:
    return security._refused(conn.sasl.user, conn.peer_host,
                             [Permission("group", request.group_id or "", Action.SUB)])


def _group_call(refusal_fields: Callable[[Any], dict]):
    async def rule(security, request, version, conn, handler):
        if _group_refusal(security, request, conn) is None:
            return await handler(request, version, conn)
        return {"throttle_time_ms": 0, "error_code": codec.ERRORS[GROUP_DENIED],
                **refusal_fields(request)}
    return rule


async def _offset_commit(security, request, version, conn, handler):
    if _group_refusal(security, request, conn) is not None:
        code = codec.ERRORS[GROUP_DENIED]
        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": code} for p in t.partitions]}
            for t in request.topics]}
    return await _split_topics(
        security, request, version, conn, handler, items="topics", name="name",
        action=Action.SUB, answers="topics", empty={"throttle_time_ms": 0, "topics": []},
        refuse=lambda t, code, why: {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]})


async def _offset_fetch(security, request, version, conn, handler):
    if _group_refusal(security, request, conn) is None:
        return await handler(request, version, conn)
    code = codec.ERRORS[GROUP_DENIED]
    return {"throttle_time_ms": 0, "error_code": code, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
             "metadata": "", "error_code": code} for index in t.partition_indexes]}
        for t in request.topics or []]}


async def _describe_groups(security, request, version, conn, handler):
    denied = [g for g in request.groups
              if security._refused(conn.sasl.user, conn.peer_host,
                                   [Permission("group", g, Action.SUB)]) is not None]
    if not denied:
        return await handler(request, version, conn)
    allowed = [g for g in request.groups if g not in denied]
    answer = {"throttle_time_ms": 0, "groups": []}
    if allowed:
        request.groups = allowed
        answer = await handler(request, version, conn)
    answer["groups"] = list(answer.get("groups") or []) + [
        {"error_code": codec.ERRORS[GROUP_DENIED], "group_id": g, "group_state": "",
         "protocol_type": "", "protocol_data": "", "members": [],
         "authorized_operations": -2147483648} for g in denied]
    return answer


TOPIC_RESOURCE = 2   # a config resource's type: Kafka's ConfigResource.Type.TOPIC


async def _incremental_alter_configs(security, request, version, conn, handler):
    """A topic's settings are ADMIN on that topic (as creating or deleting it); any other
    resource (a broker's) ADMIN on the cluster, as every API without a rule. Refused resources
    are answered TOPIC_/CLUSTER_AUTHORIZATION_FAILED, nothing of them altered; the others are
    served."""
    user, ip = conn.sasl.user, conn.peer_host
    allowed, refusals = [], []
    for resource in request.resources or []:
        if resource.resource_type == TOPIC_RESOURCE:
            code = TOPIC_DENIED
            needs = [Permission("topic", resource.resource_name, Action.ADMIN)]
        else:
            code = "CLUSTER_AUTHORIZATION_FAILED"
            needs = [Permission("cluster", "kafka/IncrementalAlterConfigs", Action.ADMIN)]
        sentence = security._refused(user, ip, needs)
        if sentence is None:
            allowed.append(resource)
        else:
            refusals.append({"error_code": codec.ERRORS[code], "error_message": sentence,
                             "resource_type": resource.resource_type,
                             "resource_name": resource.resource_name})
    if not refusals:
        return await handler(request, version, conn)
    answer = {"throttle_time_ms": 0, "responses": []}
    if allowed:
        request.resources = allowed
        answer = await handler(request, version, conn)
    answer["responses"] = list(answer.get("responses") or []) + refusals
    return answer


_RULES: dict[int, Callable[..., Awaitable[dict | None]]] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 8: _offset_commit, 9: _offset_fetch,
    11: _group_call(lambda r: {"generation_id": -1, "protocol_name": "", "leader": "",
                               "member_id": r.member_id or "", "members": []}),
    12: _group_call(lambda r: {}),
    13: _group_call(lambda r: {"members": []}),
    14: _group_call(lambda r: {"assignment": b""}),
    15: _describe_groups,
    19: _create_topics, 20: _delete_topics, 37: _create_partitions,
    44: _incremental_alter_configs,
}
