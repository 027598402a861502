"""Error mapping and breakers over a real gRPC server on loopback: the threaded runtime and the
grpc.aio one (with plain handlers on its thread pool, and with coroutine handlers)."""

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tidemq.common import errors
from tidemq.common.rpc import (
    GRPC_OPTIONS,
    SERVER_GRPC_OPTIONS,
    BreakerSettings,
    ChannelPool,
    RpcClient,
    is_endpoint_open,
)
from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import ServiceSettings
from tidemq.v1 import nameserver_pb2, nameserver_pb2_grpc


class RaisingNameServer(nameserver_pb2_grpc.NameServerServiceServicer):
    def GetRouteInfo(self, request, context):
        if request.topic == "boom":
            raise RuntimeError("kaput")
        if request.topic == "full":
            raise errors.ResourceExhausted("this instance holds its limit of 192 watches")
        raise errors.TopicNotExist(f"topic {request.topic!r} does not exist")

    def GetAllTopics(self, request, context):
        return nameserver_pb2.TopicList(topics=["a", "b"])


class AsyncRaisingNameServer(nameserver_pb2_grpc.NameServerServiceServicer):
    async def GetRouteInfo(self, request, context):
        return RaisingNameServer.GetRouteInfo(self, request, context)

    async def GetAllTopics(self, request, context):
        return nameserver_pb2.TopicList(topics=["a", "b"])


@pytest.fixture(params=["threaded", "aio-plain-handlers", "aio-coroutine-handlers"])
def runtime(request):
    rt = ServiceRuntime("test", ServiceSettings(metrics_port=-1, shutdown_grace_s=0),
                        tracing=False, aio=request.param.startswith("aio"))
    servicer = (AsyncRaisingNameServer() if request.param == "aio-coroutine-handlers"
                else RaisingNameServer())
    rt.add(nameserver_pb2_grpc.add_NameServerServiceServicer_to_server, servicer,
           "tidemq.v1.NameServerService")
    rt.start()
    yield rt
    rt.stop()


def client_of(runtime) -> RpcClient:
    """A client with its own channels: a pooled channel to this port from an earlier test's
    server (ports are reused) may still be backing off, and fail the first call."""
    return RpcClient(f"127.0.0.1:{runtime.port}", nameserver_pb2_grpc.NameServerServiceStub,
                     pool=ChannelPool())


def test_health_reports_serving(runtime):
    with grpc.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "tidemq.v1.NameServerService"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_domain_error_crosses_the_wire_with_its_code(runtime):
    client = client_of(runtime)
    with pytest.raises(errors.TopicNotExist) as info:
        client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic="orders"))
    assert info.value.code == "TOPIC_NOT_EXIST"
    assert info.value.http_status == 404
    assert "'orders' does not exist" in info.value.message


def test_a_reached_limit_crosses_the_wire_as_resource_exhausted(runtime):
    client = client_of(runtime)
    with pytest.raises(errors.ResourceExhausted, match="limit of 192") as info:
        client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic="full"))
    assert (info.value.code, info.value.http_status) == ("RESOURCE_EXHAUSTED", 429)


def test_unexpected_exception_becomes_internal_error(runtime):
    client = client_of(runtime)
    with pytest.raises(errors.Internal, match="kaput"):
        client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic="boom"))


def test_application_errors_do_not_open_the_breaker(runtime):
    addr = f"127.0.0.1:{runtime.port}"
    client = RpcClient(addr, nameserver_pb2_grpc.NameServerServiceStub, pool=ChannelPool(),
                       breaker=BreakerSettings(fail_max=2))
    for _ in range(5):
        with pytest.raises(errors.TopicNotExist):
            client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic="x"))
    assert not is_endpoint_open(addr)
    assert list(client.call("GetAllTopics", nameserver_pb2.GetAllTopicsRequest()).topics) == ["a", "b"]


