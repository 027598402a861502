"""The HTTP gateway's quota hook over the HTTP contract (a stand-in backend, in-memory
counters): 429 problem+json THROTTLED with Retry-After, fetches charged by their answer's
bytes, routes outside /v1 never charged, and a failing quota store letting requests through.
The shared-Redis path runs against real processes in tests/integration/gateway."""

from __future__ import annotations

from limits.errors import StorageError
from limits.storage import MemoryStorage
from tidemq.common.quotas import CLIENT, QuotaEntry, QuotaTable
from tidemq.gateway.app import create_app
from tidemq.gateway.quotas import HttpQuotas, kind_of
from tidemq.gateway.settings import GatewaySettings

from tests.unit.gateway.test_http_api import MAX_MESSAGE_SIZE, StubBackend


def app_with(entries, storage=None):
    backend = StubBackend()
    backend.quotas = HttpQuotas(storage or MemoryStorage())
    backend.quotas.table = QuotaTable(entries)
    return create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE)).test_client()


def test_routes_map_to_the_byte_quota_they_charge():
    assert kind_of("POST", "/v1/topics/<topic>/messages") == "producer_byte_rate"
    assert kind_of("GET", "/v1/topics/<topic>/queues/<broker>/<int:queue_id>/messages") == \
        "consumer_byte_rate"
    assert kind_of("POST", "/v1/groups/<group>/topics/<topic>/pop") == "consumer_byte_rate"
    assert kind_of("GET", "/v1/topics") is None


def test_over_the_request_rate_is_429_with_retry_after_and_others_pass():
    client = app_with([QuotaEntry(CLIENT, "app", {"request_rate": 0.3})])  # 3 per 10 s
    codes = [client.get("/v1/topics", headers={"X-TideMQ-Client-Id": "app"}).status_code
             for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    refused = client.get("/v1/topics", headers={"X-TideMQ-Client-Id": "app"})
    problem = refused.get_json(force=True)
    assert refused.mimetype == "application/problem+json" and problem["code"] == "THROTTLED"
    assert 1 <= int(refused.headers["Retry-After"]) <= 10
    assert client.get("/v1/topics", headers={"X-TideMQ-Client-Id": "other"}).status_code == 200
    for _ in range(5):   # not /v1: never charged
        assert client.get("/healthz", headers={"X-TideMQ-Client-Id": "app"}).status_code == 200


def test_a_fetch_is_charged_its_answer_then_refused_until_the_window_frees():
    client = app_with([QuotaEntry(CLIENT, "reader", {"consumer_byte_rate": 20})])  # 200 B
    url = "/v1/topics/orders/queues/broker-a/0/messages?offset=0&max=2"
    first = client.get(url, headers={"X-TideMQ-Client-Id": "reader"})
    assert first.status_code == 200 and len(first.get_data()) > 200  # one answer spends it
    second = client.get(url, headers={"X-TideMQ-Client-Id": "reader"})
    assert second.status_code == 429 and "consumer_byte_rate" in second.get_json()["detail"]


class BrokenStorage(MemoryStorage):
    def incr(self, *args, **kwargs):
        raise StorageError(ConnectionError("redis is down"))

    def get_sliding_window(self, *args, **kwargs):
        raise StorageError(ConnectionError("redis is down"))

    def acquire_sliding_window_entry(self, *args, **kwargs):
        raise StorageError(ConnectionError("redis is down"))


def test_a_failing_quota_store_never_refuses():
    client = app_with([QuotaEntry(CLIENT, "app", {"request_rate": 0.1})], BrokenStorage())
    for _ in range(5):
        assert client.get("/v1/topics", headers={"X-TideMQ-Client-Id": "app"}).status_code == 200
