"""What the HTTP views call: topics and messages over the TideMQ client library.

The views stay thin (parse → one call here → JSON); tests can replace this object when the
broker is not the subject. Topic definitions live in the config center (tidemq.configclient.
topics, the schema `Admin` writes too); brokers watch them and publish routes, so creating a
topic means one compare-and-set write and then waiting for the route to show up on a name
server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tidemq.client import (
    AckResult,
    DeadLetters,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PullResult,
    PullStatus,
    ReceivedMessage,
    SendResult,
    SimpleConsumer,
    TransactionProducer,
)
from tidemq.client.dead_letters import Redriven
from tidemq.client.routes import NameServerClient, TopicRoute
from tidemq.common import errors, rpc
from tidemq.common.auth.guard import StaticAcl
from tidemq.common.polling import poll
from tidemq.common.rpc import BreakerSettings
from tidemq.configclient import topic_settings
from tidemq.configclient.acl import AclFollower
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.quotas import QuotaFollower
from tidemq.configclient.topics import PERM_READ_WRITE, TopicDefinitions
from tidemq.gateway.admin_backend import AdminBackend
from tidemq.gateway.dynamic import follow_breaker_settings
from tidemq.gateway.long_polls import LongPolls
from tidemq.gateway.quotas import HttpQuotas, storage_for
from tidemq.gateway.settings import GatewaySettings
from tidemq.gateway.transactions import HttpTransactions

GATEWAY_GROUP = "tidemq-gateway-http"
MAX_POPPERS = 256   # SimpleConsumers kept per worker, one per (group, topic, filter); oldest dropped


def _redis_auth(settings: GatewaySettings) -> dict[str, str]:
    """The breaker Redis's password (from its file) and CA, for BreakerSettings."""
    if settings.redis_ca_file and not settings.redis_url.startswith("rediss://"):
        raise errors.InvalidArgument(f"--redis-ca-file is for TLS: give --redis-url as "
                                     f"rediss://..., not {settings.redis_url or 'nothing'!r}")
    password = ""
    if settings.redis_password_file:
        try:
            with open(settings.redis_password_file, encoding="utf-8") as source:
                password = source.read().strip()
        except OSError as exc:
            raise errors.InvalidArgument(f"--redis-password-file: {exc}") from None
    return {"redis_password": password, "redis_ca_file": settings.redis_ca_file}


@dataclass
class TopicCreation:
    name: str
    queues: int
    visible: bool           # route seen on a name server with every live broker group
    brokers: list[str] = field(default_factory=list)


