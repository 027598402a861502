"""The web console (`/console` on the HTTP gateway) in headless Chromium against real
processes: the config center's store, config center, two name servers, one broker group, the gateway (whose traces
go to an endpoint where nothing listens: the tracing service is down, the console works).

Every page loads without a browser console error and is screenshotted (the folder is printed);
a topic created here is shown; a group's lag is the figure `tidemq group describe` prints,
before and after a reset done through the console's confirmation step; a message is found by
key and links to its journey and its producer's trace on the tracing dashboard; text from
messages is escaped; a dead letter is re-driven through the console; the cluster page's
control-plane section shows the config center and its etcd member as `tidemq cluster
control-plane` reports them.
"""

from __future__ import annotations

import json
import subprocess
from urllib.parse import quote

import pytest
import requests
from tidemq.common.rpc import RpcClient
from tidemq.v1 import broker_pb2, broker_pb2_grpc

from tests.support.cli import TIDEMQ
from tests.support.cluster import running_cluster
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC = "ConsoleOrders"
LAG_GROUP, DLQ_GROUP, MEMBER_GROUP = "console-lagging", "console-dlq", "console-member"
TRACE_UI = "http://127.0.0.1:1/tracing"        # nothing listens there
HOSTILE_KEY = "<script>window.pwned=1</script>"
HOSTILE_BODY = "<img src=x onerror=\"window.pwned = 2\"> & <b>bold</b>"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("console"),
                         broker_names=("broker-a",)) as cluster:
        cluster.start_gateway(workers=1, extra=[
            "--trace-ui-url", TRACE_UI, "--otlp-endpoint", "127.0.0.1:1"])
        created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                json={"name": TOPIC, "queues": 2}, timeout=30)
        assert created.status_code == 201, created.text
        yield cluster


@pytest.fixture(scope="module")
def sent(cluster):
    """order-1 (its send response: msg id, and the request's trace id), the hostile one, and
    a few more; keyed by key."""
    response = requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages", json={
        "messages": [{"body": "first order", "key": "order-1", "tag": "new"},
                     {"body": HOSTILE_BODY, "key": HOSTILE_KEY},
                     *({"body": f"filler {i}", "key": f"filler-{i}"} for i in range(4))]},
        timeout=30)
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    return {"order-1": {**results[0], "trace_id": response.headers["X-Trace-Id"]},
            HOSTILE_KEY: results[1]}


def url(cluster, path: str) -> str:
    return f"{cluster.gateway_url}/console{path}"


