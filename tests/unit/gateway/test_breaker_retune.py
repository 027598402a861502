"""Live breaker thresholds: rpc.retune_breakers changes existing and future breakers, and the
gateway's follower parses, checks and applies breaker_fail_max / breaker_reset_s."""

from __future__ import annotations

import pybreaker
import pytest
from tidemq.common import errors, rpc
from tidemq.configclient.live import DynamicSettingsFollower
from tidemq.gateway.dynamic import BREAKER_RULES, apply_breaker_setting
from tidemq.v1 import config_pb2, config_pb2_grpc

from tests.support.processes import dead_endpoint


@pytest.fixture
def restore_tuning():
    saved = dict(rpc._retuned)
    yield
    rpc._retuned.clear()
    rpc._retuned.update(saved)


def dead_client() -> rpc.RpcClient:
    return rpc.RpcClient(dead_endpoint(), config_pb2_grpc.ConfigServiceStub,
                         timeout=1.0, retries=0,
                         breaker=rpc.BreakerSettings(fail_max=5, reset_timeout_s=60))


def fail_once(client: rpc.RpcClient) -> type[errors.TideMQError]:
    with pytest.raises(errors.ServiceUnavailable) as err:
        client.call("Get", config_pb2.GetRequest(key="/k"))
    return type(err.value)


def test_an_existing_breaker_opens_at_the_new_fail_max(restore_tuning):
    client = dead_client()
    assert fail_once(client) is errors.ServiceUnavailable  # 1 of 5: still closed
    assert client._breaker.current_state == pybreaker.STATE_CLOSED
    assert rpc.retune_breakers(fail_max=2) >= 1
    assert fail_once(client) is errors.BreakerOpen  # the second failure now opens it
    assert client._breaker.current_state == pybreaker.STATE_OPEN
    assert fail_once(client) is errors.BreakerOpen  # fails fast while open

    rpc.retune_breakers(reset_timeout_s=0.001)  # the open period is now over: a trial call
    assert client._breaker.reset_timeout == 0.001
    assert "0.001 s" in client._open_error().message


def test_breakers_made_after_a_retune_use_the_new_thresholds(restore_tuning):
    rpc.retune_breakers(fail_max=1, reset_timeout_s=30)
    client = dead_client()  # asks for 5 / 60, the retuned values win
    assert (client._breaker.fail_max, client._breaker.reset_timeout) == (1, 30)
    assert fail_once(client) is errors.BreakerOpen


def follower(applied: list) -> DynamicSettingsFollower:
    return DynamicSettingsFollower("127.0.0.1:1", BREAKER_RULES,
                                   {"breaker_fail_max": 5, "breaker_reset_s": 10.0},
                                   lambda name, value: applied.append((name, value)))


@pytest.mark.parametrize(("name", "text"), [
    ("breaker_fail_max", "0"), ("breaker_fail_max", "two"), ("breaker_fail_max", "1.5"),
    ("breaker_fail_max", "10001"), ("breaker_reset_s", "0"), ("breaker_reset_s", "-1"),
    ("breaker_reset_s", "soon"), ("breaker_reset_s", "3601"),
])
def test_bad_values_are_refused_and_the_current_one_stays(name, text):
    applied: list = []
    live = follower(applied)
    assert live.offer(name, text) is False
    assert applied == [] and live.current == {"breaker_fail_max": 5, "breaker_reset_s": 10.0}


def test_values_apply_once_and_unset_falls_back_to_static():
    applied: list = []
    live = follower(applied)
    assert live.offer("breaker_fail_max", "2") and live.offer("breaker_fail_max", "2")
    assert live.offer("breaker_reset_s", "2.5")
    assert live.offer("breaker_fail_max", None)
    assert applied == [("breaker_fail_max", 2), ("breaker_reset_s", 2.5),
                       ("breaker_fail_max", 5)]


def test_apply_breaker_setting_retunes(restore_tuning):
    apply_breaker_setting("breaker_fail_max", 7)
    apply_breaker_setting("breaker_reset_s", 3.0)
    assert rpc._retuned == {"fail_max": 7, "reset_timeout": 3.0}
