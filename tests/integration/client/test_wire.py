"""The wire protocol (tidemq.common.wire) against a real broker: the SDK's hot calls take it
(through the broker channel, tidemq.common.channel), answer exactly what gRPC answers, share
one connection between threads, keep their deadlines, and a broker that goes away fails the
calls in flight at once and is reconnected to after."""

from __future__ import annotations

import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from tidemq.client import Message, Producer, SimpleConsumer
from tidemq.client.message import decode_records
from tidemq.common import errors, rpc
from tidemq.common.channel import link, ports
from tidemq.common.wire import client as wire
from tidemq.common.wire import frames
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.v1 import broker_pb2, broker_pb2_grpc

from tests.support.cluster import (
    create_topic_in_config_center,
    held_pulls,
    running_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until

TOPIC = "WireTopic"
EMPTY = "WireNothingSent"  # nothing is ever sent to it: a pop there waits its whole hold
POP = BROKER_METHODS["Pop"]


@pytest.fixture(scope="module")
def cluster(shared_one_broker_cluster):
    """The shared one-broker cluster (tests/conftest.py): topics and groups are this module's."""
    create_topic_in_config_center(shared_one_broker_cluster, TOPIC, 2)
    for name in [f"{TOPIC}{n}" for n in range(4)] + [EMPTY]:
        create_topic_in_config_center(shared_one_broker_cluster, name, 1)
    wait_for_route(shared_one_broker_cluster, EMPTY, 1)
    return shared_one_broker_cluster


def broker_addr(cluster) -> str:
    return cluster.brokers["broker-a"].addr


def wire_addr(cluster) -> str:
    return f"127.0.0.1:{cluster.brokers['broker-a'].info['wire_port']}"


def grpc_stub(cluster) -> broker_pb2_grpc.BrokerServiceStub:
    return broker_pb2_grpc.BrokerServiceStub(rpc.default_pool.get(broker_addr(cluster)))


def test_the_broker_offers_its_wire_port_and_the_sdk_uses_it(cluster):
    info = grpc_stub(cluster).GetBrokerInfo(broker_pb2.GetBrokerInfoRequest(), timeout=10)
    assert info.wire_port == cluster.brokers["broker-a"].info["wire_port"] > 0
    with Producer(cluster.namesrv_addrs) as producer:
        producer.send(Message(TOPIC, b"over the wire"))
    with SimpleConsumer(cluster.namesrv_addrs, "wire-g1", TOPIC) as consumer:
        received = wait_until(lambda: consumer.receive(32, wait_s=1), 30,
                              message="the message to be popped")
        assert [m.body for m in received] == [b"over the wire"]
        assert all(result.ok for result in consumer.ack_many(received))
    assert link.link_for(broker_addr(cluster), rpc.client_security()).connected


def test_errors_are_what_grpc_answers(cluster):
    """Same class, code and sentence as the gRPC call of the same request."""
    requests = [
        ("Pop", broker_pb2.PopRequest(consumer_group="wire-g2", topic="NoSuchWireTopic",
                                      max_messages=1, invisible_duration_ms=10_000)),
        ("Ack", broker_pb2.AckRequest(consumer_group="wire-g2", receipt_handle="not-a-handle")),
        ("Pull", broker_pb2.PullRequest(consumer_group="wire-g2", topic=TOPIC, queue_id=99,
                                        max_messages=1)),
    ]
    connection = wire.WireConnection(wire_addr(cluster))
    try:
        for name, request in requests:
            with pytest.raises(errors.TideMQError) as over_grpc:
                try:
                    getattr(grpc_stub(cluster), name)(request, timeout=10)
                except grpc.RpcError as exc:
                    raise errors.from_rpc_error(exc) from None
            with pytest.raises(errors.TideMQError) as over_wire:
                connection.call(BROKER_METHODS[name], request, 10)
            assert type(over_wire.value) is type(over_grpc.value), name
            assert (over_wire.value.code, over_wire.value.message) == \
                (over_grpc.value.code, over_grpc.value.message), name
    finally:
        connection.close()


def test_parked_long_polls_of_many_threads_share_one_connection(cluster):
    """Four pops park on one connection; each wakes with its own topic's message, whatever the
    order the broker answers them in."""
    connection = wire.WireConnection(wire_addr(cluster))
    try:
        def pop(n: int) -> broker_pb2.PopResponse:
            request = broker_pb2.PopRequest(consumer_group=f"wire-park-{n}", topic=f"{TOPIC}{n}",
                                            max_messages=4, invisible_duration_ms=30_000,
                                            wait_ms=20_000)
            return connection.call(POP, request, 30)

        with ThreadPoolExecutor(4) as pool:
            parked = [pool.submit(pop, n) for n in range(4)]
            with Producer(cluster.namesrv_addrs) as producer:
                for n in reversed(range(4)):
                    producer.send(Message(f"{TOPIC}{n}", f"for {n}".encode()))
            answers = [future.result(40) for future in parked]
        for n, answer in enumerate(answers):
            assert answer.record_count == 1
            assert f"for {n}".encode() in answer.records
    finally:
        connection.close()


def test_a_call_past_its_deadline_fails_and_the_connection_stays_usable(cluster):
    connection = wire.WireConnection(wire_addr(cluster))
    try:
        parked = broker_pb2.PopRequest(consumer_group="wire-deadline", topic=EMPTY,
                                       max_messages=1, invisible_duration_ms=10_000,
                                       wait_ms=20_000)
        with pytest.raises(errors.DeadlineExceeded, match="no answer within"):
            connection.start(POP, parked, 30).answer(0.3)  # the broker holds it for 20 s
        # a call waited on without a timeout still ends at its deadline, as a gRPC future
        # does: the sweeper fails it (its deadline told to the broker is moved past it here)
        started = connection.start(POP, parked, 30)
        started.deadline -= 29.5
        assert isinstance(started.exception(), errors.DeadlineExceeded)
        answer = connection.call(BROKER_METHODS["Pull"], broker_pb2.PullRequest(
            consumer_group="wire-deadline", topic=EMPTY, queue_id=0, max_messages=1), 10)
        assert answer.status == broker_pb2.PullStatus.NO_NEW_MSG
    finally:
        connection.close()


def raw_connection(cluster) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", cluster.brokers["broker-a"].info["wire_port"]),
                                    timeout=10)
    sock.sendall(frames.HELLO)
    greeting = frames.greeting(broker_addr(cluster))
    assert sock.recv(len(greeting), socket.MSG_WAITALL) == greeting
    return sock


