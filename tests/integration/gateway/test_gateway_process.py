"""The gateway as deployed: gunicorn with two workers over real name servers and a broker."""

from __future__ import annotations

import base64
import json
import re

import pytest
import requests

from tests.support.cluster import running_cluster
from tests.support.processes import wait_until

TOPIC = "GatewayTopic"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("gateway"),
                         broker_names=("broker-a",)) as cluster:
        cluster.start_gateway(workers=2)
        created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                json={"name": TOPIC, "queues": 2}, timeout=30)
        assert created.status_code == 201, created.text
        yield cluster


def test_topic_list_and_description(stack):
    url = stack.gateway_url
    topics = requests.get(f"{url}/v1/topics", timeout=10).json()["topics"]
    assert {"name": TOPIC, "queues": 2, "perm": 6, "order": False} in topics
    described = requests.get(f"{url}/v1/topics/{TOPIC}", timeout=10).json()
    assert described["brokers"][0]["broker_name"] == "broker-a"
    assert described["brokers"][0]["addrs"]["0"] == stack.brokers["broker-a"].addr
    assert [(q["queue_id"], q["min_offset"]) for q in described["queues"]] == [(0, 0), (1, 0)]


def test_the_printed_address_leads_to_the_console_and_an_index(stack):
    """`make up` prints the gateway's bare address: a browser lands on the console."""
    url = stack.gateway_url
    browser = requests.get(f"{url}/", headers={"Accept": "text/html,*/*;q=0.8"}, timeout=10)
    assert browser.status_code == 200 and browser.url.startswith(f"{url}/console/")
    assert "text/html" in browser.headers["Content-Type"]
    index = requests.get(f"{url}/", timeout=10)
    assert index.status_code == 200 and index.json()["console"] == "/console/"
    assert requests.get(url + index.json()["openapi"], timeout=10).json()["openapi"]


def test_binary_and_text_bodies_round_trip_with_properties(stack):
    url = stack.gateway_url
    binary = bytes(range(256)) * 40  # > 4 KiB: compressed on the wire
    sent = requests.post(f"{url}/v1/topics/{TOPIC}/messages", json={"messages": [
        {"body": base64.b64encode(binary).decode(), "encoding": "base64", "tag": "bin"},
        {"body": "zürich ✓", "key": "city", "properties": {"lang": "de"}},
    ]}, timeout=10)
    assert sent.status_code == 201, sent.text
    fetched = {}
    for result in sent.json()["results"]:
        assert re.fullmatch(r"[0-9A-F]{32}", result["msg_id"])
        page = requests.get(
            f"{url}/v1/topics/{TOPIC}/queues/broker-a/{result['queue_id']}/messages",
            params={"offset": result["queue_offset"], "max": 1, "wait_ms": 5000},
            timeout=10).json()  # long poll: the broker indexes new records asynchronously
        (message,) = page["messages"]
        assert message["unique_id"] == result["unique_id"] and message["msg_id"] == result["msg_id"]
        assert page["next_offset"] == result["queue_offset"] + 1
        fetched[message["unique_id"]] = message
    first, second = (fetched[r["unique_id"]] for r in sent.json()["results"])
    assert first["encoding"] == "base64" and base64.b64decode(first["body"]) == binary
    assert first["tag"] == "bin"
    assert second["body"] == "zürich ✓" and "encoding" not in second
    assert second["keys"] == ["city"] and second["properties"] == {"lang": "de"}


def test_an_empty_queue_answers_no_new_messages(stack):
    url = stack.gateway_url
    offsets = requests.get(f"{url}/v1/topics/{TOPIC}", timeout=10).json()["queues"]
    end = offsets[0]["max_offset"]
    page = requests.get(f"{url}/v1/topics/{TOPIC}/queues/broker-a/0/messages",
                        params={"offset": end, "wait_ms": 100}, timeout=10).json()
    assert page["messages"] == [] and page["status"] in ("NO_NEW_MSG", "OFFSET_ILLEGAL")
    response = requests.get(f"{url}/v1/topics/{TOPIC}/queues/broker-a/7/messages", timeout=10)
    assert response.status_code == 404 and response.json()["code"] == "QUEUE_NOT_FOUND"


