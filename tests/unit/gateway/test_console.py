"""The console's pure helpers (form times, trace links) and its HTTP contract over a stand-in
backend: pages go through the public API (its validation answers), escape what they show,
refuse foreign-origin posts, and ask before changing state. The real cluster is in
tests/browser."""

from __future__ import annotations

import re

import pytest
from flask import request
from hypothesis import given
from hypothesis import strategies as st
from tidemq.client.message import MessageExt
from tidemq.common import errors
from tidemq.configclient import topic_settings
from tidemq.gateway.admin_routes import located_message_json, trace_id_of
from tidemq.gateway.app import create_app
from tidemq.gateway.console import pages
from tidemq.gateway.settings import GatewaySettings

TRACE_UI = "http://traces.example:16686"
HOSTILE = "<script>alert(1)</script>"
MSG_ID = "0A0B0C0D00002A9F0000000000000042"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def control_plane_json(hostile: str = HOSTILE) -> dict:
    """What `GET /v1/cluster/control-plane` answers; every text field an attacker could
    influence (an error string, a member name, an alarm) carries `hostile`."""
    def member(name, **fields):
        return {"name": name, "id": "8a1", "endpoint": f"http://{name}:2379", "reachable": True,
                "error": "", "leader": False, "raft_term": 7, "raft_index": 900,
                "raft_applied_index": 900, "lag_entries": 0, "db_size_bytes": 20480,
                "version": "3.4.23", "learner": False, "alarms": [], **fields}

    return {
        "config_centers": [
            {"address": "cc-1:7070", "reachable": True, "error": "", "version": "0.1.0",
             "advertised_addr": "cc-1:7070", "target": f"etcd {hostile!r}"},
            {"address": "cc-2:7071", "reachable": False, "error": f"down {hostile}",
             "version": "", "advertised_addr": "", "target": ""}],
        "store": {
            "reported_by": "cc-1:7070", "target": f"etcd {hostile!r}", "cluster_id": "ec0d1",
            "revision": 4242, "leader": "e1", "quorum": 2,
            "members": [
                member("e1", leader=True),
                member("e2", raft_applied_index=860, lag_entries=40, alarms=[hostile]),
                member("e3", reachable=False, error=f"refused {hostile}", raft_term=0,
                       raft_index=0, raft_applied_index=0, lag_entries=None,
                       db_size_bytes=0, version="")]}}


class StubAdmin:
    def __init__(self) -> None:
        self.resets: list[tuple] = []

    def control_plane(self):
        return control_plane_json()

    def throttled(self):
        return {"throttled": [], "unanswered": []}

    def cluster(self):
        return {"brokers": [{"cluster": "c", "broker_name": HOSTILE, "broker_id": 0,
                             "addr": "h:1", "last_update_ms": 0, "replica_id": -1, "epoch": 0,
                             "in_sync": None, "lag_bytes": None, "lag_s": None,
                             "role": "MASTER"}],
                "replication": {"controller_addr": "", "groups": [], "live_replicas": []}}

    def describe_group(self, group):
        if group == "unknown":
            raise errors.NotFound("consumer group 'unknown' is unknown",
                                  code="GROUP_ID_NOT_FOUND")
        return {"group": group, "coordinator": "broker-a", "state": "Empty", "protocol": "",
                "generation": 0, "leader": "", "members": [], "total_lag": 3, "offsets": [
                    {"topic": "orders", "broker_name": "broker-a", "queue_id": 0,
                     "committed": 2, "max_offset": 5, "member_id": "", "lag": 3,
                     "orphaned": False}]}

    def reset_offsets(self, group, topic, timestamp_ms):
        self.resets.append((group, topic, timestamp_ms))
        return [{"topic": topic, "broker_name": "broker-a", "queue_id": 0, "offset": 5}]

    def offsets_at(self, topic, timestamp_ms):
        return [{"broker_name": "broker-a", "queue_id": 0, "offset": 2}]

    def view_message(self, msg_id):
        return MessageExt("orders", HOSTILE.encode(), "t", [HOSTILE],
                          {"TRACE_CONTEXT": f"00-{TRACE_ID}-00f067aa0ba902b7-01"},
                          "broker-a", 0, 7, msg_id, "U1", 1, 2, 0)


class StubBackend:
    def __init__(self) -> None:
        self.admin = StubAdmin()

    def describe_topic(self, topic):
        return {"name": topic, "brokers": [], "unavailable_brokers": [], "queues": [
            {"broker_name": "broker-a", "queue_id": 0, "min_offset": 0, "max_offset": 5}],
                "config": topic_settings.effective({"retention.ms": 60000,
                                                    "cleanup.policy": HOSTILE})}


@pytest.fixture
def backend():
    return StubBackend()


@pytest.fixture
def client(backend):
    return create_app(backend, GatewaySettings(trace_ui_url=TRACE_UI)).test_client()


# -- helpers -----------------------------------------------------------------------------