def read_answer(sock: socket.socket):
    (length,) = frames.LENGTH.unpack(sock.recv(4, socket.MSG_WAITALL))
    return frames.parse_response(sock.recv(length, socket.MSG_WAITALL))


def test_unknown_methods_and_undecodable_requests_are_answered_with_an_error(cluster):
    with raw_connection(cluster) as sock:
        sock.sendall(frames.request(7, 200, 1000, (), b""))
        request_id, answer = read_answer(sock)
        assert request_id == 7 and isinstance(answer, errors.InvalidArgument)
        assert answer.code == "UNKNOWN_METHOD"
        sock.sendall(frames.request(8, POP.number, 1000, (), b"\xff\xff\xff"))
        request_id, answer = read_answer(sock)
        assert request_id == 8 and isinstance(answer, errors.InvalidArgument)
        assert "not a PopRequest" in answer.message


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\n\r\n",
                                     frames.HELLO + frames.LENGTH.pack(frames.MAX_FRAME + 1)])
def test_what_is_not_this_protocol_is_disconnected(cluster, garbage):
    with socket.create_connection(("127.0.0.1", cluster.brokers["broker-a"].info["wire_port"]),
                                  timeout=10) as sock:
        sock.sendall(garbage)
        received = b""
        while chunk := sock.recv(64):  # the broker closes: recv returns b"" (no timeout)
            received += chunk
        assert received in (b"", frames.greeting(broker_addr(cluster)))


def test_dialling_a_grpc_port_is_a_clear_error(cluster):
    with pytest.raises(OSError, match="did not answer as a TideMQ wire endpoint"):
        wire.WireConnection(broker_addr(cluster), connect_timeout_s=5)


def test_a_wire_port_that_names_another_broker_is_not_used(cluster):
    """A broker restarted on other ports may leave its old wire port to another broker: the
    greeting's name tells the client before it sends anything there."""
    elsewhere = link.WireLink("127.0.0.1:1", discover=lambda _: ports.WirePort(
        cluster.brokers["broker-a"].info["wire_port"]))
    assert elsewhere.connection(5) is None