def test_dead_endpoint_opens_breaker_then_fails_fast():
    from tests.support.processes import dead_endpoint

    addr = dead_endpoint()
    client = RpcClient(addr, nameserver_pb2_grpc.NameServerServiceStub, pool=ChannelPool(),
                       breaker=BreakerSettings(fail_max=3, reset_timeout_s=60), timeout=2.0)
    failures = []
    for _ in range(3):
        with pytest.raises(errors.ServiceUnavailable) as info:
            client.call("GetAllTopics", nameserver_pb2.GetAllTopicsRequest())
        failures.append(info.value)
    assert failures[-1].code == "CIRCUIT_OPEN"  # the third failure trips it
    assert is_endpoint_open(addr)
    with pytest.raises(errors.BreakerOpen, match="is open"):
        client.call("GetAllTopics", nameserver_pb2.GetAllTopicsRequest())


def test_calls_to_one_endpoint_run_concurrently():
    """A slow call must not hold up others to the same endpoint (no lock across the RPC)."""
    import threading

    entered = threading.Event()
    release = threading.Event()

    class SlowNameServer(nameserver_pb2_grpc.NameServerServiceServicer):
        def GetRouteInfo(self, request, context):
            entered.set()
            release.wait(30)
            return nameserver_pb2.TopicRouteData()

        def GetAllTopics(self, request, context):
            return nameserver_pb2.TopicList(topics=["t"])

    rt = ServiceRuntime("slow", ServiceSettings(metrics_port=-1, shutdown_grace_s=0), tracing=False)
    rt.add(nameserver_pb2_grpc.add_NameServerServiceServicer_to_server, SlowNameServer())
    rt.start()
    try:
        client = RpcClient(f"127.0.0.1:{rt.port}", nameserver_pb2_grpc.NameServerServiceStub,
                           timeout=30)
        slow = threading.Thread(target=client.call, args=(
            "GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic="t")))
        slow.start()
        assert entered.wait(10)
        # Answered while the slow call is still in flight: it would deadlock on a held lock.
        assert list(client.call("GetAllTopics", nameserver_pb2.GetAllTopicsRequest(),
                                timeout=5).topics) == ["t"]
        assert slow.is_alive()
        release.set()
        slow.join(10)
    finally:
        release.set()
        rt.stop()


def test_aio_runtime_stops_while_a_plain_handler_still_blocks():
    """Like the threaded server, stop() does not wait for a pool handler past the grace (a
    JoinGroup is only released by the coordinator's stop, which runs after the server's)."""
    import threading

    entered, release = threading.Event(), threading.Event()

    class BlockingNameServer(nameserver_pb2_grpc.NameServerServiceServicer):
        def GetRouteInfo(self, request, context):
            entered.set()
            release.wait(60)
            return nameserver_pb2.TopicRouteData()

    rt = ServiceRuntime("blocking", ServiceSettings(metrics_port=-1, shutdown_grace_s=0),
                        tracing=False, aio=True)
    rt.add(nameserver_pb2_grpc.add_NameServerServiceServicer_to_server, BlockingNameServer())
    rt.start()
    try:
        client = RpcClient(f"127.0.0.1:{rt.port}", nameserver_pb2_grpc.NameServerServiceStub,
                           timeout=60)
        caller = threading.Thread(target=lambda: pytest.raises(
            errors.TideMQError, client.call, "GetRouteInfo",
            nameserver_pb2.GetRouteInfoRequest(topic="t")))
        caller.start()
        assert entered.wait(10)
        stopper = threading.Thread(target=rt.stop)
        stopper.start()
        stopper.join(30)
        assert not stopper.is_alive(), "stop() waited for the blocked handler"
        assert not release.is_set()
    finally:
        release.set()
    caller.join(30)


def test_servers_accept_the_keepalive_pings_their_clients_send():
    """A server that accepts fewer pings than a client sends over a quiet call (a long poll)
    ends the connection with GOAWAY too_many_pings; gRPC's own default accepts one per 5 min."""
    client, server = dict(GRPC_OPTIONS), dict(SERVER_GRPC_OPTIONS)
    assert client.get("grpc.keepalive_permit_without_calls", 0) == 0  # pings only during calls
    assert (server["grpc.http2.min_recv_ping_interval_without_data_ms"]
            <= client["grpc.keepalive_time_ms"])
    assert server["grpc.http2.max_ping_strikes"] == 0  # nor for pings that come closer