def cli_describe(cluster, group: str) -> dict:
    completed = subprocess.run(
        [TIDEMQ, "--namesrv", cluster.namesrv_addrs, "--config-center",
         cluster.config_center.addr, "-o", "json", "group", "describe", group],
        capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def lag_cells(page) -> dict[tuple[str, int], str]:
    rows = page.locator("#offsets tbody tr").all()
    cells = [([c.inner_text() for c in row.locator("td").all()], row.locator("td.lag"))
             for row in rows]
    return {(c[1], int(c[2])): lag.inner_text() for c, lag in cells}


def test_every_page_loads_and_shows_the_topic(cluster, sent, visit):
    page = visit(url(cluster, "/"), "cluster")
    brokers = page.locator("#brokers").inner_text()
    assert "broker-a" in brokers and "MASTER" in brokers
    assert cluster.brokers["broker-a"].addr in brokers
    assert page.locator("#no-controller").is_visible()   # no replication in this cluster

    page = visit(url(cluster, "/topics"), "topics")
    page.click(f"#topics a:text-is('{TOPIC}')")
    page = visit.snap("topic")
    assert page.locator("h1").inner_text() == f"Topic {TOPIC}"
    queues = page.locator("#queues tbody tr")
    assert queues.count() == 2
    described = requests.get(f"{cluster.gateway_url}/v1/topics/{TOPIC}", timeout=30).json()
    assert sum(q["max_offset"] for q in described["queues"]) == 6
    assert "6 messages stored" in page.locator("main").inner_text()
    assert "msg/s" in page.locator("#throughput").inner_text()

    visit(url(cluster, "/groups"), "groups")
    visit(url(cluster, "/messages"), "messages")
    visit(url(cluster, "/dlq"), "dlq")
    page = visit(url(cluster, "/config"), "config")
    key = f"/tidemq/topics/{TOPIC}"
    page.click(f"#keys a:text-is('{key}')")
    page = visit.snap("config-key")
    assert json.loads(page.locator("#value").inner_text())["queues"] == 2
    assert page.locator("#history tbody tr").first.inner_text().split("\t")[1] == "PUT"


def test_the_control_plane_section_is_the_clis_report(cluster, visit):
    completed = subprocess.run(
        [TIDEMQ, "--config-center", cluster.config_center.addr, "-o", "json", "cluster",
         "control-plane"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    (member,) = report["store"]["members"]   # the test cluster's store is one etcd member
    assert member["reachable"] and member["leader"]
    assert report["store"]["leader"] == member["name"]
    answered = requests.get(f"{cluster.gateway_url}/v1/cluster/control-plane", timeout=30)
    assert answered.status_code == 200, answered.text
    assert answered.json()["config_centers"] == report["config_centers"]

    page = visit(url(cluster, "/cluster"), "cluster-control-plane")
    assert page.locator("#control-plane").inner_text() == "Control plane"
    centers = [row.locator("td").all_inner_texts()
               for row in page.locator("#config-centers tbody tr").all()]
    assert [c[:2] for c in centers] == [[cluster.config_center.addr, "yes"]]
    members = [row.locator("td").all_inner_texts()
               for row in page.locator("#etcd-members tbody tr").all()]
    assert [m[:4] for m in members] == [[member["name"], member["endpoint"], "yes", "leader"]]
    assert members[0][5] == str(member["raft_term"])
    assert report["store"]["target"] in page.locator("#store-target").inner_text()
    assert page.locator("#single-member").is_visible()   # no fault tolerance, said so
    assert page.locator("#no-leader").count() == 0
    assert page.locator("#control-plane-problem").count() == 0


def test_group_lag_is_the_clis_figure_before_and_after_a_confirmed_reset(cluster, sent, visit):
    broker = RpcClient(cluster.brokers["broker-a"].addr, broker_pb2_grpc.BrokerServiceStub,
                       timeout=20)
    broker.call("CommitOffsets", broker_pb2.CommitOffsetsRequest(
        consumer_group=LAG_GROUP, generation_id=-1,
        offsets=[broker_pb2.QueueOffset(topic=TOPIC, queue_id=q, offset=1) for q in (0, 1)]))
    cli = cli_describe(cluster, LAG_GROUP)
    assert cli["total_lag"] == 4   # 6 messages over two queues, one consumed from each

    page = visit(url(cluster, f"/groups/{LAG_GROUP}"), "group")
    assert page.locator("#total-lag").inner_text() == str(cli["total_lag"])
    assert lag_cells(page) == {(o["broker_name"], o["queue_id"]): str(o["lag"])
                               for o in cli["offsets"]}

    page.fill("#reset-form input[name=to]", "2099-01-01T00:00:00")
    page.click("#reset-form button")
    page = visit.snap("group-reset-confirm")
    assert "Confirm" in page.locator("h1").inner_text()
    assert cli_describe(cluster, LAG_GROUP)["total_lag"] == 4   # nothing happened yet
    page.click("#confirm-form button")
    page = visit.snap("group-reset-done")
    assert page.locator("#reset-offsets tbody tr").count() == 2

    page = visit(url(cluster, f"/groups/{LAG_GROUP}"), "group-after-reset")
    after = cli_describe(cluster, LAG_GROUP)
    assert after["total_lag"] == 0
    assert page.locator("#total-lag").inner_text() == "0"
    assert lag_cells(page) == {(o["broker_name"], o["queue_id"]): "0" for o in after["offsets"]}


def test_a_message_found_by_key_links_to_its_trace(cluster, sent, visit):
    order = sent["order-1"]
    page = visit(url(cluster, "/messages"), "messages-search")
    page.fill("#search input[name=topic]", TOPIC)
    page.fill("#search input[name=key]", "order-1")
    page.click("#search button")
    page = visit.snap("messages-by-key")
    rows = page.locator("#found tbody tr")
    assert rows.count() == 1
    assert order["msg_id"] in rows.inner_text() and "first order" in rows.inner_text()
    journey = f"{TRACE_UI}/messages?msg_id={order['msg_id']}"
    assert rows.locator("a.trace-link").get_attribute("href") == journey

    rows.locator(f"a:text-is('{order['msg_id']}')").click()
    page = visit.snap("message")
    assert page.locator("#trace-message").get_attribute("href") == journey
    assert page.locator("#trace-producer").get_attribute("href") == \
        f"{TRACE_UI}/traces/{order['trace_id']}"

    page = visit(url(cluster, f"/messages?msg_id={order['msg_id']}"), "message-by-id")
    assert page.locator("h1").inner_text() == f"Message {order['msg_id']}"


def test_text_from_messages_is_escaped(cluster, sent, visit):
    page = visit(url(cluster, f"/messages?topic={TOPIC}&key={quote(HOSTILE_KEY)}"),
                 "messages-hostile-key")
    assert page.locator("#found td.keys").inner_text() == HOSTILE_KEY
    assert page.locator("#found td.body").inner_text() == HOSTILE_BODY
    page = visit(url(cluster, f"/messages/{sent[HOSTILE_KEY]['msg_id']}"), "message-hostile")
    assert page.locator("#message td.keys").inner_text() == HOSTILE_KEY
    assert page.locator("#message pre.body").inner_text() == HOSTILE_BODY
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.locator("main script, main img").count() == 0


def test_a_dead_letter_is_redriven_after_confirmation(cluster, sent, visit):
    api = cluster.gateway_url
    created = requests.post(f"{api}/v1/groups", json={"name": DLQ_GROUP, "retry_max_times": 0},
                            timeout=30)
    assert created.status_code == 201, created.text

    def dead_letters():
        requests.post(f"{api}/v1/groups/{DLQ_GROUP}/topics/{TOPIC}/pop",   # never acked
                      json={"max": 32, "invisible_ms": 1000}, timeout=30)
        return requests.get(f"{api}/v1/groups/{DLQ_GROUP}/dlq", timeout=30).json()["messages"]

    wait_until(dead_letters, 60, interval=0.5, message="a dead letter of " + DLQ_GROUP)
    letter = dead_letters()[0]

    page = visit(url(cluster, "/dlq"), "dlq-empty-form")
    page.fill("#dlq-group input[name=group]", DLQ_GROUP)
    page.click("#dlq-group button")
    page = visit.snap("dlq-group")
    assert letter["msg_id"] in page.locator("#dead-letters").inner_text()
    page.check(f"#dead-letters input[value='{letter['msg_id']}']")
    page.click("#redrive-form button:not([name])")
    page = visit.snap("dlq-redrive-confirm")
    assert letter["msg_id"] in page.locator("main ul").inner_text()
    page.click("#confirm-form button")
    page = visit.snap("dlq-redriven")
    done = page.locator("#redriven tbody tr").inner_text()
    assert letter["msg_id"] in done and TOPIC in done


def test_a_groups_members_and_assignment_are_the_clis(cluster, sent, visit):
    """One member joins through the coordinator RPCs and is assigned both queues."""
    from tidemq.client.admin import coordinator_for

    coordinator = cluster.brokers[coordinator_for(MEMBER_GROUP, cluster.brokers)]
    rpc = RpcClient(coordinator.addr, broker_pb2_grpc.BrokerServiceStub, timeout=20)
    joined = rpc.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id=MEMBER_GROUP, session_timeout_ms=60_000, rebalance_timeout_ms=10_000,
        client_id="console-test", client_host="127.0.0.1",
        protocols=[broker_pb2.GroupProtocol(name="averagely",
                                            metadata=json.dumps({"topics": [TOPIC]}).encode())]))
    queues = [[TOPIC, "broker-a", i] for i in range(2)]
    rpc.call("SyncGroup", broker_pb2.SyncGroupRequest(
        group_id=MEMBER_GROUP, generation_id=joined.generation_id, member_id=joined.member_id,
        assignments=[broker_pb2.MemberAssignment(
            member_id=joined.member_id, assignment=json.dumps({"queues": queues}).encode())]))
    try:
        cli = cli_describe(cluster, MEMBER_GROUP)
        page = visit(url(cluster, "/groups"), "groups-live")
        page.click(f"#live-groups a:text-is('{MEMBER_GROUP}')")
        page = visit.snap("group-with-member")
        cells = page.locator("#members tbody tr td").all_inner_texts()
        (member,) = cli["members"]
        # a native (not Kafka) member: no client software, no Kafka assignment
        assert cells == [f"{member['member_id']} (leader)", "console-test", "127.0.0.1", "-",
                         TOPIC, " ".join(member["queues"]), "-"]
        assert page.locator("#total-lag").inner_text() == str(cli["total_lag"])
        assert lag_cells(page) == {(o["broker_name"], o["queue_id"]):
                                   "-" if o["lag"] is None else str(o["lag"])
                                   for o in cli["offsets"]}
    finally:
        rpc.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id=MEMBER_GROUP,
                                                            member_id=joined.member_id))
