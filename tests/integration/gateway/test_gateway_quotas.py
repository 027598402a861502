"""The HTTP gateway's client quotas with real processes (gunicorn, two workers, Redis): a
caller over its quota is answered 429 problem+json THROTTLED with Retry-After; the two
workers count in one Redis, so a burst spread over both is held to one quota, not one each;
another client is not affected; a produce is charged its body's bytes."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import requests
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.quotas import QuotaAdmin

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

WORKERS = 2
TOPIC = "http-quota"
HEADER = "X-TideMQ-Client-Id"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("gateway-quota"),
                         broker_names=("broker-a",)) as cluster:
        cluster.start_gateway(workers=WORKERS)
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        yield cluster


def workers_loaded(stack, entities: int) -> bool:
    """Both workers logged reading a quota table of `entities` entities."""
    pids = set()
    for line in stack.gateway.log.read_text(errors="replace").splitlines():
        if "quotas loaded" in line and f"entities={entities}" in line:
            found = re.search(r"pid=(\d+)", line)
            if found:
                pids.add(found.group(1))
    return len(pids) == WORKERS


def test_a_caller_over_its_quota_gets_429_with_retry_after_counted_across_workers(stack):
    admin = QuotaAdmin(ConfigClient(stack.config_center.addr))
    admin.set("client", "http-app", {"request_rate": 1})             # 10 per 10 s window
    admin.set("client", "http-producer", {"producer_byte_rate": 10_000})  # 100 kB per window
    wait_until(lambda: workers_loaded(stack, 2), 60, message="both workers to load the quotas")

    url = f"{stack.gateway_url}/v1/topics"
    with requests.Session() as session, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(
            lambda _: session.get(url, headers={HEADER: "http-app"}, timeout=30), range(30)))
    accepted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert len(accepted) + len(refused) == 30, {a.status_code for a in answers}
    # one Redis counter for both workers: per-worker counting would let up to 20 through
    assert 1 <= len(accepted) <= 11, len(accepted)
    problem = refused[0].json()
    assert refused[0].headers["Content-Type"].startswith("application/problem+json")
    assert problem["code"] == "THROTTLED" and problem["status"] == 429
    assert "client:http-app is over its request_rate quota of 1 requests/s" in problem["detail"]
    assert 1 <= int(refused[0].headers["Retry-After"]) <= 10
    assert requests.get(url, headers={HEADER: "someone-else"}, timeout=30).status_code == 200
    keys = redis.Redis.from_url(stack.redis.url).keys("tidemq-quota*")
    assert keys, "the counters live in Redis"

    messages = f"{stack.gateway_url}/v1/topics/{TOPIC}/messages"
    batch = {"messages": [{"body": "x" * 30_000} for _ in range(2)]}   # ~60 kB a request
    first = requests.post(messages, json=batch, headers={HEADER: "http-producer"}, timeout=30)
    assert first.status_code == 201, first.text
    second = requests.post(messages, json=batch, headers={HEADER: "http-producer"}, timeout=30)
    assert second.status_code == 429, second.text
    assert second.json()["code"] == "THROTTLED" and "producer_byte_rate" in second.text
    assert int(second.headers["Retry-After"]) >= 1