def test_metrics_add_up_over_every_worker(stack):
    url = stack.gateway_url

    def healthz_count() -> float:
        text = requests.get(f"{url}/metrics", timeout=10).text
        match = re.search(r'tidemq_gateway_http_requests_total\{endpoint="/healthz",'
                          r'method="GET",status="200"\} ([0-9.e+]+)', text)
        return float(match.group(1)) if match else 0.0

    before = healthz_count()
    for _ in range(20):  # a new connection each time: requests spread over both workers
        assert requests.get(f"{url}/healthz", timeout=10).json() == {"status": "ok"}
    assert healthz_count() == before + 20
    # The dedicated --metrics-port listener serves the same aggregated text.
    metrics_port = stack.gateway.metrics_port
    assert metrics_port and metrics_port != stack.gateway.port
    text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    assert 'tidemq_gateway_http_requests_total{endpoint="/healthz"' in text


def test_oversized_request_body_is_413_through_gunicorn(stack):
    url = stack.gateway_url
    payload = json.dumps({"messages": [{"body": "x" * (6 * 1024 * 1024)}]})
    response = requests.post(f"{url}/v1/topics/{TOPIC}/messages", data=payload,
                             headers={"Content-Type": "application/json"}, timeout=30)
    assert response.status_code == 413
    assert response.json()["code"] in ("PAYLOAD_TOO_LARGE", "MESSAGE_TOO_LARGE")


def test_delete_topic_over_http_as_the_cli_does(stack):
    """HTTP has DELETE /v1/topics/{topic} like `tidemq topic delete`, and describes a topic
    with the CLI's vocabulary (name, brokers as a list of broker_name entries, tag)."""
    from tidemq.client.admin import Admin

    url = stack.gateway_url
    assert requests.post(f"{url}/v1/topics", json={"name": "HttpDoomed", "queues": 1},
                         timeout=30).status_code in (201, 202)
    sent = requests.post(f"{url}/v1/topics/HttpDoomed/messages", json={"messages": [
        {"body": "x", "tag": "t1"}]}, timeout=10).json()["results"][0]
    page = requests.get(f"{url}/v1/topics/HttpDoomed/queues/{sent['broker_name']}/"
                        f"{sent['queue_id']}/messages", params={"offset": 0}, timeout=10).json()
    assert page["messages"][0]["tag"] == "t1"
    described = requests.get(f"{url}/v1/topics/HttpDoomed", timeout=10).json()
    assert described["name"] == "HttpDoomed" and described["brokers"][0]["broker_name"]

    deleted = requests.delete(f"{url}/v1/topics/HttpDoomed", timeout=10)
    assert deleted.status_code == 200 and deleted.json() == {
        "name": "HttpDoomed", "deleted": True, "offsets_dropped_for": []}
    with Admin(stack.namesrv_addrs, config_center=stack.config_center.addr) as admin:
        assert "HttpDoomed" not in {t.name for t in admin.list_topics()}
    again = requests.delete(f"{url}/v1/topics/HttpDoomed", timeout=10)
    assert again.status_code == 404 and again.json()["code"] == "TOPIC_NOT_EXIST"


def _commit_offsets(stack, topic: str, group: str) -> None:
    from tidemq.client import PullConsumer

    with PullConsumer(stack.namesrv_addrs, consumer_group=group) as consumer:
        for mq in consumer.fetch_queues(topic):
            consumer.commit(mq, 0)


