"""gateway-grpc's per-client throttle (throttles.py): a RocketMQ client's broker calls are
made on its behalf (its x-mq-client-id, its signed user), and a throttle time a broker
answered it makes only that client's next call wait."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import REGISTRY
from tidemq.common.quotas import CALLER, END_CLIENT, Caller
from tidemq.gatewaygrpc.throttles import ClientThrottles


def context(client_id: str) -> SimpleNamespace:
    return SimpleNamespace(invocation_metadata=lambda: (("x-mq-language", "PYTHON"),
                                                        ("x-mq-client-id", client_id)))


def test_calls_are_made_for_the_rocketmq_client_and_its_signed_user():
    CALLER.set(Caller("alice", ""))
    try:
        with ClientThrottles().calls_for(context("host@1@0@abc")) as end:
            assert END_CLIENT.get() is end
            assert end.metadata == {"tidemq-on-behalf-of": "user:alice",
                                    "tidemq-client-id": "host@1@0@abc"}
    finally:
        CALLER.set(Caller())
    assert END_CLIENT.get() is None
    with ClientThrottles().calls_for(SimpleNamespace(invocation_metadata=lambda: ())) as end:
        assert end.metadata == {"tidemq-on-behalf-of": "anonymous"}   # no id, unsigned


def waited() -> float:
    return REGISTRY.get_sample_value("tidemq_gateway_grpc_throttle_wait_seconds_total") or 0.0


def test_a_throttle_time_delays_only_that_clients_next_call():
    throttles = ClientThrottles()
    with throttles.calls_for(context("noisy")) as end:
        end.note_throttle(1000)
    assert 0 < throttles.remaining(("", "noisy")) <= 1.0
    before = waited()
    with throttles.calls_for(context("quiet")):
        pass
    assert waited() == before, "another client of the gateway does not wait"
    with throttles.calls_for(context("noisy")):
        assert throttles.remaining(("", "noisy")) == 0   # waited out before its calls
    assert waited() > before