class GatewayBackend:
    def __init__(self, settings: GatewaySettings) -> None:
        breaker = BreakerSettings(fail_max=settings.breaker_fail_max,
                                  reset_timeout_s=settings.breaker_reset_s,
                                  redis_url=settings.redis_url, **_redis_auth(settings))
        self.settings = settings
        if security := rpc.ClientSecurity.of_service(settings):
            rpc.configure_client_security(security)  # this worker's channels sign and use TLS
        self.namesrv = NameServerClient(settings.namesrv_addrs, timeout=settings.rpc_timeout_s,
                                        breaker=breaker)
        self.producer = Producer(settings.namesrv_addrs, producer_group=GATEWAY_GROUP,
                                 send_timeout=settings.send_timeout_s,
                                 retries=settings.send_retries,
                                 max_message_size=settings.max_message_size, breaker=breaker,
                                 client_id=GATEWAY_GROUP)   # its broker quotas' entity
        self.consumer = PullConsumer(settings.namesrv_addrs, consumer_group=GATEWAY_GROUP,
                                     timeout=settings.rpc_timeout_s, breaker=breaker,
                                     client_id=GATEWAY_GROUP)
        self.config = ConfigClient(settings.config_center, timeout=settings.rpc_timeout_s)
        self.topics = TopicDefinitions(self.config)
        self._breaker = breaker
        self.transactions = HttpTransactions(self.config, self._transaction_producer,
                                             ttl_s=settings.transaction_ttl_s)
        self._poppers: dict[tuple[str, str, str, str], SimpleConsumer] = {}
        self.long_polls = LongPolls(settings.threads)  # some threads are never parked
        # The operator's reads and resets (admin_routes.py), over the CLI's Admin.
        self.admin = AdminBackend(settings, self.consumer)
        self.acl = StaticAcl()  # users and rules, followed live when auth is on
        self.acl_follower = (AclFollower(self.config, self.acl).start()
                             if settings.auth_enabled else None)
        # Client quotas (quotas.py): the config center's, counted in the breakers' Redis.
        redis_auth = _redis_auth(settings)
        self.quotas = HttpQuotas(storage_for(settings.redis_url, redis_auth["redis_password"],
                                             redis_auth["redis_ca_file"]))
        self.quota_follower = QuotaFollower(
            self.config, lambda table: setattr(self.quotas, "table", table)).start()
        # Breaker thresholds from the config center, applied live in this worker.
        self.dynamic = follow_breaker_settings(settings) if settings.dynamic_settings else None

    # -- topics --------------------------------------------------------------------------

    def create_topic(self, name: str, queues: int, *, order: bool = False,
                     config: dict | None = None) -> TopicCreation:
        self.topics.create(name, queues, order=order, config=config)
        visible, brokers = poll(lambda: self._route_complete(name),
                                self.settings.topic_visible_timeout_s, interval=0.05,
                                until=lambda outcome: outcome[0])
        return TopicCreation(name, queues, visible, brokers)

    def _route_complete(self, name: str) -> tuple[bool, list[str]]:
        """(every live master group serves the topic, the groups that do)."""
        try:
            route = self.namesrv.route(name)
            live = {
                broker_name for broker_name, data in self.namesrv.cluster_info()
                .broker_addr_table.items() if 0 in data.broker_addrs
            }
        except (errors.NotFound, errors.ServiceUnavailable, errors.DeadlineExceeded):
            return False, []
        serving = sorted({q.broker_name for q in route.queues})
        return bool(serving) and live <= set(serving), serving

    def alter_topic(self, name: str, changes: dict) -> dict[str, dict]:
        """Change per-topic settings (None: the default); every setting's value and source."""
        return topic_settings.effective(self.topics.alter(name, changes))

    def topic_config(self, name: str) -> dict[str, dict]:
        """Every per-topic setting's value and source (TopicNotExist if undefined)."""
        return topic_settings.effective(self.topics.settings(name))

    def delete_topic(self, name: str, *, keep_offsets: bool = False) -> list[str]:
        """Remove the definition (TopicNotExist if there is none); brokers drop the topic
        from their routes as their watch sees it. Then, unless `keep_offsets`, every group's
        committed offsets of it (as the CLI does); returns those groups."""
        self.topics.delete(name)
        if keep_offsets:
            return []
        return self.admin.delete_offsets("", name)["groups"]

    def list_topics(self) -> list[dict]:
        # a document that is not a JSON object is not ours to judge: the broker logs it
        topics = [{"name": name, "queues": definition.get("queues"),
                   "perm": definition.get("perm", PERM_READ_WRITE),
                   "order": bool(definition.get("order", False))}
                  for name, definition in self.topics.documents() if definition is not None]
        return sorted(topics, key=lambda t: t["name"])

    def route(self, topic: str) -> TopicRoute:
        return self.consumer.routes.refresh(topic)

    def describe_topic(self, topic: str) -> dict:
        """The route per broker group and each queue's offsets; a group that cannot answer is
        listed under `unavailable_brokers` instead of failing the whole description."""
        route = self.route(topic)
        brokers, queues, unavailable = [], [], []
        for layout in route.queues:
            group = route.brokers.get(layout.broker_name)
            brokers.append({
                "broker_name": layout.broker_name, "cluster": group.cluster if group else "",
                "addrs": {str(k): v for k, v in (group.addrs if group else {}).items()},
                "read_queue_nums": layout.read_queue_nums,
                "write_queue_nums": layout.write_queue_nums, "perm": layout.perm,
            })
            try:
                offsets = self.queue_offsets(topic, layout.broker_name)
            except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
                unavailable.append({"broker_name": layout.broker_name, "code": exc.code,
                                    "detail": exc.message})
                continue
            queues.extend({"broker_name": layout.broker_name, "queue_id": queue_id,
                           "min_offset": low, "max_offset": high}
                          for queue_id, (low, high) in sorted(offsets.items()))
        config, config_unavailable = {}, None
        try:
            config = self.topic_config(topic)
        except errors.TopicNotExist:
            pass   # being deleted: the rest stands
        except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
            # the config center out of reach: the rest stands, and the answer says why the
            # settings are missing instead of showing an empty set as if none were set
            config_unavailable = {"code": exc.code, "detail": exc.message}
        return {"name": topic, "brokers": brokers, "queues": queues,
                "unavailable_brokers": unavailable, "config": config,
                "config_unavailable": config_unavailable}

    def queue_offsets(self, topic: str, broker_name: str) -> dict[int, tuple[int, int]]:
        return self.consumer.queue_offsets(topic, broker_name)

    # -- messages ------------------------------------------------------------------------

    def send(self, messages: Sequence[Message]) -> list[SendResult]:
        return self.producer.send_many(messages)

    def pull(self, topic: str, broker_name: str, queue_id: int, offset: int, max_messages: int,
             wait_ms: int = 0, expression: str = "*", expression_type: str = "TAG"
             ) -> PullResult:
        route = self.consumer.routes.get(topic)
        layout = next((q for q in route.queues if q.broker_name == broker_name), None)
        if layout is None:
            raise errors.NotFound(f"broker group {broker_name!r} holds no queue of {topic!r}",
                                  code="BROKER_NOT_FOUND")
        if not 0 <= queue_id < max(layout.read_queue_nums, layout.write_queue_nums):
            raise errors.NotFound(
                f"{topic!r} has queues 0..{layout.read_queue_nums - 1} on {broker_name!r}, "
                f"not {queue_id}", code="QUEUE_NOT_FOUND")
        queue = MessageQueue(topic, broker_name, queue_id)
        return self.long_polls.poll(
            wait_ms,
            lambda granted_ms: self.consumer.pull(queue, offset, max_messages,
                                                  long_poll=granted_ms / 1000,
                                                  tag_expression=expression,
                                                  expression_type=expression_type),
            # not NO_MATCHED_MSG: it moves the offset past what the filter skipped
            lambda result: result.status is PullStatus.NO_NEW_MSG)

    # -- transactions (transactions.py) ---------------------------------------------------

    def _transaction_producer(self, group: str, check_listener) -> TransactionProducer:
        settings = self.settings
        return TransactionProducer(settings.namesrv_addrs, producer_group=group,
                                   check_listener=check_listener,
                                   send_timeout=settings.send_timeout_s,
                                   retries=settings.send_retries,
                                   max_message_size=settings.max_message_size,
                                   breaker=self._breaker)

    # -- pop consumption and dead letters -------------------------------------------------

    def _popper(self, group: str, topic: str, tags: str = "*",
                expression_type: str = "TAG") -> SimpleConsumer:
        key = (group, topic, tags, expression_type)
        if key not in self._poppers:  # one per subscription: its route cache is reused
            if len(self._poppers) >= MAX_POPPERS:  # filters are the callers' text: bound them
                self._poppers.pop(next(iter(self._poppers)))
            self._poppers[key] = SimpleConsumer(self.settings.namesrv_addrs, group, topic,
                                                tag_expression=tags,
                                                expression_type=expression_type,
                                                timeout=self.settings.rpc_timeout_s,
                                                client_id=GATEWAY_GROUP,
                                                # the HTTP pop is quiet (sampling.py)
                                                receive_trace_of_its_own=True)
        return self._poppers[key]

    def pop(self, group: str, topic: str, max_messages: int, invisible_ms: int, wait_ms: int,
            tags: str, expression_type: str = "TAG") -> list[ReceivedMessage]:
        """`expression_type` "SQL92": `tags` is a SQL92 filter (docs/filters.md)."""
        popper = self._popper(group, topic, tags, expression_type)
        return self.long_polls.poll(
            wait_ms,
            lambda granted_ms: popper.receive(max_messages,
                                              invisible_duration_s=invisible_ms / 1000,
                                              wait_s=granted_ms / 1000),
            lambda popped: not popped)

    def ack(self, group: str, topic: str, receipt_handle: str) -> None:
        self._popper(group, topic).ack_handle(receipt_handle)

    def ack_many(self, group: str, topic: str, receipt_handles: list[str]) -> list[AckResult]:
        """One Ack call per broker group the handles name; one result per handle."""
        return self._popper(group, topic).ack_handles(receipt_handles)

    def change_invisible(self, group: str, topic: str, receipt_handle: str,
                         invisible_ms: int) -> str:
        return self._popper(group, topic).change_invisible_handle(receipt_handle, invisible_ms)

    def dead_letters(self, group: str, limit: int) -> list:
        with DeadLetters(self.settings.namesrv_addrs, group,
                         timeout=self.settings.rpc_timeout_s) as dlq:
            return dlq.list(limit)

    def redrive(self, group: str, msg_ids: list[str] | None) -> list[Redriven]:
        """The chosen dead letters, or (msg_ids None) every listed one."""
        with DeadLetters(self.settings.namesrv_addrs, group,
                         timeout=self.settings.rpc_timeout_s) as dlq:
            return dlq.requeue_all() if msg_ids is None else dlq.requeue_ids(msg_ids)

    def close(self) -> None:
        if self.dynamic is not None:
            self.dynamic.stop()
        if self.acl_follower is not None:
            self.acl_follower.close()
        self.quota_follower.close()
        self.transactions.close()
        self.admin.close()
        self.producer.close()
        self.consumer.close()
        self.config.close()