def test_a_deleted_topics_offsets_go_with_it_unless_kept_as_the_cli_does(stack):
    url = stack.gateway_url
    for topic in ("HttpOffsetsGone", "HttpOffsetsKept"):
        assert requests.post(f"{url}/v1/topics", json={"name": topic, "queues": 1},
                             timeout=30).status_code in (201, 202)
        wait_until(lambda t=topic: _try_commit(stack, t, "http-offsets"), 30,
                   message=f"a committed offset of {topic}")
    gone = requests.delete(f"{url}/v1/topics/HttpOffsetsGone", timeout=30).json()
    assert gone["offsets_dropped_for"] == ["http-offsets"]
    kept = requests.delete(f"{url}/v1/topics/HttpOffsetsKept",
                           params={"keep_offsets": "true"}, timeout=30).json()
    assert kept["offsets_dropped_for"] == []

    def kept_offsets() -> list[dict]:
        return requests.get(f"{url}/v1/consumer-groups/http-offsets", timeout=30).json()["offsets"]

    assert {o["topic"] for o in kept_offsets()} == {"HttpOffsetsKept"}
    # orphaned once the brokers have seen the topic go (it reaches them by the config watch)
    wait_until(lambda: all(o["orphaned"] for o in kept_offsets()), 30,
               message="the kept offsets shown as orphaned")
    dropped = requests.delete(f"{url}/v1/consumer-groups/http-offsets/offsets/HttpOffsetsKept",
                              timeout=30)
    assert dropped.status_code == 200 and dropped.json()["brokers"], dropped.text
    described = requests.get(f"{url}/v1/consumer-groups/http-offsets", timeout=30)
    assert (described.status_code, described.json().get("code")) == (
        404, "GROUP_ID_NOT_FOUND"), described.text   # no offsets, no members: unknown
    bad = requests.delete(f"{url}/v1/consumer-groups/http-offsets/offsets/bad%20name",
                          timeout=30)
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_TOPIC"


def _try_commit(stack, topic: str, group: str) -> bool:
    from tidemq.common import errors

    try:
        _commit_offsets(stack, topic, group)
    except errors.TideMQError:
        return False   # the route is not on every group yet
    return True


def test_parked_long_polls_leave_threads_for_acks_sends_and_health(stack):
    """A worker of 12 threads parks at most 8 long polls; the rest are answered at once: with
    nothing to return, refused with 429 and Retry-After (an empty 200 would have a looping
    client ask again at once), a pop or a read without wait_ms as before. /healthz and sends
    are served while the 8 still wait."""
    from concurrent.futures import ThreadPoolExecutor

    from tidemq.gateway.long_polls import RESERVED_THREADS

    gateway = stack.start("tidemq.gateway", [
        "--namesrv-addrs", stack.namesrv_addrs, "--config-center", stack.config_center.addr,
        "--workers", "1", "--threads", "12", "--max-pull-wait-ms", "60000"])
    url = f"http://127.0.0.1:{gateway.port}"
    created = requests.post(f"{url}/v1/topics", json={"name": "ParkedTopic", "queues": 1},
                            timeout=30)
    assert created.status_code == 201, created.text  # empty: every pop waits
    parked = 12 - RESERVED_THREADS
    with ThreadPoolExecutor(16) as pool:
        polls = [pool.submit(requests.post, f"{url}/v1/groups/g-parked/topics/ParkedTopic/pop",
                             json={"max": 1, "wait_ms": 60_000}, timeout=90)
                 for _ in range(parked + 4)]
        answered = wait_until(lambda: [p for p in polls if p.done()] if sum(
            p.done() for p in polls) >= 4 else None, 30, message="the polls beyond the slots")
        for refused in (p.result() for p in answered):
            assert refused.status_code == 429, refused.text
            assert refused.headers["Retry-After"] == "1"
            assert refused.json()["code"] == "LONG_POLLS_EXHAUSTED"
        fetched = requests.get(f"{url}/v1/topics/ParkedTopic/queues/broker-a/0/messages",
                               params={"wait_ms": 5000}, timeout=30)
        assert fetched.status_code == 429 and fetched.json()["code"] == "LONG_POLLS_EXHAUSTED"
        unwaited = requests.post(f"{url}/v1/groups/g-parked/topics/ParkedTopic/pop",
                                 json={"max": 1}, timeout=30)
        assert unwaited.status_code == 200 and unwaited.json() == {"messages": []}
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200
        sent = requests.post(f"{url}/v1/topics/ParkedTopic/messages",
                             json={"messages": [{"body": "wake one"}]}, timeout=10)
        assert sent.status_code == 201, sent.text
        assert sum(not p.done() for p in polls) >= parked - 1  # one may take the message
        woken = wait_until(lambda: next((p for p in polls if p.done() and p.result().json().get(
            "messages")), None), 30, message="a parked poll receiving the message")
        assert woken.result().json()["messages"][0]["body"] == "wake one"
        gateway.kill()  # ends the other parked polls


def test_sigterm_drains_and_exits_cleanly(stack):
    assert stack.gateway.stop() == 0