def test_a_broker_that_dies_fails_calls_in_flight_and_is_reconnected_after_restart(
        tmp_path, monkeypatch):
    """A private cluster: its broker is killed and restarted."""
    monkeypatch.setattr(link, "RETRY_AFTER_S", 0.2)
    with running_cluster(tmp_path, broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 1)
        broker = cluster.brokers["broker-a"]
        endpoint = link.WireLink(broker.addr, discover=lambda timeout_s: ports.ask_broker(
            broker.addr, timeout_s))
        request = broker_pb2.PopRequest(consumer_group="wire-kill", topic=TOPIC, max_messages=1,
                                        invisible_duration_ms=10_000, wait_ms=30_000)
        parked = endpoint.start("Pop", request, 60)
        assert parked is not None
        failed = threading.Event()
        parked.add_done_callback(lambda _: failed.set())
        broker.kill()
        assert failed.wait(30), "the parked pop outlived its broker"
        assert isinstance(parked.exception(), errors.ServiceUnavailable)
        assert "lost" in str(parked.exception())
        assert endpoint.call("Pop", request, 1) is None  # no broker: the call goes by gRPC
        broker.restart()
        quick = broker_pb2.PopRequest(consumer_group="wire-kill", topic=TOPIC, max_messages=1,
                                      invisible_duration_ms=10_000)
        wait_until(lambda: endpoint.call("Pop", quick, 5) is not None, 30,
                   message="a wire connection to the restarted broker")
        endpoint.close()


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(cluster):
    """Spark's Python workers are forked: an inherited connection has no reader thread there."""
    endpoint = link.link_for(broker_addr(cluster), rpc.client_security())
    request = broker_pb2.PullRequest(consumer_group="wire-fork", topic=EMPTY, queue_id=0,
                                     max_messages=1)
    assert endpoint.call("Pull", request, 10) is not None
    inherited = endpoint._connection
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its call went over a connection of its own
        try:
            answered = endpoint.call("Pull", request, 10) is not None
            os._exit(0 if answered and endpoint._connection is not inherited else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert inherited.alive and endpoint.call("Pull", request, 10) is not None
    assert endpoint._connection is inherited


def test_a_cancelled_call_ends_its_long_poll_on_the_broker(cluster):
    """As a gRPC client's cancellation does: the broker stops holding the pop."""
    broker = cluster.brokers["broker-a"]
    connection = wire.WireConnection(wire_addr(cluster))
    try:
        before = held_pulls(broker)
        parked = connection.start(POP, broker_pb2.PopRequest(
            consumer_group="wire-cancel", topic=EMPTY, max_messages=1,
            invisible_duration_ms=10_000, wait_ms=60_000), 90)
        wait_until(lambda: held_pulls(broker) == before + 1, 30, message="the pop to be held")
        assert parked.cancel()
        wait_until(lambda: held_pulls(broker) == before, 30, message="the hold to end")
    finally:
        connection.close()


def test_a_batch_larger_than_the_socket_buffers_arrives_whole(cluster):
    """A few MiB in one frame: the client's send continues past partial writes, the broker
    reassembles the frame from many reads, and the pull reply comes back the same way."""
    topic = f"{TOPIC}2"
    bodies = [bytes([n]) * (64 << 10) for n in range(64)]  # 4 MiB in one batch
    with Producer(cluster.namesrv_addrs) as producer:
        results = producer.send_many([Message(topic, body) for body in bodies])
    assert len(results) == len(bodies)
    connection = wire.WireConnection(wire_addr(cluster))
    try:
        got: list[bytes] = []
        offset = results[0].queue_offset
        while len(got) < len(bodies):
            reply = connection.call(BROKER_METHODS["Pull"], broker_pb2.PullRequest(
                consumer_group="wire-big", topic=topic, queue_id=results[0].queue_id,
                queue_offset=offset, max_messages=64, max_bytes=8 << 20), 30)
            got += [m.body for m in decode_records(reply.records, "broker-a")]
            offset = reply.next_begin_offset
        assert got == bodies
    finally:
        connection.close()


def test_callbacks_run_off_the_reader_thread_and_may_call_again(cluster):
    """A done-callback that makes the next call (an ack lane does) runs on the callback thread:
    on the reader it could block the very thread that reads the answer it waits for."""
    connection = wire.WireConnection(wire_addr(cluster))
    try:
        pull = BROKER_METHODS["Pull"]
        request = broker_pb2.PullRequest(consumer_group="wire-callback", topic=EMPTY,
                                         queue_id=0, max_messages=1)
        seen: list[str] = []
        chained = threading.Event()

        def then(_):
            seen.append(threading.current_thread().name)
            connection.call(pull, request, 10)  # blocks until the reader answers it
            chained.set()

        connection.start(pull, request, 10).add_done_callback(then)
        assert chained.wait(30), "the chained call was not answered"
        assert seen and seen[0].startswith("tidemq-wire-callbacks")
    finally:
        connection.close()


def test_blocking_callers_futures_and_late_callers_share_one_connection(cluster):
    """Threads that wait for each answer, threads that hold futures and a caller whose
    deadline passes again and again, all at once on one connection: every call gets its own
    answer, and the late caller's leave the others answered and the connection usable."""
    connection = wire.WireConnection(wire_addr(cluster))
    pull = BROKER_METHODS["Pull"]
    request = broker_pb2.PullRequest(consumer_group="wire-mixed", topic=EMPTY, queue_id=0,
                                     max_messages=1)
    parked = broker_pb2.PopRequest(consumer_group="wire-mixed", topic=EMPTY, max_messages=1,
                                   invisible_duration_ms=10_000, wait_ms=20_000)

    def blocking(_: int) -> list[int]:
        return [connection.call(pull, request, 30).status for _ in range(40)]

    def futures(_: int) -> list[int]:
        calls = [connection.start(pull, request, 30) for _ in range(40)]
        return [call.result(30).status for call in calls]

    def late(_: int) -> list[int]:
        statuses = []
        for _ in range(3):
            with pytest.raises(errors.DeadlineExceeded):
                connection.start(POP, parked, 30).answer(0.2)
            statuses.append(connection.call(pull, request, 30).status)
        return statuses

    try:
        with ThreadPoolExecutor(9) as pool:
            done = [pool.submit(work, n) for n, work in
                    enumerate([blocking, futures] * 4 + [late])]
            answers = [future.result(120) for future in done]
        assert all(status == broker_pb2.PullStatus.NO_NEW_MSG
                   for statuses in answers for status in statuses)
        assert sum(len(statuses) for statuses in answers) == 8 * 40 + 3
        assert connection.alive
    finally:
        connection.close()


def calls(method: str, transport: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("tidemq_rpc_calls_total",
                                     {"method": method, "transport": transport}) or 0.0


@pytest.fixture
def fresh_links():
    """No wire connection nor learnt port in this process: as a client just started."""
    link.close_links()
    ports.forget_all()
    yield
    link.close_links()


def test_routes_carry_the_wire_port_so_the_first_call_asks_no_broker(cluster, fresh_links,
                                                                     monkeypatch):
    from tidemq.client.routes import NameServerClient
    from tidemq.common.channel import BrokerChannel

    route = NameServerClient(cluster.namesrv_addrs).route(TOPIC)
    addr = broker_addr(cluster)
    assert ports.known(addr) == ports.WirePort(cluster.brokers["broker-a"].info["wire_port"])
    assert route.brokers["broker-a"].master_addr == addr

    def no_question(*_):
        raise AssertionError("GetBrokerInfo asked though the route named the port")
    monkeypatch.setattr(ports, "ask_broker", no_question)
    before = calls("Pull", "wire")
    reply = BrokerChannel(addr).call("Pull", broker_pb2.PullRequest(
        consumer_group="wire-route", topic=EMPTY, queue_id=0, max_messages=1), timeout=10)
    assert reply.status == broker_pb2.PullStatus.NO_NEW_MSG
    assert calls("Pull", "wire") == before + 1


def test_an_old_route_falls_back_to_get_broker_info(cluster, fresh_links):
    from tidemq.common.channel import BrokerChannel

    channel = BrokerChannel(broker_addr(cluster))
    channel.call("Pull", broker_pb2.PullRequest(consumer_group="wire-old-route", topic=EMPTY,
                                                queue_id=0, max_messages=1), timeout=10)
    assert channel.wire_connected  # the port was asked of the broker
    assert ports.known(broker_addr(cluster)).port == cluster.brokers["broker-a"].info["wire_port"]


def test_with_tidemq_wire_0_every_call_goes_by_grpc(cluster, fresh_links, monkeypatch):
    """The gRPC-only setting: same answers, none over the wire, counted as gRPC."""
    from tidemq.common.channel import BrokerChannel

    monkeypatch.setenv("TIDEMQ_WIRE", "0")
    before = (calls("Send", "wire"), calls("Send", "grpc"), calls("Pop", "grpc"))
    with Producer(cluster.namesrv_addrs) as producer:
        producer.send(Message(f"{TOPIC}3", b"over gRPC only"))
    with SimpleConsumer(cluster.namesrv_addrs, "wire-off", f"{TOPIC}3") as consumer:
        seen: list[bytes] = []

        def popped() -> bool:
            received = consumer.receive(32, wait_s=1)
            assert all(result.ok for result in consumer.ack_many(received))
            seen.extend(m.body for m in received)
            return b"over gRPC only" in seen
        wait_until(popped, 30, message="the message to be popped")
    assert calls("Send", "wire") == before[0]
    assert calls("Send", "grpc") >= before[1] + 1 and calls("Pop", "grpc") > before[2]
    assert not BrokerChannel(broker_addr(cluster)).wire_connected