@given(st.integers(min_value=1, max_value=253402300799999))
def test_a_form_time_shown_in_utc_reads_back_as_the_same_milliseconds(ms):
    shown = pages.utc(ms)   # what a page prints, "2026-11-24 09:30:00.123Z"
    assert pages.parse_form_time(shown, "to") == ms
    typed = (pages.EPOCH + ms * pages.MILLISECOND).isoformat(timespec="milliseconds")
    assert pages.parse_form_time(typed.removesuffix("+00:00"), "to") == ms
    assert pages.parse_form_time(str(ms), "to") == ms


def test_form_times_without_a_zone_are_utc_and_nonsense_is_a_400():
    assert pages.parse_form_time("", "to") == 0
    assert pages.parse_form_time("1970-01-01T00:00:01", "to") == 1000
    with pytest.raises(errors.InvalidArgument, match="ISO-8601"):
        pages.parse_form_time("yesterday", "to")


def test_trace_links_only_from_an_http_url():
    assert pages.trace_ui_base("javascript:alert(1)") == ""
    assert pages.trace_ui_base(TRACE_UI + "/") == TRACE_UI
    links = pages.message_trace_links(TRACE_UI, {"msg_id": MSG_ID, "trace_id": TRACE_ID})
    assert links == {"message": f"{TRACE_UI}/messages?msg_id={MSG_ID}",
                     "trace": f"{TRACE_UI}/traces/{TRACE_ID}"}
    assert pages.message_trace_links("", {"msg_id": MSG_ID}) == {}


def test_recent_counts_are_written_since_and_never_negative():
    queues = [{"broker_name": "a", "queue_id": 0, "min_offset": 0, "max_offset": 9},
              {"broker_name": "a", "queue_id": 1, "min_offset": 0, "max_offset": 4},
              {"broker_name": "b", "queue_id": 0, "min_offset": 0, "max_offset": 2}]
    then = [{"broker_name": "a", "queue_id": 0, "offset": 6},
            {"broker_name": "a", "queue_id": 1, "offset": 5}]   # read after a write landed
    counted = pages.with_recent_counts(queues, then)
    assert [q["recent"] for q in counted] == [3, 0, 0]
    assert pages.queue_totals(counted) == {"queues": 3, "stored": 15, "written": 15,
                                           "recent": 3}


