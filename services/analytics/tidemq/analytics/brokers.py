"""The broker side of the Spark source: routes, queue offsets and ranged pulls.

A thin adapter over the name servers' RpcClient and the broker channel
(tidemq.common.channel: deadlines, breakers, retries of idempotent calls, the wire protocol
for pulls); every answer is turned into the planning types of `offsets`. Connections are
process-wide, so executors open them lazily inside `read()` and nothing of them is pickled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from tidemq.analytics.offsets import QueueBounds, QueueKey
from tidemq.common import errors
from tidemq.common.channel import BrokerChannel, learn_route
from tidemq.common.rpc import RpcClient
from tidemq.v1 import broker_pb2, nameserver_pb2, nameserver_pb2_grpc

PERM_READ = 2  # TopicConfig.perm bit: readable (see common.proto)


def parse_addrs(text: str) -> list[str]:
    """Name server list "h1:p1;h2:p2" (',' accepted too) -> ["h1:p1", "h2:p2"]."""
    addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise errors.InvalidArgument(f"name server address {addr!r} must be host:port")
    if not addrs:
        raise errors.InvalidArgument("option namesrv is required: 'host:port[;host:port...]'")
    return addrs


@dataclass(frozen=True, slots=True)
class BrokerGroup:
    """One replica group serving the topic: its name, readable queue count, addresses."""

    name: str
    read_queues: int
    addrs: tuple[str, ...]  # master first, then slaves by broker id


def fetch_route(namesrv_addrs: Sequence[str], topic: str, timeout: float) -> list[BrokerGroup]:
    """The readable broker groups of the topic's route."""
    return _groups(fetch_route_data(namesrv_addrs, topic, timeout))


def fetch_route_data(namesrv_addrs: Sequence[str], topic: str,
                     timeout: float) -> nameserver_pb2.TopicRouteData:
    route = _ask_name_servers(namesrv_addrs, "GetRouteInfo",
                              nameserver_pb2.GetRouteInfoRequest(topic=topic), timeout,
                              f"for topic {topic!r}")
    learn_route(route)  # the brokers' wire ports: no GetBrokerInfo before the first pull
    return route


def list_topics(namesrv_addrs: Sequence[str], timeout: float) -> list[str]:
    """Every topic the name servers route (system topics included), sorted."""
    reply = _ask_name_servers(namesrv_addrs, "GetAllTopics",
                              nameserver_pb2.GetAllTopicsRequest(), timeout, "with the topics")
    return sorted(reply.topics)


def _ask_name_servers(namesrv_addrs: Sequence[str], method: str, request, timeout: float,
                      what: str):
    """Ask the name servers in turn (any one knows every route); unreachable ones are skipped."""
    failures = []
    for addr in namesrv_addrs:
        client = RpcClient(addr, nameserver_pb2_grpc.NameServerServiceStub, timeout=timeout)
        try:
            return client.call(method, request, idempotent=True)
        except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
            failures.append(f"{addr}: {exc.message}")
    raise errors.ServiceUnavailable(f"no name server answered {what}: " + "; ".join(failures))


def _groups(route: nameserver_pb2.TopicRouteData) -> list[BrokerGroup]:
    addrs = {
        data.broker_name: tuple(addr for _, addr in sorted(data.broker_addrs.items()) if addr)
        for data in route.broker_datas
    }
    groups = []
    for queue_data in route.queue_datas:
        if not queue_data.perm & PERM_READ or queue_data.read_queue_nums <= 0:
            continue
        group_addrs = addrs.get(queue_data.broker_name, ())
        if group_addrs:
            groups.append(BrokerGroup(queue_data.broker_name, queue_data.read_queue_nums,
                                      group_addrs))
    return sorted(groups, key=lambda g: g.name)


def fetch_bounds(groups: Sequence[BrokerGroup], topic: str,
                 timeout: float) -> dict[QueueKey, QueueBounds]:
    """min/max offset of every readable queue, asked of each group (master, else a slave)."""
    bounds: dict[QueueKey, QueueBounds] = {}
    for group in groups:
        reply = call_any(group.addrs, "GetQueueOffsets",
                         broker_pb2.GetQueueOffsetsRequest(topic=topic), timeout)
        for queue in reply.queues:
            if queue.queue_id < group.read_queues:
                bounds[QueueKey(topic, group.name, queue.queue_id)] = QueueBounds(
                    queue.min_offset, queue.max_offset
                )
    return bounds


def search_offsets(addrs: Mapping[str, Sequence[str]], keys, spec,
                   timeout: float) -> dict[QueueKey, int]:
    """startingOffsetsByTimestamp: each queue's first offset stored at or after its timestamp
    (the queue's end when none is), asked of the queue's broker (`addrs`: by broker group
    name) with SearchOffset."""
    found = {}
    for key in sorted(keys):
        timestamp = spec.for_queue(key)
        if timestamp is not None:
            reply = call_any(addrs[key.broker], "SearchOffset", broker_pb2.SearchOffsetRequest(
                topic=key.topic, queue_id=key.queue_id, timestamp_ms=timestamp), timeout)
            found[key] = reply.queue_offset
    return found


def call_any(addrs: Sequence[str], method: str, request, timeout: float):
    """Call the first replica that answers; application errors are final, outages are not."""
    last: errors.TideMQError | None = None
    for addr in addrs:
        try:
            return BrokerChannel(addr, timeout=timeout).call(method, request, idempotent=True)
        except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
            last = exc
    assert last is not None, "call_any needs at least one address"
    raise last


def pull_range(
    addrs: Sequence[str], topic: str, queue_id: int, start: int, end: int, *,
    max_messages: int, timeout: float, fail_on_data_loss: bool = True,
    consumer_group: str = "",
) -> Iterator[bytes]:
    """Yield pull replies (concatenated records) covering offsets [start, end) of one queue.

    No long polling: the range was planned from the broker's own max offset, so an empty
    answer before `end` means the data is gone or the replica is behind, never "wait".
    """
    offset = start
    while offset < end:
        request = broker_pb2.PullRequest(
            consumer_group=consumer_group, topic=topic, queue_id=queue_id, queue_offset=offset,
            max_messages=min(max_messages, end - offset), suspend_timeout_ms=0,
        )
        reply = call_any(addrs, "Pull", request, timeout)
        where = f"topic {topic!r} queue {queue_id} offset {offset}"
        if reply.status == broker_pb2.FOUND:
            yield reply.records
        elif reply.status == broker_pb2.OFFSET_ILLEGAL:
            if fail_on_data_loss or reply.next_begin_offset <= offset:
                raise errors.PreconditionFailed(
                    f"{where} is no longer on the broker (its queue now holds "
                    f"{reply.min_offset}..{reply.max_offset}); the range was planned as "
                    f"[{start}, {end}); set failOnDataLoss=false to skip lost messages",
                    code="OFFSET_OUT_OF_RANGE",
                )
        elif reply.status == broker_pb2.NO_NEW_MSG:
            raise errors.PreconditionFailed(
                f"{where}: the broker has nothing there although the read was planned up to "
                f"{end} (queue max offset now {reply.max_offset}; data lost in a failover?)",
                code="OFFSET_OUT_OF_RANGE",
            )
        if reply.next_begin_offset <= offset:
            raise errors.Internal(
                f"{where}: pull answered {broker_pb2.PullStatus.Name(reply.status)} without "
                f"advancing (next_begin_offset {reply.next_begin_offset})"
            )
        offset = reply.next_begin_offset