@pytest.mark.parametrize("traceparent, trace_id", [
    (f"00-{TRACE_ID}-00f067aa0ba902b7-01", TRACE_ID), ("", ""), ("garbage", ""),
    ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", ""), (f"00-{TRACE_ID.upper()}-00-01", "")])
def test_trace_id_of_a_traceparent(traceparent, trace_id):
    assert trace_id_of(traceparent) == trace_id


def test_a_located_message_carries_its_trace_context():
    shown = located_message_json(StubAdmin().view_message(MSG_ID))
    assert shown["trace_id"] == TRACE_ID and shown["queue_id"] == 0
    assert shown["topic"] == "orders" and "TRACE_CONTEXT" not in shown["properties"]


# -- pages -------------------------------------------------------------------------------

def test_pages_escape_what_they_show(client):
    page = client.get("/console/cluster").get_data(as_text=True)
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    page = client.get(f"/console/messages/{MSG_ID}").get_data(as_text=True)
    assert HOSTILE not in page and page.count("&lt;script&gt;") >= 2
    assert f'href="{TRACE_UI}/messages?msg_id={MSG_ID}"' in page
    assert f'href="{TRACE_UI}/traces/{TRACE_ID}"' in page


def test_the_topic_page_shows_its_settings_and_their_sources(client):
    page = client.get("/console/topics/orders").get_data(as_text=True)
    assert 'id="settings"' in page and "retention.ms" in page and "60000" in page
    assert "delete.retention.ms" in page and "default" in page    # every setting shown
    assert HOSTILE not in page                                     # escaped


def test_the_cluster_page_shows_roles_and_the_controllers_replication_state(client, backend):
    replicated = backend.admin.cluster()
    slave = {**replicated["brokers"][0], "broker_name": "broker-a", "broker_id": 2,
             "role": "SLAVE", "replica_id": 1, "epoch": 3, "in_sync": False, "lag_bytes": 512,
             "lag_s": 1.5}
    replicated["brokers"].append(slave)
    replicated["replication"] = {
        "controller_addr": "127.0.0.1:9876",
        "groups": [{"broker_name": "broker-a", "master": 0, "epoch": 3, "in_sync": [0, 2],
                    "master_addr": "h:1"}],
        "live_replicas": [{"broker_name": "broker-a", "replica_id": 1, "addr": "h:2",
                           "epoch": 3, "log_end": 4096}]}
    backend.admin.cluster = lambda: replicated
    page = re.sub(r">\s+<", "><", client.get("/console/cluster").get_data(as_text=True))
    assert 'class="role-slave">SLAVE<' in page and "<td>512</td><td>1.5</td>" in page
    # its replica id, not the id routes know a slave by (replica id + 1; issue #41)
    assert '<td>broker-a</td><td>1</td><td class="role-slave">' in page
    assert "active controller: 127.0.0.1:9876" in page and "<td>0, 2</td>" in page
    assert "<td>4096</td>" in page and "no-controller" not in page


def test_the_cluster_page_shows_who_is_throttled(client, backend):
    page = client.get("/console/cluster").get_data(as_text=True)
    assert 'id="none-throttled"' in page
    backend.admin.throttled = lambda: {"throttled": [
        {"broker_name": "broker-a", "broker_addr": "h:1", "quota": "producer_byte_rate",
         "entity": f"client:{HOSTILE}", "owed_ms": 740}], "unanswered": []}
    page = client.get("/console/cluster").get_data(as_text=True)
    flat = re.sub(r">\s+<", "><", page)
    assert HOSTILE not in page
    assert "<td>producer_byte_rate</td><td>740</td>" in flat


def test_the_cluster_page_shows_the_control_plane_escaped(client):
    page = client.get("/console/cluster").get_data(as_text=True)
    assert HOSTILE not in page
    flat = re.sub(r">\s+<", "><", page)
    assert '<h2 id="control-plane">Control plane</h2>' in flat
    assert '<td class="role-leader">leader</td>' in flat
    assert '<td class="role-follower">follower</td><td class="lag">40</td>' in flat
    assert ('<td>e3</td><td>http://e3:2379</td><td class="down">no</td>'
            '<td class="role-unknown">-</td>') in flat
    assert "refused &lt;script&gt;" in page and "alarms: &lt;script&gt;" in page
    assert "leader e1, revision 4242" in page and 'id="no-leader"' not in page
    assert flat.count('<td class="down">no</td>') == 2   # cc-2 and e3


def test_a_cluster_without_a_leader_is_called_out(client, backend):
    plane = control_plane_json()
    plane["store"]["leader"] = ""
    backend.admin.control_plane = lambda: plane
    page = client.get("/console/cluster").get_data(as_text=True)
    assert 'id="no-leader"' in page and "(2 needed)" in page


def test_no_config_center_answering_leaves_the_brokers_on_the_page(client, backend):
    def unavailable():
        raise errors.ServiceUnavailable("no config center answered (tried cc-1:7070)")

    backend.admin.control_plane = unavailable
    response = client.get("/v1/cluster/control-plane")
    assert response.status_code == 503 and response.mimetype == "application/problem+json"
    assert response.get_json()["code"] == "SERVICE_UNAVAILABLE"
    page = client.get("/console/cluster")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="brokers"' in text
    assert ("503 SERVICE_UNAVAILABLE: no config center answered (tried cc-1:7070)" in text
            and 'id="control-plane-problem"' in text)


def test_the_api_calls_carry_the_users_headers(backend):
    app = create_app(backend, GatewaySettings(trace_ui_url=TRACE_UI))
    seen = []

    @app.before_request
    def record():
        seen.append((request.path, request.headers.get("Authorization"), request.remote_addr))

    app.test_client().get("/console/cluster", headers={"Authorization": "Bearer t0ken"},
                          environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert seen == [("/console/cluster", "Bearer t0ken", "10.1.2.3"),
                    ("/v1/cluster", "Bearer t0ken", "10.1.2.3"),
                    ("/v1/cluster/control-plane", "Bearer t0ken", "10.1.2.3"),
                    ("/v1/cluster/throttled", "Bearer t0ken", "10.1.2.3")]


def test_an_api_problem_is_shown_with_its_status(client):
    response = client.get("/console/groups/unknown")
    assert response.status_code == 404 and response.mimetype == "text/html"
    assert "GROUP_ID_NOT_FOUND" in response.get_data(as_text=True)
    response = client.get("/console/messages?topic=orders&begin=2026-01-02&end=2026-01-01")
    assert response.status_code == 400 and "must be after" in response.get_data(as_text=True)


def test_a_reset_asks_first_and_refuses_foreign_origins(client, backend):
    form = {"topic": "orders", "to": "1970-01-01T00:00:02"}
    asked = client.post("/console/groups/g1/reset-offsets", data=form)
    assert asked.status_code == 200 and "confirmed" in asked.get_data(as_text=True)
    assert backend.admin.resets == []
    foreign = client.post("/console/groups/g1/reset-offsets", data={**form, "confirmed": "yes"},
                          headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403 and backend.admin.resets == []
    done = client.post("/console/groups/g1/reset-offsets", data={**form, "confirmed": "yes"},
                       headers={"Origin": "http://localhost"})
    assert done.status_code == 200 and backend.admin.resets == [("g1", "orders", 2000)]


def test_the_operator_routes_validate_their_input(client):
    bad = client.post("/v1/consumer-groups/g1/reset-offsets",
                      json={"topic": "bad topic", "timestamp_ms": 0})
    assert bad.status_code == 400 and bad.get_json()["code"] == "INVALID_TOPIC"
    bad = client.get("/v1/topics/orders/messages?begin_ms=5&end_ms=5")
    assert bad.status_code == 400 and "end_ms" in bad.get_json()["detail"]
    bad = client.get("/v1/topics/orders/messages?max=0")
    assert bad.status_code == 400 and bad.get_json()["code"] == "INVALID_ARGUMENT"
